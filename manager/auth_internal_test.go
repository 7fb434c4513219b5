package manager

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/internal/clock"
)

func TestTTLCacheExpires(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newTTLCache[string, int](10, clk)
	c.add("a", 1, time.Minute)
	c.add("b", 2, 10*time.Second)
	clk.Step(9 * time.Second)
	if v, ok := c.get("a"); !ok || v != 1 {
		t.Errorf("a after 9 s: %v %v", v, ok)
	}
	if v, ok := c.get("b"); !ok || v != 2 {
		t.Errorf("b after 9 s: %v %v", v, ok)
	}
	clk.Step(time.Second)
	if _, ok := c.get("b"); ok {
		t.Error("b is still there after its 10 s")
	}
	if _, ok := c.get("a"); !ok {
		t.Error("a went with b")
	}
	c.add("a", 3, time.Minute) // a new value, and a new lifetime
	clk.Step(55 * time.Second)
	if v, ok := c.get("a"); !ok || v != 3 {
		t.Errorf("a after being set again: %v %v", v, ok)
	}
	if c.len() != 1 {
		t.Errorf("%d entries; want the expired one dropped", c.len())
	}
}

func TestTTLCacheBounded(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	c := newTTLCache[int, int](3, clk)
	for i := range 3 {
		c.add(i, i, time.Hour)
	}
	c.get(0) // 1 is now the least recently used
	c.add(3, 3, time.Hour)
	if c.len() != 3 {
		t.Fatalf("%d entries, want at most 3", c.len())
	}
	if _, ok := c.get(1); ok {
		t.Error("the least recently used entry was kept")
	}
	for _, k := range []int{0, 2, 3} {
		if _, ok := c.get(k); !ok {
			t.Errorf("entry %d was dropped", k)
		}
	}
	for i := range 100 {
		c.add(100+i, i, time.Hour)
	}
	if c.len() != 3 {
		t.Errorf("%d entries after 100 more, want 3", c.len())
	}
}

// fakeReviews stands in for the API server: tokens "reader" and "other"
// authenticate, only "reader" may get /metrics, "broken" makes an error.
type fakeReviews struct {
	mu           sync.Mutex
	tokenReviews int
	accessViews  int
}

var errServer = errors.New(`tokenreviews.authentication.k8s.io is forbidden: User "system:serviceaccount:x:y" cannot create resource`)

func (f *fakeReviews) install(a *authFilter) {
	a.authenticate = func(_ context.Context, token string) (authenticationv1.UserInfo, bool, error) {
		f.mu.Lock()
		f.tokenReviews++
		f.mu.Unlock()
		switch token {
		case "reader", "other":
			return authenticationv1.UserInfo{Username: token, Groups: []string{"system:authenticated"}}, true, nil
		case "broken":
			return authenticationv1.UserInfo{}, false, errServer
		}
		return authenticationv1.UserInfo{}, false, nil
	}
	a.authorize = func(_ context.Context, u authenticationv1.UserInfo, verb, path string) (bool, error) {
		f.mu.Lock()
		f.accessViews++
		f.mu.Unlock()
		return u.Username == "reader" && verb == "get" && path == "/metrics", nil
	}
}

func (f *fakeReviews) calls() (int, int) {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.tokenReviews, f.accessViews
}

