package rest

import (
	"crypto/tls"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
)

// Transport defaults. HTTP/2 health-check pings find dead connections
// (a half-open TCP connection would otherwise hang a watch for the kernel's
// keep-alive timeout).
const (
	dialTimeout         = 30 * time.Second
	tcpKeepAlive        = 30 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxIdlePerHost      = 25
	h2ReadIdleTimeout   = 30 * time.Second
	h2PingTimeout       = 15 * time.Second
)

// maxRetired is how many replaced connection pools a transport remembers,
// to close their idle connections when asked to. Older ones are left to
// their idle timeout.
const maxRetired = 8

// transport is the Client's innermost round tripper: an http.Transport (a
// connection pool) built from the Config, replaced by a new one when the
// TLS material changes, so that new requests go over new connections made
// with the new material. Requests and watches in flight keep the
// connection they have; the replaced pool's idle connections are closed,
// and its busy ones close when idle.
type transport struct {
	files *tlsFiles
	build func() *http.Transport
	cur   atomic.Pointer[http.Transport]

	mu      sync.Mutex
	retired []*http.Transport
}

// newTransport builds the base transport: TLS from cfg, proxy, HTTP/2.
func newTransport(cfg config.Config, host string, exec *execProvider, reload TLSReloadOptions, clk clock.Clock, logger *slog.Logger) (*transport, error) {
	files, err := newTLSFiles(cfg, reload, clk, logger)
	if err != nil {
		return nil, err
	}
	proxy := http.ProxyFromEnvironment
	if cfg.ProxyURL != "" {
		u, err := url.Parse(cfg.ProxyURL)
		if err != nil {
			return nil, &config.Error{File: cfg.Origin, Field: "proxy-url", Err: fmt.Errorf("invalid URL")}
		}
		switch u.Scheme {
		case "http", "https", "socks5", "socks5h":
		default:
			return nil, &config.Error{File: cfg.Origin, Field: "proxy-url", Err: fmt.Errorf("unsupported scheme %q", u.Scheme)}
		}
		proxy = http.ProxyURL(u)
	}
	tc := tlsConfig(cfg, host, files, exec)
	dial := (&net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}).DialContext
	t := &transport{files: files}
	t.build = func() *http.Transport {
		tc := tc.Clone()
		// The CA in use when the pool is made verifies every connection
		// of the pool, with crypto/tls's own verification.
		tc.RootCAs = files.pool.Load()
		return &http.Transport{
			Proxy:               proxy,
			DialContext:         dial,
			TLSClientConfig:     tc,
			TLSHandshakeTimeout: tlsHandshakeTimeout,
			MaxIdleConnsPerHost: maxIdlePerHost,
			IdleConnTimeout:     idleConnTimeout,
			ForceAttemptHTTP2:   true,
			DisableCompression:  cfg.DisableCompression,
			HTTP2: &http.HTTP2Config{
				SendPingTimeout: h2ReadIdleTimeout,
				PingTimeout:     h2PingTimeout,
			},
		}
	}
	t.cur.Store(t.build())
	return t, nil
}

// RoundTrip sends req with the current connection pool.
func (t *transport) RoundTrip(req *http.Request) (*http.Response, error) {
	resp, err := t.cur.Load().RoundTrip(req)
	if (err != nil && tlsRefused(err)) || (err == nil && resp.StatusCode == http.StatusUnauthorized) {
		// The server's certificate or ours may have been rotated: look
		// at the files again soon rather than at the next interval.
		t.files.checkSoon()
	}
	return resp, err
}

// checkFiles looks at the TLS files when a check is due, and replaces the
// connection pool when they changed. The Client calls it before lastCheck,
// so that reading files is not part of the window lastCheck narrows.
func (t *transport) checkFiles() { t.files.check(t.renew) }

// filesCheck calls check before passing each request on.
type filesCheck struct {
	check func()
	next  http.RoundTripper
}

func (f filesCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	f.check()
	return f.next.RoundTrip(req)
}

// renew replaces the connection pool with a new one, so that requests
// from now on use new connections with the current TLS material. The
// old pool's idle connections are closed; connections in use finish
// their requests and watches, and close once idle.
func (t *transport) renew() {
	t.mu.Lock()
	defer t.mu.Unlock()
	old := t.cur.Swap(t.build())
	old.CloseIdleConnections()
	t.retired = append(t.retired, old)
	if len(t.retired) > maxRetired {
		t.retired[0].CloseIdleConnections()
		t.retired[0] = nil
		t.retired = t.retired[1:]
	}
}

// CloseIdleConnections closes the idle connections of the current pool
// and of the pools it replaced.
func (t *transport) CloseIdleConnections() {
	t.cur.Load().CloseIdleConnections()
	t.mu.Lock()
	defer t.mu.Unlock()
	for _, r := range t.retired {
		r.CloseIdleConnections()
	}
}

func readTLSFile(cfg config.Config, field, path string, data []byte) ([]byte, error) {
	if len(data) > 0 || path == "" {
		return data, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &config.Error{File: cfg.Origin, Field: field, Err: err}
	}
	return b, nil
}

// tlsConfig returns the TLS configuration shared by every connection
// pool; the pool sets RootCAs. The client certificate is the one files
// holds when the handshake asks for it.
func tlsConfig(cfg config.Config, host string, files *tlsFiles, exec *execProvider) *tls.Config {
	t := cfg.TLS
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName, InsecureSkipVerify: t.Insecure}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	if files.pair.Load() != nil || exec != nil {
		tc.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if exec != nil {
				// An exec plugin's certificate wins over static ones, as
				// in kubectl. The handshake's context is the request's.
				if c, err := exec.clientCert(cri.Context()); err != nil {
					return nil, err
				} else if c != nil {
					return c, nil
				}
			}
			if c := files.pair.Load(); c != nil {
				return c, nil
			}
			return &tls.Certificate{}, nil
		}
	}
	return tc
}
