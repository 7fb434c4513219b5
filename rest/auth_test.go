package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"io"
	"log"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/oidctest"
)

// echoAuth answers 200 with the caller's credentials summarized in headers,
// and 401 for a bearer token other than want (when want is set).
func echoAuth(want *atomic.Value) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		auth := r.Header.Get("Authorization")
		if want != nil {
			if tok, _ := want.Load().(string); tok != "" && auth != "Bearer "+tok {
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(401)
				w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"Unauthorized","code":401,"message":"Unauthorized"}`))
				return
			}
		}
		cn := ""
		if r.TLS != nil && len(r.TLS.PeerCertificates) > 0 {
			cn = r.TLS.PeerCertificates[0].Subject.CommonName
		}
		w.Header().Set("X-Auth", auth)
		w.Header().Set("X-CN", cn)
		w.Header().Set("X-UA", r.Header.Get("User-Agent"))
		w.Header().Set("X-Imp", fmt.Sprint(r.Header.Values("Impersonate-User"), r.Header.Values("Impersonate-Uid"), r.Header.Values("Impersonate-Group"), r.Header.Values("Impersonate-Extra-Scopes"), r.Header.Values("Impersonate-Extra-Example.com%2Fteam")))
		w.Header().Set("X-Proto", r.Proto)
		w.Write([]byte(`{}`))
	})
}

func rawHeaders(t *testing.T, c *Client) http.Header {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base.String()+"/x", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	return resp.Header
}

func TestTLS(t *testing.T) {
	ca, clientCA, otherCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other")
	srv := newTLSServer(t, ca, clientCA, echoAuth(nil))
	certPEM, keyPEM := clientCA.issue(t, "alice", false)
	dir := t.TempDir()
	certFile, keyFile, caFile := filepath.Join(dir, "c.crt"), filepath.Join(dir, "c.key"), filepath.Join(dir, "ca.crt")
	os.WriteFile(certFile, certPEM, 0o600)
	os.WriteFile(keyFile, keyPEM, 0o600)
	os.WriteFile(caFile, ca.certPEM, 0o600)

	t.Run("client cert data, CA data, HTTP/2", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: ca.certPEM, CertData: certPEM, KeyData: keyPEM}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		h := rawHeaders(t, c)
		if h.Get("X-CN") != "alice" || h.Get("X-Proto") != "HTTP/2.0" {
			t.Errorf("CN %q proto %q", h.Get("X-CN"), h.Get("X-Proto"))
		}
	})
	t.Run("client cert files", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAFile: caFile, CertFile: certFile, KeyFile: keyFile}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if h := rawHeaders(t, c); h.Get("X-CN") != "alice" {
			t.Errorf("CN %q", h.Get("X-CN"))
		}
	})
	t.Run("wrong CA", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: otherCA.certPEM, CertData: certPEM, KeyData: keyPEM}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Get().AbsPath("version").Do(t.Context(), nil)
		var tv *TLSVerificationError
		if !errors.As(err, &tv) || !strings.Contains(err.Error(), "TLS verification") {
			t.Fatalf("err = %v, want a *TLSVerificationError", err)
		}
	})
	t.Run("system roots by default", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tv *TLSVerificationError
		if err := c.Get().AbsPath("version").Do(t.Context(), nil); !errors.As(err, &tv) {
			t.Fatalf("err = %v, want a *TLSVerificationError", err)
		}
	})
	t.Run("wrong server name", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: ca.certPEM, ServerName: "kubernetes.example", CertData: certPEM, KeyData: keyPEM}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		var tv *TLSVerificationError
		if err := c.Get().AbsPath("version").Do(t.Context(), nil); !errors.As(err, &tv) {
			t.Fatalf("err = %v, want a *TLSVerificationError", err)
		}
	})
	t.Run("insecure", func(t *testing.T) {
		c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{Insecure: true, CertData: certPEM, KeyData: keyPEM}}, Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get().AbsPath("version").Do(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("config errors", func(t *testing.T) {
		for _, tc := range []struct {
			tls   config.TLS
			field string
		}{
			{config.TLS{CAFile: filepath.Join(dir, "missing")}, "certificate-authority"},
			{config.TLS{CAData: []byte("not pem")}, "certificate-authority"},
			{config.TLS{CertFile: filepath.Join(dir, "missing"), KeyData: keyPEM}, "client-certificate"},
			{config.TLS{CertData: certPEM, KeyFile: filepath.Join(dir, "missing")}, "client-key"},
			{config.TLS{CertData: certPEM, KeyData: []byte("garbage")}, "client-certificate"},
			{config.TLS{Insecure: true, CAData: ca.certPEM}, "insecure-skip-tls-verify"},
		} {
			_, err := New(config.Config{Host: srv.URL, Origin: "/my/kubeconfig", TLS: tc.tls}, Options{})
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Field != tc.field || ce.File != "/my/kubeconfig" {
				t.Errorf("%+v: err = %v, want field %s", tc.tls, err, tc.field)
			}
		}
	})
}

func TestAuthHeaders(t *testing.T) {
	c, _ := newTestClient(t, echoAuth(nil), Options{}, func(cfg *config.Config) {
		cfg.Auth.BearerToken = "tok"
		cfg.UserAgent = "my-agent/1"
		cfg.Impersonate = config.Impersonation{User: "bob", UID: "42", Groups: []string{"g1", "g2"}, Extra: map[string][]string{"scopes": {"a", "b"}, "example.com/team": {"x"}}}
	})
	h := rawHeaders(t, c)
	if h.Get("X-Auth") != "Bearer tok" || h.Get("X-UA") != "my-agent/1" {
		t.Errorf("auth %q ua %q", h.Get("X-Auth"), h.Get("X-UA"))
	}
	if got, want := h.Get("X-Imp"), "[bob] [42] [g1 g2] [a b] [x]"; got != want {
		t.Errorf("impersonation headers %q, want %q", got, want)
	}
	c, _ = newTestClient(t, echoAuth(nil), Options{}, func(cfg *config.Config) { cfg.Auth.Username, cfg.Auth.Password = "admin", "pw" })
	if h := rawHeaders(t, c); h.Get("X-Auth") != "Basic YWRtaW46cHc=" || !strings.HasPrefix(h.Get("X-UA"), "loom/") {
		t.Errorf("basic auth %q ua %q", h.Get("X-Auth"), h.Get("X-UA"))
	}
	// A header the caller sets wins.
	c, _ = newTestClient(t, echoAuth(nil), Options{}, func(cfg *config.Config) { cfg.Auth.BearerToken = "tok" })
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base.String()+"/x", nil)
	req.Header.Set("Authorization", "Bearer mine")
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Auth") != "Bearer mine" {
		t.Errorf("caller's header replaced: %q", resp.Header.Get("X-Auth"))
	}
}

func TestTokenFileRotation(t *testing.T) {
	dir := t.TempDir()
	tokenFile := filepath.Join(dir, "token")
	os.WriteFile(tokenFile, []byte("one\n"), 0o600)
	var want atomic.Value
	want.Store("one")
	fake := clock.NewFake(time.Unix(0, 0))
	c, _ := newTestClient(t, echoAuth(&want), Options{clock: fake}, func(cfg *config.Config) { cfg.Auth.BearerTokenFile = tokenFile })
	get := func() error { return c.Get().AbsPath("x").Do(t.Context(), nil) }
	if err := get(); err != nil {
		t.Fatal(err)
	}
	// Rotated on disk: the cached token is used until the period passes.
	os.WriteFile(tokenFile, []byte("two"), 0o600)
	if err := get(); err != nil {
		t.Fatalf("cached token should still be accepted: %v", err)
	}
	want.Store("two")
	fake.Step(61 * time.Second)
	if err := get(); err != nil {
		t.Fatalf("after the refresh period: %v", err)
	}
	// A 401 makes the next request re-read the file at once.
	os.WriteFile(tokenFile, []byte("three"), 0o600)
	want.Store("three")
	if err := get(); !apierrors.IsUnauthorized(err) {
		t.Fatalf("stale token: %v, want Unauthorized", err)
	}
	if err := get(); err != nil {
		t.Fatalf("after a 401 the file is re-read: %v", err)
	}
	// An unreadable file keeps the previous token.
	os.Remove(tokenFile)
	fake.Step(61 * time.Second)
	if err := get(); err != nil {
		t.Fatalf("missing file keeps the old token: %v", err)
	}
	// A missing file at construction is a config error naming the field.
	_, err := New(config.Config{Host: "https://x", Auth: config.Auth{BearerTokenFile: tokenFile, Origin: "/kc"}}, Options{})
	var ce *config.Error
	if !errors.As(err, &ce) || ce.Field != "tokenFile" || ce.File != "/kc" {
		t.Errorf("missing token file: %v", err)
	}
}

// writePlugin writes a shell script exec plugin that counts its runs in
// dir/count and prints the credential in dir/out.
func writePlugin(t *testing.T, dir string) string {
	t.Helper()
	script := filepath.Join(dir, "plugin.sh")
	body := `#!/bin/sh
echo x >> "` + dir + `/count"
case "$KUBERNETES_EXEC_INFO" in *'"interactive":false'*) ;; *) echo "bad exec info" >&2; exit 3;; esac
if [ -n "$WANT_SERVER" ]; then case "$KUBERNETES_EXEC_INFO" in *"$WANT_SERVER"*) ;; *) echo "no cluster info" >&2; exit 4;; esac; fi
cat "` + dir + `/out"
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return script
}