func TestAuthFilter(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	var logs strings.Builder
	a := newAuthFilter(AuthOptions{Logger: slog.New(slog.NewTextHandler(&logs, nil))}, clk)
	var f fakeReviews
	f.install(a)
	h := a.wrap(http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { _, _ = io.WriteString(w, "metrics") }))
	get := func(method, path, auth string) (int, string) {
		t.Helper()
		r := httptest.NewRequest(method, path, nil)
		if auth != "" {
			r.Header.Set("Authorization", auth)
		}
		w := httptest.NewRecorder()
		h.ServeHTTP(w, r)
		return w.Code, w.Body.String()
	}

	for _, tc := range []struct {
		name, method, path, auth string
		code                     int
	}{
		{"no token", "GET", "/metrics", "", 401},
		{"basic auth", "GET", "/metrics", "Basic dXNlcjpwYXNz", 401},
		{"empty bearer", "GET", "/metrics", "Bearer  ", 401},
		{"unknown token", "GET", "/metrics", "Bearer nobody", 401},
		{"not allowed", "GET", "/metrics", "Bearer other", 403},
		{"allowed", "GET", "/metrics", "Bearer reader", 200},
		{"lower-case scheme", "GET", "/metrics", "bearer reader", 200},
		{"another verb", "POST", "/metrics", "Bearer reader", 403},
		{"another path", "GET", "/debug", "Bearer reader", 403},
		{"server error", "GET", "/metrics", "Bearer broken", 500},
	} {
		code, body := get(tc.method, tc.path, tc.auth)
		if code != tc.code {
			t.Errorf("%s: %d %q, want %d", tc.name, code, body, tc.code)
		}
		if code == 200 && body != "metrics" {
			t.Errorf("%s: body %q", tc.name, body)
		}
		if code == 500 && strings.Contains(body, "forbidden") {
			t.Errorf("%s: the server's error reaches the caller: %q", tc.name, body)
		}
	}
	if !strings.Contains(logs.String(), "tokenreviews.authentication.k8s.io is forbidden") {
		t.Errorf("the server's error is not logged:\n%s", logs.String())
	}

	// Decisions are cached: allowed for 1 min, denied for 10 s; errors not
	// at all.
	tr, sar := f.calls()
	for range 100 {
		get("GET", "/metrics", "Bearer reader")
		get("GET", "/metrics", "Bearer other")
		get("GET", "/metrics", "Bearer nobody")
	}
	if tr2, sar2 := f.calls(); tr2 != tr || sar2 != sar {
		t.Errorf("300 cached requests made %d TokenReviews and %d SubjectAccessReviews", tr2-tr, sar2-sar)
	}
	get("GET", "/metrics", "Bearer broken")
	if tr2, _ := f.calls(); tr2 != tr+1 {
		t.Errorf("a server error was cached")
	}
	clk.Step(10 * time.Second)
	get("GET", "/metrics", "Bearer reader")
	get("GET", "/metrics", "Bearer other")
	get("GET", "/metrics", "Bearer nobody")
	if tr2, sar2 := f.calls(); tr2 != tr+3 || sar2 != sar+1 {
		t.Errorf("after 10 s: %d TokenReviews and %d SubjectAccessReviews; want the two denials asked again", tr2-tr, sar2-sar)
	}
	clk.Step(50 * time.Second)
	get("GET", "/metrics", "Bearer reader")
	if tr2, sar2 := f.calls(); tr2 != tr+4 || sar2 != sar+2 {
		t.Errorf("after 1 min: %d TokenReviews and %d SubjectAccessReviews; want the allowed caller asked again", tr2-tr, sar2-sar)
	}
	if code, _ := get("GET", "/metrics", ""); code != 401 {
		t.Errorf("no token, after the cache filled: %d", code)
	}
}

func TestProbeText(t *testing.T) {
	var logs strings.Builder
	m := &Manager{log: slog.New(slog.NewTextHandler(&logs, nil))}
	raw := errors.New(`Get "https://10.0.0.1:6443/api": dial tcp 10.0.0.1:6443: connect: connection refused`)
	checks := []probeCheck{
		{"ping", func(*http.Request) error { return nil }},
		{"informers", func(*http.Request) error { return probeFailure("not synced") }},
		{"database", func(*http.Request) error { return raw }},
	}
	get := func(h http.Handler, url string) (int, string) {
		w := httptest.NewRecorder()
		h.ServeHTTP(w, httptest.NewRequest("GET", url, nil))
		return w.Code, w.Body.String()
	}
	code, body := get(m.probe("readyz", checks), "/readyz")
	if want := "informers: not synced\ndatabase: failed\nreadyz check failed\n"; code != 503 || body != want {
		t.Errorf("/readyz: %d %q, want 503 %q", code, body, want)
	}
	if !strings.Contains(logs.String(), "connection refused") || !strings.Contains(logs.String(), "database") {
		t.Errorf("the check's error is not logged:\n%s", logs.String())
	}
	code, body = get(m.probe("readyz", checks), "/readyz?verbose")
	if want := "ping: ok\ninformers: not synced\ndatabase: failed\nreadyz check failed\n"; code != 503 || body != want {
		t.Errorf("/readyz?verbose: %d %q, want 503 %q", code, body, want)
	}
	code, body = get(m.probe("healthz", checks[:1]), "/healthz")
	if code != 200 || body != "ok\n" {
		t.Errorf("/healthz: %d %q", code, body)
	}
	code, body = get(m.probe("healthz", checks[:1]), "/healthz?verbose=1")
	if code != 200 || body != "ping: ok\nok\n" {
		t.Errorf("/healthz?verbose: %d %q", code, body)
	}
}

func TestShortReason(t *testing.T) {
	for _, tc := range []struct {
		err  error
		want string
	}{
		{context.DeadlineExceeded, "timeout"},
		{errors.New("x509: certificate signed by unknown authority"), "error"},
		{&netErr{}, "API server unreachable"},
		{fmt.Errorf("lease: %w", apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, "x")), "not found"},
		{apierrors.NewForbidden(schema.GroupResource{Group: "coordination.k8s.io", Resource: "leases"}, "x", errors.New("RBAC")), "forbidden"},
	} {
		if got := shortReason(tc.err); got != tc.want {
			t.Errorf("shortReason(%v) = %q, want %q", tc.err, got, tc.want)
		}
	}
}

type netErr struct{}

func (*netErr) Error() string   { return "dial tcp: connection refused" }
func (*netErr) Timeout() bool   { return false }
func (*netErr) Temporary() bool { return false }
