package rest

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"net/http"
	"os"
	"sync"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
)

// authTransport adds the Authorization header. A header the caller set
// wins. After a 401 it drops cached credentials (token file, exec plugin,
// OIDC id-token) so that the next request fetches fresh ones.
type authTransport struct {
	next     http.RoundTripper
	token    string
	tokens   *fileToken
	user     string
	password string
	exec     *execProvider
	oidc     *oidcProvider
}

func newAuthTransport(cfg config.Config, next http.RoundTripper, exec *execProvider, oidc *oidcProvider, refresh time.Duration, clk clock.Clock, logger *slog.Logger) (*authTransport, error) {
	a := &authTransport{next: next, exec: exec, oidc: oidc, token: cfg.Auth.BearerToken}
	if cfg.Auth.BearerToken == "" && cfg.Auth.BearerTokenFile != "" {
		if refresh <= 0 {
			refresh = time.Minute
		}
		a.tokens = &fileToken{path: cfg.Auth.BearerTokenFile, origin: cfg.Auth.Origin, period: refresh, clock: clk, logger: logger}
		if _, err := a.tokens.get(); err != nil {
			return nil, err
		}
	}
	if cfg.Auth.Username != "" || cfg.Auth.Password != "" {
		a.user, a.password = cfg.Auth.Username, cfg.Auth.Password
	}
	return a, nil
}

func (a *authTransport) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Header.Get("Authorization") != "" {
		return a.next.RoundTrip(req)
	}
	var (
		token string
		err   error
	)
	switch {
	case a.token != "":
		token = a.token
	case a.tokens != nil:
		token, err = a.tokens.get()
	case a.exec != nil:
		token, err = a.exec.token(req.Context())
	case a.oidc != nil:
		token, err = a.oidc.token(req.Context())
	case a.user != "" || a.password != "":
		req = req.Clone(req.Context())
		req.SetBasicAuth(a.user, a.password)
		return a.next.RoundTrip(req)
	default:
		return a.next.RoundTrip(req)
	}
	if err != nil {
		return nil, err
	}
	if token != "" {
		req = req.Clone(req.Context())
		req.Header.Set("Authorization", "Bearer "+token)
	}
	start := time.Now()
	resp, err := a.next.RoundTrip(req)
	if err == nil && resp.StatusCode == http.StatusUnauthorized {
		if a.tokens != nil {
			a.tokens.reset()
		}
		if a.exec != nil {
			a.exec.invalidate(start)
		}
		if a.oidc != nil {
			a.oidc.refused(token)
		}
	}
	return resp, err
}

// userField is the path of a field of kubeconfig user entry user, for
// errors: users["alice"].exec, or just exec when the user is not known.
func userField(user, field string) string {
	if user == "" {
		return field
	}
	return fmt.Sprintf("users[%q].%s", user, field)
}

// fileToken is a bearer token read from a file and re-read every period,
// and after a 401, so that rotated tokens (projected service-account
// tokens are rotated by the kubelet) are picked up. If a re-read fails the
// old token is kept and a warning logged.
type fileToken struct {
	path, origin string
	period       time.Duration
	clock        clock.Clock
	logger       *slog.Logger

	mu     sync.Mutex
	token  string
	readAt time.Time
}

func (f *fileToken) get() (string, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if f.token != "" && now.Sub(f.readAt) < f.period {
		return f.token, nil
	}
	b, err := os.ReadFile(f.path)
	if err == nil {
		b = bytes.TrimSpace(b)
		if len(b) == 0 {
			err = errors.New("token file is empty")
		}
	}
	if err != nil {
		if f.token != "" {
			f.logger.Warn("cannot re-read token file; keeping the previous token", "file", f.path, "error", err)
			f.readAt = now
			return f.token, nil
		}
		return "", &config.Error{File: f.origin, Field: "tokenFile", Err: fmt.Errorf("%s: %w", f.path, err)}
	}
	f.token, f.readAt = string(b), now
	return f.token, nil
}

func (f *fileToken) reset() {
	f.mu.Lock()
	f.readAt = time.Time{}
	f.mu.Unlock()
}