func runs(dir string) int {
	b, _ := os.ReadFile(filepath.Join(dir, "count"))
	return bytes.Count(b, []byte("x"))
}

func TestExecPlugin(t *testing.T) {
	for _, apiVersion := range []string{"client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1"} {
		t.Run(apiVersion, func(t *testing.T) {
			dir := t.TempDir()
			script := writePlugin(t, dir)
			setCred := func(token string, expiry time.Time) {
				exp := ""
				if !expiry.IsZero() {
					exp = `,"expirationTimestamp":"` + expiry.UTC().Format(time.RFC3339) + `"`
				}
				os.WriteFile(filepath.Join(dir, "out"), []byte(`{"apiVersion":"`+apiVersion+`","kind":"ExecCredential","status":{"token":"`+token+`"`+exp+`}}`), 0o600)
			}
			fake := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			setCred("tok-1", fake.Now().Add(time.Hour))
			var want atomic.Value
			want.Store("tok-1")
			srvURL := ""
			c, srv := newTestClient(t, echoAuth(&want), Options{clock: fake}, func(cfg *config.Config) {
				cfg.Auth.Exec = &config.ExecConfig{Command: script, APIVersion: apiVersion, ProvideClusterInfo: true,
					Env: []config.ExecEnvVar{{Name: "WANT_SERVER", Value: "http://127.0.0.1"}}}
			})
			srvURL = srv.URL
			_ = srvURL
			get := func() error { return c.Get().AbsPath("x").Do(t.Context(), nil) }
			for i := 0; i < 3; i++ {
				if err := get(); err != nil {
					t.Fatal(err)
				}
			}
			if n := runs(dir); n != 1 {
				t.Errorf("plugin ran %d times for 3 requests, want 1 (cached)", n)
			}
			// Expiry: the plugin runs again.
			setCred("tok-2", fake.Now().Add(2*time.Hour))
			want.Store("tok-2")
			fake.Step(time.Hour + time.Second)
			if err := get(); err != nil {
				t.Fatal(err)
			}
			if n := runs(dir); n != 2 {
				t.Errorf("plugin ran %d times, want 2 after expiry", n)
			}
			// A 401 invalidates the cached credential.
			setCred("tok-3", time.Time{})
			want.Store("tok-3")
			if err := get(); !apierrors.IsUnauthorized(err) {
				t.Fatalf("revoked token: %v", err)
			}
			if err := get(); err != nil {
				t.Fatalf("after 401 the plugin runs again: %v", err)
			}
			if n := runs(dir); n != 3 {
				t.Errorf("plugin ran %d times, want 3", n)
			}
		})
	}
}

