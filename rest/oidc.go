package rest

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"os"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
)

// ErrNoRefreshToken is returned (wrapped in a [*config.Error] naming the
// refresh-token field) when the OIDC id-token has expired, or cannot be
// read, and there is no refresh-token to get a new one.
var ErrNoRefreshToken = errors.New("the id-token has expired or is not usable, and there is no refresh-token to get a new one")

// ErrNoTokenEndpoint is returned (wrapped in an [*OIDCError]) when the
// issuer's discovery document names no token endpoint.
var ErrNoTokenEndpoint = errors.New("the discovery document names no token_endpoint")

// ErrNoIDToken is returned (wrapped in an [*OIDCError]) when the issuer
// answered a refresh without an id_token: it does not issue id-tokens on
// refresh, or the "openid" scope was not granted at login.
var ErrNoIDToken = errors.New("the token response has no id_token (the issuer does not return id-tokens on refresh, or the openid scope was not granted at login)")

// OIDCError is a failed exchange with an OpenID Connect issuer while
// refreshing an id-token: fetching its discovery document, or asking its
// token endpoint for new tokens. It is returned wrapped in a
// [*config.Error] that names the kubeconfig field. It never holds a token
// or the client secret.
type OIDCError struct {
	// Op is "discovery" or "refresh".
	Op string
	// URL is the discovery document's or the token endpoint's URL.
	URL string
	// StatusCode is the HTTP status of the answer, or 0 if there was none.
	StatusCode int
	// Code and Description are the OAuth 2.0 error code (for example
	// invalid_grant: the refresh-token has expired or was revoked) and the
	// error_description that the token endpoint returned, if any.
	Code, Description string
	// Err is the cause, if any: a connection error, [ErrNoTokenEndpoint],
	// [ErrNoIDToken], or a malformed answer.
	Err error
}

// Error implements the error interface.
func (e *OIDCError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "oidc %s at %s", e.Op, e.URL)
	if e.StatusCode != 0 {
		fmt.Fprintf(&b, ": %d %s", e.StatusCode, http.StatusText(e.StatusCode))
	}
	if e.Code != "" {
		fmt.Fprintf(&b, ": %s", e.Code)
	}
	if e.Description != "" {
		fmt.Fprintf(&b, ": %s", e.Description)
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

// Unwrap returns the cause.
func (e *OIDCError) Unwrap() error { return e.Err }

const (
	// oidcExpiryMargin: an id-token is refreshed this long before its exp,
	// so that it does not expire in flight or on a server whose clock runs
	// a little ahead (kubectl uses the same margin).
	oidcExpiryMargin = 10 * time.Second
	// maxOIDCResponse bounds what is read of an issuer's answer.
	maxOIDCResponse = 1 << 20
	// oidcTimeout bounds each exchange with the issuer.
	oidcTimeout = 30 * time.Second
)

// oidcProvider is the "oidc" auth provider. It sends the id-token while
// its exp claim (read, not verified: the API server verifies it) is more
// than oidcExpiryMargin away, and the server has not refused it. Otherwise
// it exchanges the refresh-token for new tokens at the issuer's token
// endpoint, found in the issuer's discovery document, and writes them back
// to the kubeconfig user entry they came from. One refresh at a time
// serves every request that waits for it.
type oidcProvider struct {
	issuer, clientID, clientSecret string
	file, user                     string // where the tokens came from
	hc                             *http.Client
	clock                          clock.Clock
	logger                         *slog.Logger

	refreshes flight[string]

	mu           sync.Mutex
	idToken      string
	refreshToken string
	expiry       time.Time // idToken's exp
	idTokenErr   error     // why idToken's exp cannot be read, or nil
	rejected     bool      // the server answered 401 to idToken
}

func newOIDCProvider(cfg config.Config, clk clock.Clock, logger *slog.Logger) (*oidcProvider, error) {
	o := cfg.Auth.OIDC
	p := &oidcProvider{
		issuer: o.IssuerURL, clientID: o.ClientID, clientSecret: o.ClientSecret,
		file: cfg.Auth.Origin, user: cfg.Auth.User,
		idToken: o.IDToken, refreshToken: o.RefreshToken,
		clock: clk, logger: logger,
	}
	if u, err := url.Parse(o.IssuerURL); err != nil || u.Scheme != "https" || u.Host == "" {
		return nil, p.fail(config.OIDCIssuerURL, fmt.Errorf("%q is not an https URL", o.IssuerURL))
	}
	if o.ClientID == "" {
		return nil, p.fail(config.OIDCClientID, errors.New("not set"))
	}
	tc := &tls.Config{MinVersion: tls.VersionTLS12}
	ca, caField := o.CAData, config.OIDCCAData
	if len(ca) == 0 && o.CAFile != "" {
		caField = config.OIDCCAFile
		b, err := os.ReadFile(o.CAFile)
		if err != nil {
			return nil, p.fail(caField, err)
		}
		ca = b
	}
	if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, p.fail(caField, errors.New("no PEM certificates found"))
		}
		tc.RootCAs = pool
	}
	p.hc = &http.Client{
		Transport: &http.Transport{
			Proxy:                 http.ProxyFromEnvironment,
			DialContext:           (&net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}).DialContext,
			TLSClientConfig:       tc,
			TLSHandshakeTimeout:   tlsHandshakeTimeout,
			ResponseHeaderTimeout: oidcTimeout,
			// Refreshes are rare: no pool, so no idle connection
			// outlives one.
			DisableKeepAlives: true,
		},
		Timeout: oidcTimeout,
		// A redirect could carry the refresh-token elsewhere.
		CheckRedirect: func(*http.Request, []*http.Request) error { return http.ErrUseLastResponse },
	}
	if p.idToken != "" {
		p.expiry, p.idTokenErr = jwtExpiry(p.idToken)
	}
	return p, nil
}

