package manager

import (
	"container/list"
	"context"
	"crypto/sha256"
	"fmt"
	"log/slog"
	"net/http"
	"strings"
	"sync"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/rest"
)

// AuthOptions configure [NewAuthFilter]. The zero value is valid.
type AuthOptions struct {
	// AllowedTTL is how long a caller that was let through is let through
	// again without asking the API server. Default 1 min.
	AllowedTTL time.Duration
	// DeniedTTL is how long a caller that was turned away (401 or 403) is
	// turned away again without asking. Default 10 s: a role just bound
	// takes effect soon.
	DeniedTTL time.Duration
	// CacheSize bounds the decisions kept; the least recently used go
	// first. Default 1024.
	CacheSize int
	// Logger receives the API server's errors (the callers see only a
	// 500) and, at debug level, the refusals. Nil means discard.
	Logger *slog.Logger
}

// NewAuthFilter returns a filter that lets a request through to the
// handler it wraps only when its bearer token is one the API server
// authenticates (a TokenReview), and the user the token names may use the
// request's path with the verb of its method (a SubjectAccessReview of a
// non-resource URL, such as get on /metrics, which a ClusterRole grants
// with nonResourceURLs): what kube-rbac-proxy and kubebuilder's secure
// metrics do. A request without a token, or with one the server does not
// accept, gets 401; a user without the grant, 403; an error of the API
// server, 500, and the error goes to the log only.
//
// Decisions are kept for AuthOptions.AllowedTTL or DeniedTTL, keyed by a
// hash of the token, the path and the verb (never the token itself), so
// that a scraper that comes back every 15 s costs two API calls a minute,
// not two a scrape. The identity behind rc must be allowed to create
// tokenreviews and subjectaccessreviews (the ClusterRole
// system:auth-delegator grants both).
//
// The manager wraps /metrics in it (see [MetricsServing]); a program can
// wrap its own handlers too, such as with mgr.REST().
func NewAuthFilter(rc *rest.Client, opts AuthOptions) (func(http.Handler) http.Handler, error) {
	trs, err := client.For[authenticationv1.TokenReview](rc, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("manager: auth filter: %w", err)
	}
	sars, err := client.For[authorizationv1.SubjectAccessReview](rc, client.Options{})
	if err != nil {
		return nil, fmt.Errorf("manager: auth filter: %w", err)
	}
	a := newAuthFilter(opts, clock.Real{})
	a.authenticate = func(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error) {
		tr, err := trs.Create(ctx, &authenticationv1.TokenReview{Spec: authenticationv1.TokenReviewSpec{Token: token}}, metav1.CreateOptions{})
		if err != nil {
			return authenticationv1.UserInfo{}, false, fmt.Errorf("TokenReview: %w", err)
		}
		return tr.Status.User, tr.Status.Authenticated, nil
	}
	a.authorize = func(ctx context.Context, u authenticationv1.UserInfo, verb, path string) (bool, error) {
		extra := make(map[string]authorizationv1.ExtraValue, len(u.Extra))
		for k, v := range u.Extra {
			extra[k] = authorizationv1.ExtraValue(v)
		}
		sar, err := sars.Create(ctx, &authorizationv1.SubjectAccessReview{Spec: authorizationv1.SubjectAccessReviewSpec{
			User: u.Username, UID: u.UID, Groups: u.Groups, Extra: extra,
			NonResourceAttributes: &authorizationv1.NonResourceAttributes{Path: path, Verb: verb},
		}}, metav1.CreateOptions{})
		if err != nil {
			return false, fmt.Errorf("SubjectAccessReview: %w", err)
		}
		return sar.Status.Allowed, nil
	}
	return a.wrap, nil
}

// authFilter is NewAuthFilter's filter; authenticate and authorize ask
// the API server (tests give their own).
type authFilter struct {
	authenticate func(ctx context.Context, token string) (authenticationv1.UserInfo, bool, error)
	authorize    func(ctx context.Context, u authenticationv1.UserInfo, verb, path string) (bool, error)
	allowedTTL   time.Duration
	deniedTTL    time.Duration
	cache        *ttlCache[[sha256.Size]byte, int] // the status code decided
	log          *slog.Logger
}