func TestExecPluginErrors(t *testing.T) {
	tests := []struct {
		name, out string
		cmd       string
		want      string
	}{
		{name: "not json", out: "hello", want: "not an ExecCredential"},
		{name: "wrong version", out: `{"apiVersion":"client.authentication.k8s.io/v1beta1","kind":"ExecCredential","status":{"token":"t"}}`, want: "returned apiVersion"},
		{name: "no status", out: `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential"}`, want: "no status"},
		{name: "empty", out: `{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{}}`, want: "neither a token"},
		{name: "missing command", cmd: "/nonexistent/plugin", want: "no such file"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := writePlugin(t, dir)
			os.WriteFile(filepath.Join(dir, "out"), []byte(tt.out), 0o600)
			if tt.cmd != "" {
				script = tt.cmd
			}
			c, _ := newTestClient(t, echoAuth(nil), Options{}, func(cfg *config.Config) {
				cfg.Auth.Exec = &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1"}
				cfg.Auth.Origin = "/kc"
			})
			err := c.Get().AbsPath("x").Do(t.Context(), nil)
			var ce *config.Error
			if !errors.As(err, &ce) || ce.Field != "exec" || !strings.Contains(err.Error(), tt.want) {
				t.Errorf("err = %v, want a config.Error on exec containing %q", err, tt.want)
			}
		})
	}
}