// fail wraps err in a config.Error naming the provider's config key.
func (p *oidcProvider) fail(key string, err error) error {
	return &config.Error{File: p.file, Field: userField(p.user, "auth-provider.config."+key), Err: err}
}

// token returns an id-token to send, refreshing it first if needed.
func (p *oidcProvider) token(ctx context.Context) (string, error) {
	if tok, refresh, err := p.current(); !refresh {
		return tok, err
	}
	tok, err := p.refreshes.do(ctx, func(ctx context.Context) (string, error) {
		if tok, refresh, err := p.current(); !refresh {
			return tok, err // a refresh that ended just before this one began
		}
		return p.refresh(ctx)
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return "", p.fail(config.OIDCRefreshToken, fmt.Errorf("waiting for the id-token refresh: %w", err))
	}
	return tok, err
}

// current returns the id-token when it can be sent as it is, or the error
// to return when it cannot and there is no refresh-token. refresh is true
// when the tokens must be refreshed instead.
func (p *oidcProvider) current() (tok string, refresh bool, err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.idToken != "" && p.idTokenErr == nil && !p.rejected && p.clock.Now().Add(oidcExpiryMargin).Before(p.expiry) {
		return p.idToken, false, nil
	}
	switch {
	case p.refreshToken != "":
		return "", true, nil
	case p.idTokenErr != nil:
		return "", false, p.fail(config.OIDCIDToken, p.idTokenErr)
	}
	return "", false, p.fail(config.OIDCRefreshToken, ErrNoRefreshToken)
}

// refused notes that the server answered 401 to token: if it is still the
// current id-token, the next request refreshes it. Without a refresh-token
// the id-token is kept, and the server's answer stands.
func (p *oidcProvider) refused(token string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if token == p.idToken && p.refreshToken != "" {
		p.rejected = true
	}
}

// refresh exchanges the refresh-token for new tokens, keeps them, and
// writes them back to the kubeconfig. New tokens that cannot be written are
// still used; the write's error is returned.
func (p *oidcProvider) refresh(ctx context.Context) (string, error) {
	p.mu.Lock()
	refreshToken := p.refreshToken
	p.mu.Unlock()
	endpoint, basic, err := p.discover(ctx)
	if err != nil {
		return "", p.fail(config.OIDCIssuerURL, err)
	}
	idToken, newRefresh, err := p.exchange(ctx, endpoint, basic, refreshToken)
	if err != nil {
		return "", p.fail(config.OIDCRefreshToken, err)
	}
	expiry, err := jwtExpiry(idToken)
	if err != nil {
		return "", p.fail(config.OIDCRefreshToken, &OIDCError{Op: "refresh", URL: endpoint, Err: fmt.Errorf("the new id_token: %w", err)})
	}
	if newRefresh == "" {
		newRefresh = refreshToken // the issuer does not rotate refresh-tokens
	}
	p.mu.Lock()
	p.idToken, p.refreshToken, p.expiry, p.idTokenErr, p.rejected = idToken, newRefresh, expiry, nil, false
	p.mu.Unlock()
	p.logger.Debug("oidc id-token refreshed", "issuer", p.issuer, "expires", expiry)
	if p.file != "" && p.user != "" {
		err := config.UpdateAuthProviderConfig(ctx, p.file, p.user, map[string]string{
			config.OIDCIDToken:      idToken,
			config.OIDCRefreshToken: newRefresh,
		})
		if err != nil {
			p.logger.Warn("cannot write refreshed oidc tokens to the kubeconfig; they are kept in memory only", "file", p.file, "user", p.user, "error", err)
			return "", err
		}
	}
	return idToken, nil
}

// discover fetches the issuer's discovery document and returns its token
// endpoint, and whether the client authenticates there with HTTP basic
// authentication (client_secret_basic, the default) rather than form
// fields (client_secret_post).
func (p *oidcProvider) discover(ctx context.Context) (endpoint string, basic bool, err error) {
	u := strings.TrimSuffix(p.issuer, "/") + "/.well-known/openid-configuration"
	fail := func(status int, err error) (string, bool, error) {
		return "", false, &OIDCError{Op: "discovery", URL: u, StatusCode: status, Err: err}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, u, nil)
	if err != nil {
		return fail(0, err)
	}
	req.Header.Set("Accept", "application/json")
	resp, err := p.hc.Do(req)
	if err != nil {
		return fail(0, unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOIDCResponse))
	if err != nil {
		return fail(resp.StatusCode, err)
	}
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode, nil)
	}
	var doc struct {
		TokenEndpoint string   `json:"token_endpoint"`
		AuthMethods   []string `json:"token_endpoint_auth_methods_supported"`
	}
	if err := json.Unmarshal(body, &doc); err != nil {
		return fail(resp.StatusCode, fmt.Errorf("not a discovery document: %w", err))
	}
	if doc.TokenEndpoint == "" {
		return fail(resp.StatusCode, ErrNoTokenEndpoint)
	}
	if t, err := url.Parse(doc.TokenEndpoint); err != nil || t.Scheme != "https" || t.Host == "" {
		return fail(resp.StatusCode, fmt.Errorf("the token_endpoint %q is not an https URL", doc.TokenEndpoint))
	}
	basic = p.clientSecret != "" && (len(doc.AuthMethods) == 0 || slices.Contains(doc.AuthMethods, "client_secret_basic") || !slices.Contains(doc.AuthMethods, "client_secret_post"))
	return doc.TokenEndpoint, basic, nil
}

