package config

import (
	"bytes"
	"fmt"
	"log/slog"
	"strings"
	"testing"
)

// TestRedaction is a canary: formatting or logging a Config never shows a
// token, password, key or exec environment value.
func TestRedaction(t *testing.T) {
	const token, pw, key, envSecret = "canary-token-3f9a", "canary-pw-77c1", "canary-key-PRIVATE", "canary-env-91d"
	const idToken, refreshToken, clientSecret = "canary-id-token-e1", "canary-refresh-token-5b", "canary-client-secret-0d"
	oidc := &OIDC{IssuerURL: "https://idp", ClientID: "loom", ClientSecret: clientSecret, IDToken: idToken, RefreshToken: refreshToken}
	cfg := Config{
		Host:     "https://s",
		TLS:      TLS{KeyData: []byte(key), CertData: []byte("cert")},
		Auth:     Auth{BearerToken: token, Password: pw, Username: "u", Exec: &ExecConfig{Command: "p", Env: []ExecEnvVar{{Name: "X", Value: envSecret}}}, OIDC: oidc},
		ProxyURL: "http://user:" + pw + "@proxy",
	}
	u := &User{Token: token, Password: pw, ClientKeyData: []byte(key), Exec: cfg.Auth.Exec, AuthProvider: &AuthProvider{Name: "oidc", Config: map[string]string{
		OIDCIssuerURL: "https://idp", OIDCClientID: "loom", OIDCClientSecret: clientSecret, OIDCIDToken: idToken, OIDCRefreshToken: refreshToken, "unknown-key": envSecret,
	}}}
	var buf bytes.Buffer
	for _, l := range []*slog.Logger{slog.New(slog.NewTextHandler(&buf, nil)), slog.New(slog.NewJSONHandler(&buf, nil))} {
		l.Info("cfg", "config", cfg, "tls", cfg.TLS, "auth", cfg.Auth, "oidc", oidc, "user", u, "provider", u.AuthProvider, "exec", cfg.Auth.Exec)
	}
	for _, verb := range []string{"%v", "%+v", "%#v", "%s"} {
		fmt.Fprintf(&buf, verb+"\n", cfg)
		fmt.Fprintf(&buf, verb+"\n", &cfg)
		fmt.Fprintf(&buf, verb+"\n", cfg.Auth)
		fmt.Fprintf(&buf, verb+"\n", cfg.TLS)
		fmt.Fprintf(&buf, verb+"\n", u)
		fmt.Fprintf(&buf, verb+"\n", oidc)
		fmt.Fprintf(&buf, verb+"\n", u.AuthProvider)
	}
	out := buf.String()
	for _, secret := range []string{token, pw, key, envSecret, idToken, refreshToken, clientSecret} {
		if strings.Contains(out, secret) {
			t.Errorf("secret %q leaked:\n%s", secret, out)
		}
	}
	if !strings.Contains(out, "https://s") || !strings.Contains(out, "https://idp") || !strings.Contains(out, "client-id=loom") {
		t.Errorf("non-secret fields missing from output:\n%s", out)
	}
}
