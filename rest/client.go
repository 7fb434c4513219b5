package rest

import (
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/url"
	"runtime"
	"strings"
	"time"

	"go.opentelemetry.io/otel/trace"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/tracing"
)

// Options configure [New]. The zero value is valid: JSON, no observer, a
// discarding logger, the default retry policy and a transport built from
// the Config.
type Options struct {
	// ContentType is the wire format to ask for. Default [JSON].
	ContentType ContentType
	// Logger receives debug lines for every request (method, URL, status,
	// latency, attempt, headers with credentials masked). Nil means a
	// logger that discards everything. Bodies are never logged.
	Logger *slog.Logger
	// Observer is told about every attempt. Nil means none.
	Observer Observer
	// Retry configures retries. The zero value is [RetryPolicy]'s defaults.
	Retry RetryPolicy
	// Transport, when set, replaces the HTTP transport built from the
	// Config's TLS and proxy settings; authentication, impersonation and
	// the user agent are still layered on top. For tests and for callers
	// with special dialing needs.
	Transport http.RoundTripper
	// TokenFileRefresh is how often a BearerTokenFile is re-read. Default
	// one minute. The token is also re-read after a 401.
	TokenFileRefresh time.Duration
	// Exec configures exec credential plugins: whether they may use the
	// user's terminal. The zero value offers none.
	Exec ExecOptions
	// TLSReload configures how the CA, client certificate and key files
	// named by the Config are followed as they change (see "Rotated
	// certificate files" in the package documentation). The zero value
	// checks them at most once a minute. It has no effect when Transport
	// is set.
	TLSReload TLSReloadOptions
	// Tracing, when its Provider is set, makes a client span per attempt
	// and sends its traceparent header; with Annotate, the typed clients
	// built on this Client stamp the objects they write (see package
	// tracing). The zero value is off.
	Tracing tracing.Options

	clock clock.Clock // tests only; nil means the real clock
}

// Client sends requests to one API server. It is safe for concurrent use
// and should be shared: it holds a connection pool (HTTP/2 multiplexes
// requests and watches over one connection).
type Client struct {
	base        *url.URL
	hc          *http.Client
	transport   *transport // nil when Options.Transport was given
	contentType ContentType
	logger      *slog.Logger
	observer    Observer
	retry       RetryPolicy
	clock       clock.Clock
	limiter     *tokenBucket
	timeout     time.Duration
	auth        *authTransport
	namespace   string
	tracer      trace.Tracer // nil when tracing is off
	tracing     tracing.Options
}

// DefaultUserAgent returns what is sent when Config.UserAgent is empty:
// "loom/v0 (GOOS/GOARCH)".
func DefaultUserAgent() string {
	return fmt.Sprintf("loom/v0 (%s/%s)", runtime.GOOS, runtime.GOARCH)
}