// exchange sends the refresh-token grant (RFC 6749 section 6) and returns
// the new id-token and refresh-token (empty if the issuer sent none).
func (p *oidcProvider) exchange(ctx context.Context, endpoint string, basic bool, refreshToken string) (idToken, newRefresh string, err error) {
	fail := func(status int, code, desc string, err error) (string, string, error) {
		return "", "", &OIDCError{Op: "refresh", URL: endpoint, StatusCode: status, Code: p.scrub(code, refreshToken), Description: p.scrub(desc, refreshToken), Err: err}
	}
	form := url.Values{"grant_type": {"refresh_token"}, "refresh_token": {refreshToken}}
	if !basic {
		form.Set("client_id", p.clientID)
		if p.clientSecret != "" {
			form.Set("client_secret", p.clientSecret)
		}
	}
	req, err := http.NewRequestWithContext(ctx, http.MethodPost, endpoint, strings.NewReader(form.Encode()))
	if err != nil {
		return fail(0, "", "", err)
	}
	req.Header.Set("Content-Type", "application/x-www-form-urlencoded")
	req.Header.Set("Accept", "application/json")
	if basic {
		// RFC 6749 section 2.3.1: both parts are form-encoded first.
		req.SetBasicAuth(url.QueryEscape(p.clientID), url.QueryEscape(p.clientSecret))
	}
	resp, err := p.hc.Do(req)
	if err != nil {
		return fail(0, "", "", unwrapURLError(err))
	}
	defer resp.Body.Close()
	body, err := io.ReadAll(io.LimitReader(resp.Body, maxOIDCResponse))
	if err != nil {
		return fail(resp.StatusCode, "", "", err)
	}
	var tr struct {
		IDToken      string `json:"id_token"`
		RefreshToken string `json:"refresh_token"`
		Error        string `json:"error"`
		Description  string `json:"error_description"`
	}
	jerr := json.Unmarshal(body, &tr)
	if resp.StatusCode != http.StatusOK {
		return fail(resp.StatusCode, tr.Error, tr.Description, nil)
	}
	if jerr != nil {
		// Never quote the body: it may hold tokens.
		return fail(resp.StatusCode, "", "", fmt.Errorf("the answer is not a JSON token response: %w", jerr))
	}
	if tr.IDToken == "" {
		return fail(resp.StatusCode, "", "", ErrNoIDToken)
	}
	return tr.IDToken, tr.RefreshToken, nil
}