// TestExecClientCertificate checks that a plugin's client certificate is
// used for the TLS handshake.
func TestExecClientCertificate(t *testing.T) {
	ca, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	srv := newTLSServer(t, ca, clientCA, echoAuth(nil))
	certPEM, keyPEM := clientCA.issue(t, "from-plugin", false)
	dir := t.TempDir()
	script := writePlugin(t, dir)
	out := fmt.Sprintf(`{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"clientCertificateData":%q,"clientKeyData":%q}}`, certPEM, keyPEM)
	os.WriteFile(filepath.Join(dir, "out"), []byte(out), 0o600)
	c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: ca.certPEM}, Auth: config.Auth{Exec: &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1"}}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if h := rawHeaders(t, c); h.Get("X-CN") != "from-plugin" || h.Get("X-Auth") != "" {
		t.Errorf("CN %q auth %q", h.Get("X-CN"), h.Get("X-Auth"))
	}
}

// syncBuffer is a goroutine-safe log sink.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}
func (s *syncBuffer) String() string { s.mu.Lock(); defer s.mu.Unlock(); return s.b.String() }

// TestCanaryNoSecretsInLogsOrErrors gives the client a token, a password
// and a private key, drives it through successes and every kind of failure
// with debug logging on, and checks that none of them appears in any log
// line or error string.
func TestCanaryNoSecretsInLogsOrErrors(t *testing.T) {
	const token, password = "canary-token-7f3e9b", "canary-password-c0ffee"
	ca, clientCA, otherCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca"), newTestCA(t, "other")
	certPEM, keyPEM := clientCA.issue(t, "alice", false)
	keyBody := string(keyPEM[strings.Index(string(keyPEM), "\n")+1 : strings.Index(string(keyPEM), "\n")+40])
	secrets := []string{token, password, keyBody, "Y2FuYXJ5"} // the last is base64("canary")

	var logs syncBuffer
	logger := slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
	var errs []string
	record := func(err error) {
		if err != nil {
			errs = append(errs, err.Error(), fmt.Sprintf("%+v", err), fmt.Sprintf("%#v", err))
		}
	}

	var want atomic.Value
	want.Store(token)
	tlsSrv := newTLSServer(t, ca, clientCA, echoAuth(&want))
	cfg := config.Config{Host: tlsSrv.URL, TLS: config.TLS{CAData: ca.certPEM, CertData: certPEM, KeyData: keyPEM}, Auth: config.Auth{BearerToken: token}}
	c, err := New(cfg, Options{Logger: logger})
	record(err)
	record(c.Get().AbsPath("ok").Do(t.Context(), nil)) // success
	want.Store("something-else")
	record(c.Get().AbsPath("unauthorized").Do(t.Context(), nil)) // 401
	_, err = Watch[struct{ X int }](t.Context(), c.Get().AbsPath("watch"))
	record(err)

	// Wrong CA.
	bad := cfg
	bad.TLS.CAData = otherCA.certPEM
	c2, err := New(bad, Options{Logger: logger})
	record(err)
	record(c2.Get().AbsPath("tls").Do(t.Context(), nil))

	// Basic auth and a password in the URL.
	basic := config.Config{Host: "http://admin:" + password + "@127.0.0.1:1", Auth: config.Auth{}}
	c3, err := New(basic, Options{Logger: logger, Retry: RetryPolicy{MaxRetries: -1}})
	record(err)
	record(c3.Get().AbsPath("refused").Do(t.Context(), nil))
	basic.Host = "http://127.0.0.1:1"
	basic.Auth = config.Auth{Username: "admin", Password: password}
	c4, err := New(basic, Options{Logger: logger, Retry: RetryPolicy{MaxRetries: -1}})
	record(err)
	record(c4.Get().AbsPath("refused").Do(t.Context(), nil))

	// A bad key and a bad proxy URL with a password.
	_, err = New(config.Config{Host: "https://x", TLS: config.TLS{CertData: certPEM, KeyData: []byte("-----BEGIN EC PRIVATE KEY-----\nY2FuYXJ5\n-----END EC PRIVATE KEY-----\n")}}, Options{Logger: logger})
	record(err)
	_, err = New(config.Config{Host: "https://x", ProxyURL: "ftp://u:" + password + "@proxy"}, Options{Logger: logger})
	record(err)

	// An exec plugin that fails after printing a token, and one that
	// prints an unparsable credential.
	dir := t.TempDir()
	script := filepath.Join(dir, "p.sh")
	os.WriteFile(script, []byte("#!/bin/sh\necho '{\"status\":{\"token\":\""+token+"\"}'\nexit 1\n"), 0o755)
	c5, err := New(config.Config{Host: tlsSrv.URL, TLS: cfg.TLS, Auth: config.Auth{Exec: &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1", Env: []config.ExecEnvVar{{Name: "S", Value: password}}}}}, Options{Logger: logger})
	record(err)
	record(c5.Get().AbsPath("exec").Do(t.Context(), nil))
	os.WriteFile(script, []byte("#!/bin/sh\necho '{\"apiVersion\":\"client.authentication.k8s.io/v1\",\"status\":{\"token\":\""+token+"\"'\n"), 0o755)
	c6, err := New(config.Config{Host: tlsSrv.URL, TLS: cfg.TLS, Auth: config.Auth{Exec: &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1"}}}, Options{Logger: logger})
	record(err)
	record(c6.Get().AbsPath("exec").Do(t.Context(), nil))

	// The oidc auth provider: a refresh (expired id-token), a 401, a
	// refresh the issuer refuses with an error that quotes the
	// refresh-token and the client secret, an unreachable issuer, and
	// refreshed tokens that cannot be written back.
	const clientSecret = "canary-client-secret-4a1d"
	iss := oidctest.New(t, oidctest.Options{ClientSecret: clientSecret})
	api := &oidcAPI{}
	apiSrv := httptest.NewServer(api)
	defer apiSrv.Close()
	expiredID, refreshToken := iss.IDToken("alice", time.Now().Add(-time.Minute)), iss.RefreshToken("alice")
	c7, kubeconfig := oidcClient(t, apiSrv.URL, oidcConfig(iss, clientSecret, expiredID, refreshToken), Options{Logger: logger})
	record(c7.Get().AbsPath("oidc").Do(t.Context(), nil))
	newID, newRefresh, _ := iss.Last()
	if newID == "" {
		t.Fatal("the oidc client did not refresh; the test is not exercising it")
	}
	api.revoke(newID)
	record(c7.Get().AbsPath("oidc-401").Do(t.Context(), nil))
	echo := fakeIssuer(t, 200, `{"token_endpoint":"{{URL}}/token"}`, 400,
		`{"error":"invalid_grant","error_description":"refresh token `+refreshToken+` for client secret `+clientSecret+` is not active"}`)
	refused := oidcConfig(iss, clientSecret, expiredID, refreshToken)
	refused[config.OIDCIssuerURL], refused[config.OIDCCAData] = echo.URL, base64.StdEncoding.EncodeToString(pemCertOf(echo))
	c8, _ := oidcClient(t, apiSrv.URL, refused, Options{Logger: logger})
	record(c8.Get().AbsPath("oidc-refused").Do(t.Context(), nil))
	echo.Close()
	c9, _ := oidcClient(t, apiSrv.URL, refused, Options{Logger: logger, Retry: RetryPolicy{MaxRetries: -1}})
	record(c9.Get().AbsPath("oidc-unreachable").Do(t.Context(), nil))
	c10, kubeconfig10 := oidcClient(t, apiSrv.URL, oidcConfig(iss, clientSecret, expiredID, newRefresh), Options{Logger: logger})
	os.WriteFile(kubeconfig10, []byte("users: []\n"), 0o600) // the refreshed tokens cannot be written back
	record(c10.Get().AbsPath("oidc-write-back").Do(t.Context(), nil))
	lastID, lastRefresh, _ := iss.Last()
	loaded, err := config.Load(config.LoadOptions{Path: kubeconfig})
	record(err)
	logger.Info("oidc config", "cfg", loaded, "oidc", loaded.Auth.OIDC)
	errs = append(errs, fmt.Sprint(loaded), fmt.Sprintf("%#v", loaded.Auth.OIDC))
	secrets = append(secrets, clientSecret, expiredID, refreshToken, newID, newRefresh, lastID, lastRefresh)

	// Formatting the config itself.
	logger.Info("config", "cfg", cfg)
	errs = append(errs, fmt.Sprint(cfg), fmt.Sprintf("%+v", cfg))

	out := logs.String() + "\n" + strings.Join(errs, "\n")
	if !strings.Contains(logs.String(), "Bearer <masked>") || !strings.Contains(logs.String(), "Basic <masked>") {
		t.Errorf("debug logs do not show masked Authorization headers; the test is not exercising logging:\n%s", logs.String())
	}
	for _, want := range []string{"oidc-write-back", "invalid_grant", "is not active", "connection refused", "cannot write refreshed oidc tokens"} {
		if !strings.Contains(out, want) {
			t.Errorf("%q is missing from the logs and errors; the test is not exercising that failure:\n%s", want, out)
		}
	}
	if len(errs) < 10 {
		t.Errorf("only %d error strings collected; the test is not exercising failures", len(errs))
	}
	for _, s := range secrets {
		if strings.Contains(out, s) {
			t.Errorf("secret %q leaked:\n%s", s, out)
		}
	}
	_ = context.Background
}

func TestTLSServerNameAndProxy(t *testing.T) {
	ca := newTestCA(t, "server-ca")
	srv := newTLSServer(t, ca, nil, echoAuth(nil))
	// The serving certificate is for 127.0.0.1 and "localhost"; connect by
	// IP but verify the name "localhost".
	c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: ca.certPEM, ServerName: "localhost"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
		t.Fatalf("tls-server-name localhost: %v", err)
	}

	// proxy-url: a plain-HTTP target is fetched through the proxy with an
	// absolute request URI.
	var proxied atomic.Value
	proxy := httptestServer(t, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		proxied.Store(r.URL.String())
		w.Write([]byte(`{}`))
	}))
	c, err = New(config.Config{Host: "http://api.invalid:8080", ProxyURL: proxy}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Get().AbsPath("version").Do(t.Context(), nil); err != nil {
		t.Fatalf("through proxy: %v", err)
	}
	if got, _ := proxied.Load().(string); got != "http://api.invalid:8080/version" {
		t.Errorf("proxy saw %q", got)
	}
	if _, err := New(config.Config{Host: "https://x", ProxyURL: "ftp://proxy"}, Options{}); err == nil {
		t.Error("ftp proxy should be rejected")
	}
}

func TestExpiredServerCertificate(t *testing.T) {
	ca := newTestCA(t, "server-ca")
	certPEM, keyPEM := ca.issueValid(t, "server", true, time.Now().Add(-48*time.Hour), time.Now().Add(-24*time.Hour))
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(echoAuth(nil))
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	defer srv.Close()
	c, err := New(config.Config{Host: srv.URL, TLS: config.TLS{CAData: ca.certPEM}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	err = c.Get().AbsPath("x").Do(t.Context(), nil)
	var tv *TLSVerificationError
	if !errors.As(err, &tv) || !strings.Contains(err.Error(), "expired") {
		t.Fatalf("err = %v, want a TLSVerificationError about expiry", err)
	}
}
