package rest

import (
	"encoding/base64"
	"encoding/json"
	"encoding/pem"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/oidctest"
)

// oidcAPI stands in for kube-apiserver's JWT authenticator: it accepts a
// bearer token that is a JWT for subject alice whose exp has not passed,
// unless the test revoked it. (The real server, which also checks the
// signature, is in TestIntegrationOIDC.)
type oidcAPI struct {
	mu      sync.Mutex
	revoked map[string]bool
	seen    []string
}

func (a *oidcAPI) revoke(tok string) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if a.revoked == nil {
		a.revoked = map[string]bool{}
	}
	a.revoked[tok] = true
}

// first returns the bearer token of the first request.
func (a *oidcAPI) first() string {
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.seen) == 0 {
		return ""
	}
	return a.seen[0]
}

func (a *oidcAPI) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	tok := strings.TrimPrefix(r.Header.Get("Authorization"), "Bearer ")
	a.mu.Lock()
	a.seen = append(a.seen, tok)
	revoked := a.revoked[tok]
	a.mu.Unlock()
	var claims struct {
		Sub string `json:"sub"`
		Exp int64  `json:"exp"`
	}
	parts := strings.Split(tok, ".")
	ok := len(parts) == 3 && !revoked
	if ok {
		payload, err := base64.RawURLEncoding.DecodeString(parts[1])
		ok = err == nil && json.Unmarshal(payload, &claims) == nil && claims.Sub == "alice" && time.Now().Unix() < claims.Exp
	}
	w.Header().Set("Content-Type", "application/json")
	if !ok {
		w.WriteHeader(http.StatusUnauthorized)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401,"message":"Unauthorized"}`))
		return
	}
	w.Write([]byte(`{}`))
}

// oidcKubeconfig is a kubeconfig whose user alice has an oidc
// auth-provider with config cfg, for a plain-HTTP server.
func oidcKubeconfig(server string, cfg map[string]string) string {
	var b strings.Builder
	fmt.Fprintf(&b, "apiVersion: v1\nkind: Config\ncurrent-context: x\nclusters:\n- name: c\n  cluster: {server: %q}\n", server)
	b.WriteString("users:\n- name: alice\n  user:\n    auth-provider:\n      name: oidc\n      config:\n")
	keys := make([]string, 0, len(cfg))
	for k := range cfg {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		fmt.Fprintf(&b, "        %s: %q\n", k, cfg[k])
	}
	b.WriteString("contexts:\n- name: x\n  context: {cluster: c, user: alice}\n")
	return b.String()
}

// oidcConfig is the auth-provider config for iss, with the given tokens.
func oidcConfig(iss *oidctest.Issuer, secret, idToken, refreshToken string) map[string]string {
	m := map[string]string{
		config.OIDCIssuerURL: iss.URL,
		config.OIDCClientID:  "loom",
		config.OIDCCAData:    base64.StdEncoding.EncodeToString(iss.CAPEM),
	}
	for k, v := range map[string]string{config.OIDCClientSecret: secret, config.OIDCIDToken: idToken, config.OIDCRefreshToken: refreshToken} {
		if v != "" {
			m[k] = v
		}
	}
	return m
}

// oidcClient writes the kubeconfig to a file, loads it and returns a
// client and the file.
func oidcClient(t *testing.T, server string, cfg map[string]string, opts Options) (*Client, string) {
	t.Helper()
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, []byte(oidcKubeconfig(server, cfg)), 0o600); err != nil {
		t.Fatal(err)
	}
	loaded, err := config.Load(config.LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(loaded, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	return c, path
}

// fileTokens returns alice's id-token and refresh-token in the file.
func fileTokens(t *testing.T, path string) (idToken, refreshToken string) {
	t.Helper()
	kc, err := config.LoadKubeconfig(config.LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	c := kc.Users["alice"].AuthProvider.Config
	return c[config.OIDCIDToken], c[config.OIDCRefreshToken]
}

func TestOIDCRefresh(t *testing.T) {
	hour := time.Now().Add(time.Hour)
	tests := []struct {
		name        string
		opts        oidctest.Options
		idToken     func(*oidctest.Issuer) string
		wantRefresh bool
		wantMethod  string
	}{
		{name: "valid id-token is sent as it is", idToken: func(i *oidctest.Issuer) string { return i.IDToken("alice", hour) }},
		{name: "expired id-token is refreshed", idToken: func(i *oidctest.Issuer) string { return i.IDToken("alice", time.Now().Add(-time.Minute)) }, wantRefresh: true, wantMethod: "none"},
		{name: "id-token about to expire is refreshed", idToken: func(i *oidctest.Issuer) string { return i.IDToken("alice", time.Now().Add(5*time.Second)) }, wantRefresh: true, wantMethod: "none"},
		{name: "no id-token", idToken: func(*oidctest.Issuer) string { return "" }, wantRefresh: true, wantMethod: "none"},
		{name: "id-token that is not a JWT", idToken: func(*oidctest.Issuer) string { return "opaque" }, wantRefresh: true, wantMethod: "none"},
		{name: "secret in basic auth by default", opts: oidctest.Options{ClientSecret: "s3cret"}, idToken: func(*oidctest.Issuer) string { return "" }, wantRefresh: true, wantMethod: "client_secret_basic"},
		{name: "secret in the form when the issuer wants it there", opts: oidctest.Options{ClientSecret: "s3cret", AuthMethods: []string{"client_secret_post"}}, idToken: func(*oidctest.Issuer) string { return "" }, wantRefresh: true, wantMethod: "client_secret_post"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			iss := oidctest.New(t, tt.opts)
			api := &oidcAPI{}
			srv := httptest.NewServer(api)
			t.Cleanup(srv.Close)
			id, rt := tt.idToken(iss), iss.RefreshToken("alice")
			c, path := oidcClient(t, srv.URL, oidcConfig(iss, tt.opts.ClientSecret, id, rt), Options{})
			for range 3 {
				if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
			}
			wantCalls := 0
			if tt.wantRefresh {
				wantCalls = 1
			}
			if n := iss.Refreshes(); n != wantCalls {
				t.Fatalf("%d refreshes for 3 requests, want %d", n, wantCalls)
			}
			gotID, gotRT := fileTokens(t, path)
			if !tt.wantRefresh {
				if gotID != id || gotRT != rt || api.first() != id {
					t.Errorf("tokens changed without a refresh")
				}
				return
			}
			newID, newRT, method := iss.Last()
			if gotID != newID || gotRT != newRT {
				t.Errorf("the kubeconfig does not hold the refreshed tokens")
			}
			if api.first() != newID {
				t.Errorf("the request did not carry the refreshed id-token")
			}
			if method != tt.wantMethod {
				t.Errorf("client authentication %q, want %q", method, tt.wantMethod)
			}
		})
	}
}

// TestOIDCRefreshAfter401 checks that an id-token the server refused is
// refreshed on the next request.
func TestOIDCRefreshAfter401(t *testing.T) {
	iss := oidctest.New(t, oidctest.Options{})
	api := &oidcAPI{}
	srv := httptest.NewServer(api)
	t.Cleanup(srv.Close)
	id := iss.IDToken("alice", time.Now().Add(time.Hour))
	c, path := oidcClient(t, srv.URL, oidcConfig(iss, "", id, iss.RefreshToken("alice")), Options{})
	api.revoke(id)
	if err := c.Get().AbsPath("x").Do(t.Context(), nil); !apierrors.IsUnauthorized(err) {
		t.Fatalf("revoked id-token: %v, want 401", err)
	}
	for range 2 {
		if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
			t.Fatalf("after a 401 the id-token is refreshed: %v", err)
		}
	}
	if n := iss.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
	if got, _ := fileTokens(t, path); got == id {
		t.Error("the refreshed id-token was not written back")
	}
}

// TestOIDCSingleRefresh sends concurrent requests with an expired id-token:
// they share one refresh.
func TestOIDCSingleRefresh(t *testing.T) {
	iss := oidctest.New(t, oidctest.Options{})
	srv := httptest.NewServer(&oidcAPI{})
	t.Cleanup(srv.Close)
	c, _ := oidcClient(t, srv.URL, oidcConfig(iss, "", iss.IDToken("alice", time.Now().Add(-time.Minute)), iss.RefreshToken("alice")), Options{})
	var wg sync.WaitGroup
	errs := make(chan error, 20)
	for range 20 {
		wg.Go(func() { errs <- c.Get().AbsPath("x").Do(t.Context(), nil) })
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Error(err)
		}
	}
	if n := iss.Refreshes(); n != 1 {
		t.Errorf("%d refreshes for 20 concurrent requests, want 1", n)
	}
}

// fakeIssuer serves a discovery document and a token endpoint with the
// given answers; "{{URL}}" in them is replaced with the server's URL.
func fakeIssuer(t *testing.T, discoveryCode int, discovery string, tokenCode int, token string) *httptest.Server {
	t.Helper()
	var srv *httptest.Server
	srv = httptest.NewTLSServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code, body := discoveryCode, discovery
		if r.URL.Path == "/token" {
			code, body = tokenCode, token
		}
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(strings.ReplaceAll(body, "{{URL}}", srv.URL)))
	}))
	t.Cleanup(srv.Close)
	return srv
}

func TestOIDCErrors(t *testing.T) {
	iss := oidctest.New(t, oidctest.Options{ClientSecret: "s3cret"})
	srv := httptest.NewServer(&oidcAPI{})
	t.Cleanup(srv.Close)
	expired := iss.IDToken("alice", time.Now().Add(-time.Minute))
	stopped := httptest.NewTLSServer(http.NotFoundHandler())
	stopped.Close()
	goodDiscovery := `{"issuer":"{{URL}}","token_endpoint":"{{URL}}/token"}`
	const user = `users["alice"].auth-provider.config.`

	tests := []struct {
		name string
		// issuer, when set, replaces iss.
		issuer    *httptest.Server
		secret    string
		idToken   string
		refresh   string
		wantField string
		wantIs    error
		want      string
		check     func(t *testing.T, err error)
	}{
		{name: "expired without refresh-token", idToken: expired, wantField: user + "refresh-token", wantIs: ErrNoRefreshToken},
		{name: "no tokens at all", wantField: user + "refresh-token", wantIs: ErrNoRefreshToken},
		{name: "id-token not a JWT without refresh-token", idToken: "opaque", wantField: user + "id-token", want: "not a JWT"},
		{name: "id-token without exp without refresh-token", idToken: "e30." + base64.RawURLEncoding.EncodeToString([]byte(`{"sub":"alice"}`)) + ".sig", wantField: user + "id-token", want: "no exp claim"},
		{name: "unreachable issuer", issuer: stopped, refresh: "r", wantField: user + "idp-issuer-url", wantIs: syscall.ECONNREFUSED, check: wantOIDCError("discovery", 0, "")},
		{name: "no discovery document", issuer: fakeIssuer(t, 404, `not found`, 200, ``), refresh: "r", wantField: user + "idp-issuer-url", check: wantOIDCError("discovery", 404, "")},
		{name: "discovery not JSON", issuer: fakeIssuer(t, 200, `<html>`, 200, ``), refresh: "r", wantField: user + "idp-issuer-url", want: "not a discovery document"},
		{name: "no token endpoint", issuer: fakeIssuer(t, 200, `{"issuer":"{{URL}}"}`, 200, ``), refresh: "r", wantField: user + "idp-issuer-url", wantIs: ErrNoTokenEndpoint},
		{name: "plain-HTTP token endpoint", issuer: fakeIssuer(t, 200, `{"token_endpoint":"http://127.0.0.1:1/token"}`, 200, ``), refresh: "r", wantField: user + "idp-issuer-url", want: "not an https URL"},
		{name: "refresh-token refused", refresh: "rt-unknown", secret: "s3cret", wantField: user + "refresh-token", check: wantOIDCError("refresh", 400, "invalid_grant")},
		{name: "wrong client secret", refresh: iss.RefreshToken("alice"), secret: "wrong", wantField: user + "refresh-token", check: wantOIDCError("refresh", 401, "invalid_client")},
		{name: "answer without id_token", issuer: fakeIssuer(t, 200, goodDiscovery, 200, `{"access_token":"a","refresh_token":"b"}`), refresh: "r", wantField: user + "refresh-token", wantIs: ErrNoIDToken},
		{name: "answer not JSON", issuer: fakeIssuer(t, 200, goodDiscovery, 200, `id_token=x`), refresh: "r", wantField: user + "refresh-token", want: "not a JSON token response"},
		{name: "new id_token not a JWT", issuer: fakeIssuer(t, 200, goodDiscovery, 200, `{"id_token":"opaque"}`), refresh: "r", wantField: user + "refresh-token", want: "the new id_token: not a JWT"},
		{name: "error answer that is not JSON", issuer: fakeIssuer(t, 200, goodDiscovery, 502, `<html>bad gateway</html>`), refresh: "r", wantField: user + "refresh-token", check: wantOIDCError("refresh", 502, "")},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cfg := oidcConfig(iss, tt.secret, tt.idToken, tt.refresh)
			if tt.issuer != nil {
				cfg[config.OIDCIssuerURL] = tt.issuer.URL
				cfg[config.OIDCCAData] = base64.StdEncoding.EncodeToString(pemCertOf(tt.issuer))
			}
			c, path := oidcClient(t, srv.URL, cfg, Options{Retry: RetryPolicy{MaxRetries: -1}})
			before, _ := os.ReadFile(path)
			err := c.Get().AbsPath("x").Do(t.Context(), nil)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Field != tt.wantField || ce.File != path {
				t.Fatalf("err = %v, want a *config.Error on %s in %s", err, tt.wantField, path)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("err = %v, want errors.Is %v", err, tt.wantIs)
			}
			if tt.want != "" && !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want it to say %q", err, tt.want)
			}
			if tt.check != nil {
				tt.check(t, err)
			}
			if after, _ := os.ReadFile(path); string(after) != string(before) {
				t.Error("a failed refresh changed the kubeconfig")
			}
		})
	}
}

func wantOIDCError(op string, status int, code string) func(*testing.T, error) {
	return func(t *testing.T, err error) {
		t.Helper()
		var oe *OIDCError
		if !errors.As(err, &oe) || oe.Op != op || oe.StatusCode != status || oe.Code != code {
			t.Errorf("err = %v, want an OIDCError op=%s status=%d code=%q", err, op, status, code)
		}
	}
}

func pemCertOf(srv *httptest.Server) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: srv.Certificate().Raw})
}

// TestOIDCWriteBackFails removes the user from the kubeconfig after it was
// loaded: the refresh reports that the tokens could not be written, and
// later requests use the refreshed tokens kept in memory.
func TestOIDCWriteBackFails(t *testing.T) {
	iss := oidctest.New(t, oidctest.Options{})
	srv := httptest.NewServer(&oidcAPI{})
	t.Cleanup(srv.Close)
	c, path := oidcClient(t, srv.URL, oidcConfig(iss, "", "", iss.RefreshToken("alice")), Options{})
	os.WriteFile(path, []byte("apiVersion: v1\nkind: Config\nusers: []\n"), 0o600)
	err := c.Get().AbsPath("x").Do(t.Context(), nil)
	var ce *config.Error
	if !errors.As(err, &ce) || ce.File != path || ce.Field != `users["alice"].auth-provider.config` || !strings.Contains(err.Error(), "not in the file") {
		t.Fatalf("err = %v, want a *config.Error about writing the tokens back", err)
	}
	if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
		t.Fatalf("the refreshed tokens are kept in memory: %v", err)
	}
	if n := iss.Refreshes(); n != 1 {
		t.Errorf("%d refreshes, want 1", n)
	}
}

// TestOIDCConfigErrors checks what New refuses in a Config built in code.
func TestOIDCConfigErrors(t *testing.T) {
	dir := t.TempDir()
	tests := []struct {
		name      string
		oidc      config.OIDC
		wantField string
	}{
		{"http issuer", config.OIDC{IssuerURL: "http://idp", ClientID: "k"}, "auth-provider.config.idp-issuer-url"},
		{"no issuer", config.OIDC{ClientID: "k"}, "auth-provider.config.idp-issuer-url"},
		{"no client-id", config.OIDC{IssuerURL: "https://idp"}, "auth-provider.config.client-id"},
		{"CA data not PEM", config.OIDC{IssuerURL: "https://idp", ClientID: "k", CAData: []byte("x")}, "auth-provider.config.idp-certificate-authority-data"},
		{"CA file missing", config.OIDC{IssuerURL: "https://idp", ClientID: "k", CAFile: filepath.Join(dir, "nope")}, "auth-provider.config.idp-certificate-authority"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			_, err := New(config.Config{Host: "https://s", Auth: config.Auth{OIDC: &tt.oidc, Origin: "/kc"}}, Options{})
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Field != tt.wantField || ce.File != "/kc" {
				t.Errorf("err = %v, want a *config.Error on %s", err, tt.wantField)
			}
		})
	}
}

func TestJWTExpiry(t *testing.T) {
	payload := func(s string) string { return "e30." + base64.RawURLEncoding.EncodeToString([]byte(s)) + ".c2ln" }
	tests := []struct {
		token   string
		want    int64
		wantErr string
	}{
		{payload(`{"exp":1700000000}`), 1700000000, ""},
		{payload(`{"exp":1700000000.7}`), 1700000000, ""},
		{payload(`{"exp":"1700000000"}`), 1700000000, ""},
		{payload(`{"sub":"x"}`), 0, "no exp claim"},
		{payload(`{"exp":"soon"}`), 0, "claims cannot be read"},
		{payload(`[1]`), 0, "claims cannot be read"},
		{"a.%%%.c", 0, "not base64url"},
		{"a.b", 0, "three dot-separated parts"},
		{"", 0, "three dot-separated parts"},
	}
	for _, tt := range tests {
		got, err := jwtExpiry(tt.token)
		if tt.wantErr != "" {
			if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
				t.Errorf("%q: err %v, want %q", tt.token, err, tt.wantErr)
			}
			continue
		}
		if err != nil || got.Unix() != tt.want {
			t.Errorf("%q: %v %v, want %d", tt.token, got.Unix(), err, tt.want)
		}
	}
}