// unwrapURLError drops the *url.Error layer, whose text repeats the URL
// that OIDCError already names.
func unwrapURLError(err error) error {
	var ue *url.Error
	if errors.As(err, &ue) {
		return ue.Err
	}
	return err
}

// scrub shortens an issuer's error text and removes any secret of ours
// that it might echo.
func (p *oidcProvider) scrub(s, refreshToken string) string {
	for _, secret := range []string{refreshToken, p.clientSecret} {
		if secret != "" {
			s = strings.ReplaceAll(s, secret, "[redacted]")
		}
	}
	if len(s) > 256 {
		s = s[:256] + "..."
	}
	return strings.ToValidUTF8(s, "?")
}

// jwtExpiry reads the exp claim of a JWT without verifying the token (the
// API server does that). The error never quotes the token.
func jwtExpiry(token string) (time.Time, error) {
	parts := strings.Split(token, ".")
	if len(parts) != 3 {
		return time.Time{}, errors.New("not a JWT (want three dot-separated parts)")
	}
	payload, err := base64.RawURLEncoding.DecodeString(strings.TrimRight(parts[1], "="))
	if err != nil {
		return time.Time{}, errors.New("not a JWT: the payload is not base64url")
	}
	var claims struct {
		Exp *json.Number `json:"exp"`
	}
	if err := json.Unmarshal(payload, &claims); err != nil {
		return time.Time{}, errors.New("not a JWT: its claims cannot be read")
	}
	if claims.Exp == nil {
		return time.Time{}, errors.New("the JWT has no exp claim")
	}
	exp, err := claims.Exp.Float64()
	if err != nil {
		return time.Time{}, errors.New("the JWT's exp claim is not a number")
	}
	return time.Unix(int64(exp), 0), nil
}