// New returns a Client for cfg. It reads the TLS files named in cfg (a
// missing or bad file is a [*config.Error] naming it) but does not contact
// the server. The Client reads those files again when they change (see
// "Rotated certificate files" in the package documentation).
//
// TLS verification is on unless cfg.TLS.Insecure is set. The transport
// speaks HTTP/2 where the server offers it, with keep-alives and
// health-check pings; client-side rate limiting is off unless cfg.QPS > 0.
func New(cfg config.Config, opts Options) (*Client, error) {
	if cfg.Host == "" {
		return nil, &config.Error{Field: "host", Err: fmt.Errorf("no server URL")}
	}
	host := cfg.Host
	if !strings.Contains(host, "://") {
		host = "https://" + host
	}
	base, err := url.Parse(host)
	if err != nil {
		return nil, &config.Error{File: cfg.Origin, Field: "server", Err: err}
	}
	if base.Scheme != "https" && base.Scheme != "http" {
		return nil, &config.Error{File: cfg.Origin, Field: "server", Err: fmt.Errorf("unsupported scheme %q", base.Scheme)}
	}
	if base.User != nil {
		if cfg.Auth.Username == "" && cfg.Auth.BearerToken == "" && cfg.Auth.BearerTokenFile == "" && cfg.Auth.Exec == nil && cfg.Auth.OIDC == nil {
			cfg.Auth.Username = base.User.Username()
			cfg.Auth.Password, _ = base.User.Password()
		}
		base.User = nil
	}
	base.Path = strings.TrimRight(base.Path, "/")
	base.RawQuery, base.Fragment = "", ""

	c := &Client{
		base:        base,
		contentType: opts.ContentType,
		logger:      opts.Logger,
		observer:    opts.Observer,
		retry:       opts.Retry.withDefaults(),
		clock:       clock.OrReal(opts.clock),
		timeout:     cfg.Timeout,
		namespace:   cfg.Namespace,
		tracer:      opts.Tracing.Tracer(),
		tracing:     opts.Tracing,
	}
	if c.logger == nil {
		c.logger = slog.New(slog.DiscardHandler)
	}
	if cfg.QPS > 0 {
		c.limiter = newTokenBucket(float64(cfg.QPS), cfg.Burst, c.clock)
	}

	var exec *execProvider
	if cfg.Auth.Exec != nil {
		exec = newExecProvider(cfg, opts.Exec, c.clock, c.logger)
	}
	var oidc *oidcProvider
	if cfg.Auth.OIDC != nil {
		if oidc, err = newOIDCProvider(cfg, c.clock, c.logger); err != nil {
			return nil, err
		}
	}
	base2 := opts.Transport
	if base2 == nil {
		t, err := newTransport(cfg, base.Hostname(), exec, opts.TLSReload, c.clock, c.logger)
		if err != nil {
			return nil, err
		}
		c.transport = t
		base2 = t
		if exec != nil {
			exec.onCertRotate = t.renew
		}
	}
	base2 = lastCheck{next: base2}
	if c.transport != nil {
		base2 = filesCheck{check: c.transport.checkFiles, next: base2}
	}
	base2 = &logTransport{next: base2, logger: c.logger}
	c.auth, err = newAuthTransport(cfg, base2, exec, oidc, opts.TokenFileRefresh, c.clock, c.logger)
	if err != nil {
		return nil, err
	}
	ua := cfg.UserAgent
	if ua == "" {
		ua = DefaultUserAgent()
	}
	var rt http.RoundTripper = c.auth
	rt = &headerTransport{next: rt, userAgent: ua, imp: cfg.Impersonate}
	c.hc = &http.Client{
		Transport: rt,
		// The API server does not redirect API calls; following a redirect
		// could send credentials to another host.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	return c, nil
}

// Namespace returns the default namespace of the Config the Client was
// built from.
func (c *Client) Namespace() string { return c.namespace }

// Tracing returns the tracing options the Client was made with.
func (c *Client) Tracing() tracing.Options { return c.tracing }

// ContentType returns the wire format the Client asks for.
func (c *Client) ContentType() ContentType { return c.contentType }

// HTTPClient returns the *http.Client that carries the Client's
// authentication, for requests the builder does not cover. Retries, rate
// limiting, logging and observation are not applied to it.
func (c *Client) HTTPClient() *http.Client { return c.hc }

// CloseIdleConnections closes idle connections in the pool, and in the
// pools that rotated certificate files made the Client replace.
func (c *Client) CloseIdleConnections() {
	// c.hc's Transport is a chain of wrappers that do not pass the call
	// on, so close the pool itself.
	if c.transport != nil {
		c.transport.CloseIdleConnections()
	}
	c.hc.CloseIdleConnections()
}

// Get starts a GET request.
func (c *Client) Get() *Request { return c.Verb(http.MethodGet) }

// Post starts a POST request (create).
func (c *Client) Post() *Request { return c.Verb(http.MethodPost) }

// Put starts a PUT request (update).
func (c *Client) Put() *Request { return c.Verb(http.MethodPut) }

// Delete starts a DELETE request.
func (c *Client) Delete() *Request { return c.Verb(http.MethodDelete) }

// Patch starts a PATCH request with the given patch content type, for
// example types.MergePatchType or types.ApplyPatchType.
func (c *Client) Patch(patchType string) *Request {
	r := c.Verb(http.MethodPatch)
	r.bodyType = patchType
	return r
}

// Verb starts a request with any HTTP method.
func (c *Client) Verb(method string) *Request {
	return &Request{c: c, method: method, timeout: c.timeout}
}

func drain(body io.ReadCloser) {
	io.CopyN(io.Discard, body, 64<<10)
	body.Close()
}