func newAuthFilter(opts AuthOptions, c clock.Clock) *authFilter {
	a := &authFilter{allowedTTL: opts.AllowedTTL, deniedTTL: opts.DeniedTTL, log: opts.Logger}
	if a.allowedTTL <= 0 {
		a.allowedTTL = time.Minute
	}
	if a.deniedTTL <= 0 {
		a.deniedTTL = 10 * time.Second
	}
	if a.log == nil {
		a.log = slog.New(slog.DiscardHandler)
	}
	size := opts.CacheSize
	if size <= 0 {
		size = 1024
	}
	a.cache = newTTLCache[[sha256.Size]byte, int](size, c)
	return a
}

func (a *authFilter) wrap(next http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		code := a.decide(r)
		if code == http.StatusOK {
			next.ServeHTTP(w, r)
			return
		}
		if code == http.StatusUnauthorized {
			w.Header().Set("WWW-Authenticate", `Bearer realm="kubernetes"`)
		}
		http.Error(w, http.StatusText(code), code)
	})
}

// decide returns 200 (let through), 401, 403 or 500.
func (a *authFilter) decide(r *http.Request) int {
	token, ok := bearerToken(r)
	if !ok {
		return http.StatusUnauthorized
	}
	verb, path := strings.ToLower(r.Method), r.URL.Path
	key := sha256.Sum256([]byte(verb + "\x00" + path + "\x00" + token))
	if code, ok := a.cache.get(key); ok {
		return code
	}
	code, err := a.review(r.Context(), token, verb, path)
	if err != nil {
		a.log.Error("asking the API server about a caller", "path", path, "err", err)
		return http.StatusInternalServerError
	}
	ttl := a.deniedTTL
	if code == http.StatusOK {
		ttl = a.allowedTTL
	}
	a.cache.add(key, code, ttl)
	return code
}

func (a *authFilter) review(ctx context.Context, token, verb, path string) (int, error) {
	user, ok, err := a.authenticate(ctx, token)
	if err != nil {
		return 0, err
	}
	if !ok {
		a.log.Debug("request refused: token not authenticated", "path", path)
		return http.StatusUnauthorized, nil
	}
	allowed, err := a.authorize(ctx, user, verb, path)
	if err != nil {
		return 0, err
	}
	if !allowed {
		a.log.Debug("request refused: not authorized", "user", user.Username, "verb", verb, "path", path)
		return http.StatusForbidden, nil
	}
	return http.StatusOK, nil
}

// bearerToken returns the token of the request's "Authorization: Bearer"
// header.
func bearerToken(r *http.Request) (string, bool) {
	scheme, token, ok := strings.Cut(r.Header.Get("Authorization"), " ")
	if !ok || !strings.EqualFold(scheme, "Bearer") {
		return "", false
	}
	token = strings.TrimSpace(token)
	return token, token != ""
}

// ttlCache is a map whose entries expire, bounded in size: adding to a
// full cache drops the least recently used entry. It is safe for
// concurrent use.
type ttlCache[K comparable, V any] struct {
	max   int
	clock clock.Clock

	mu      sync.Mutex
	entries map[K]*list.Element // of *ttlEntry[K, V]
	order   list.List           // front: most recently used
}

type ttlEntry[K comparable, V any] struct {
	key     K
	val     V
	expires time.Time
}

func newTTLCache[K comparable, V any](max int, c clock.Clock) *ttlCache[K, V] {
	return &ttlCache[K, V]{max: max, clock: c, entries: map[K]*list.Element{}}
}

// get returns the value of key unless it is missing or expired.
func (c *ttlCache[K, V]) get(key K) (V, bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	var zero V
	el, ok := c.entries[key]
	if !ok {
		return zero, false
	}
	e := el.Value.(*ttlEntry[K, V])
	if !c.clock.Now().Before(e.expires) {
		c.order.Remove(el)
		delete(c.entries, key)
		return zero, false
	}
	c.order.MoveToFront(el)
	return e.val, true
}

// add sets key's value for ttl.
func (c *ttlCache[K, V]) add(key K, val V, ttl time.Duration) {
	c.mu.Lock()
	defer c.mu.Unlock()
	expires := c.clock.Now().Add(ttl)
	if el, ok := c.entries[key]; ok {
		e := el.Value.(*ttlEntry[K, V])
		e.val, e.expires = val, expires
		c.order.MoveToFront(el)
		return
	}
	for len(c.entries) >= c.max {
		oldest := c.order.Back()
		c.order.Remove(oldest)
		delete(c.entries, oldest.Value.(*ttlEntry[K, V]).key)
	}
	c.entries[key] = c.order.PushFront(&ttlEntry[K, V]{key: key, val: val, expires: expires})
}

// len returns the number of entries, expired ones included.
func (c *ttlCache[K, V]) len() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.entries)
}
