package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/intern"
)

func TestRequestURL(t *testing.T) {
	c, err := New(config.Config{Host: "https://example.com:6443/prefix/"}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		req  *Request
		want string
	}{
		{"core list all namespaces", c.Get().Resource("pods"), "/prefix/api/v1/pods"},
		{"core namespaced get", c.Get().Namespace("ns").Resource("pods").Name("p"), "/prefix/api/v1/namespaces/ns/pods/p"},
		{"subresource", c.Put().Namespace("ns").Resource("pods").Name("p").SubResource("status"), "/prefix/api/v1/namespaces/ns/pods/p/status"},
		{"group", c.Get().Group("apps").Version("v1").Namespace("ns").Resource("deployments").Name("d").SubResource("scale"), "/prefix/apis/apps/v1/namespaces/ns/deployments/d/scale"},
		{"cluster scoped", c.Get().Group("rbac.authorization.k8s.io").Version("v1").Resource("clusterroles").Name("admin"), "/prefix/apis/rbac.authorization.k8s.io/v1/clusterroles/admin"},
		{"namespace object", c.Get().Resource("namespaces").Name("kube-system"), "/prefix/api/v1/namespaces/kube-system"},
		{"escaped name", c.Get().Namespace("ns").Resource("configmaps").Name("a b"), "/prefix/api/v1/namespaces/ns/configmaps/a%20b"},
		{"abs path", c.Get().AbsPath("version"), "/prefix/version"},
		{"options", c.Get().Resource("pods").Options(&metav1.ListOptions{LabelSelector: "app=web", Limit: 10}), "/prefix/api/v1/pods?labelSelector=app%3Dweb&limit=10"},
		{"params", c.Delete().Namespace("n").Resource("pods").Name("p").Param("dryRun", "All"), "/prefix/api/v1/namespaces/n/pods/p?dryRun=All"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			u := tt.req.URL()
			got := u.EscapedPath()
			if u.RawQuery != "" {
				got += "?" + u.RawQuery
			}
			if got != tt.want {
				t.Errorf("URL = %s, want %s", got, tt.want)
			}
		})
	}
	if err := c.Get().Resource("pods").Name("").Do(t.Context(), nil); err == nil {
		t.Error("empty name should be an error")
	}
}

// podServer serves one pod in JSON or protobuf, as asked, and records the
// requests.
type podServer struct {
	mu      sync.Mutex
	pod     *corev1.Pod
	accepts []string
	ctypes  []string
	bodies  [][]byte
}

func (s *podServer) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.accepts = append(s.accepts, r.Header.Get("Accept"))
	b, _ := io.ReadAll(r.Body)
	s.ctypes = append(s.ctypes, r.Header.Get("Content-Type"))
	s.bodies = append(s.bodies, b)
	if strings.HasPrefix(r.Header.Get("Accept"), MediaTypeProtobuf) {
		w.Header().Set("Content-Type", MediaTypeProtobuf)
		raw, _ := s.pod.Marshal()
		w.Write(protoObjectRaw("v1", "Pod", raw))
		return
	}
	w.Header().Set("Content-Type", "application/json")
	b, _ = s.pod.Marshal()
	_ = b
	writeJSON(w, s.pod)
}

func TestDoContentNegotiation(t *testing.T) {
	ps := &podServer{pod: testPod("p", "5")}
	jc, _ := newTestClient(t, ps, Options{})
	pc, _ := newTestClient(t, ps, Options{ContentType: Protobuf})

	var fromJSON, fromProto corev1.Pod
	if err := jc.Get().Namespace("default").Resource("pods").Name("p").Do(t.Context(), &fromJSON); err != nil {
		t.Fatal(err)
	}
	if err := pc.Get().Namespace("default").Resource("pods").Name("p").Do(t.Context(), &fromProto); err != nil {
		t.Fatal(err)
	}
	if !equality.Semantic.DeepEqual(&fromJSON, &fromProto) || !equality.Semantic.DeepEqual(&fromJSON, ps.pod) {
		t.Errorf("JSON and protobuf reads differ:\n%+v\n%+v", fromJSON, fromProto)
	}
	// Unstructured has no protobuf form: the protobuf client asks for JSON.
	var u unstructured.Unstructured
	if err := pc.Get().Namespace("default").Resource("pods").Name("p").Do(t.Context(), &u); err != nil {
		t.Fatal(err)
	}
	if u.GetName() != "p" {
		t.Errorf("unstructured = %v", u.Object)
	}
	// Bodies: protobuf for a typed object with its kind set, JSON otherwise.
	if err := pc.Post().Namespace("default").Resource("pods").Body(testPod("new", "")).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := pc.Patch(string(types.MergePatchType)).Namespace("default").Resource("pods").Name("p").Body([]byte(`{}`)).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := jc.Post().Namespace("default").Resource("pods").Body(testPod("new", "")).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	ps.mu.Lock()
	defer ps.mu.Unlock()
	wantAccept := []string{MediaTypeJSON, acceptProtobuf, MediaTypeJSON, acceptProtobuf, acceptProtobuf, MediaTypeJSON}
	if strings.Join(ps.accepts, "|") != strings.Join(wantAccept, "|") {
		t.Errorf("Accept headers = %q, want %q", ps.accepts, wantAccept)
	}
	wantCT := []string{"", "", "", MediaTypeProtobuf, string(types.MergePatchType), MediaTypeJSON}
	if strings.Join(ps.ctypes, "|") != strings.Join(wantCT, "|") {
		t.Errorf("Content-Types = %q, want %q", ps.ctypes, wantCT)
	}
	var sent corev1.Pod
	if err := decodeInto(MediaTypeProtobuf, ps.bodies[3], &sent, intern.Options{}); err != nil || sent.Name != "new" {
		t.Errorf("protobuf body decodes to %v, %v", sent.Name, err)
	}
}

func TestStatusErrors(t *testing.T) {
	status := func(code int, reason metav1.StatusReason) *metav1.Status {
		return &metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusFailure, Code: int32(code), Reason: reason, Message: "server says " + string(reason)}
	}
	tests := []struct {
		name     string
		code     int
		ctype    string
		body     []byte
		proto    bool
		is       func(error) bool
		contains string
	}{
		{name: "not found", code: 404, body: mustJSON(status(404, metav1.StatusReasonNotFound)), is: apierrors.IsNotFound, contains: "server says NotFound"},
		{name: "conflict", code: 409, body: mustJSON(status(409, metav1.StatusReasonConflict)), is: apierrors.IsConflict},
		{name: "already exists", code: 409, body: mustJSON(status(409, metav1.StatusReasonAlreadyExists)), is: apierrors.IsAlreadyExists},
		{name: "gone", code: 410, body: mustJSON(status(410, metav1.StatusReasonGone)), is: apierrors.IsGone},
		{name: "expired", code: 410, body: mustJSON(status(410, metav1.StatusReasonExpired)), is: apierrors.IsResourceExpired},
		{name: "forbidden", code: 403, body: mustJSON(status(403, metav1.StatusReasonForbidden)), is: apierrors.IsForbidden},
		{name: "unauthorized", code: 401, body: mustJSON(status(401, metav1.StatusReasonUnauthorized)), is: apierrors.IsUnauthorized},
		{name: "too many requests", code: 429, body: mustJSON(status(429, metav1.StatusReasonTooManyRequests)), is: apierrors.IsTooManyRequests},
		{name: "protobuf status", code: 404, proto: true, is: apierrors.IsNotFound, contains: "server says NotFound"},
		{name: "html 503", code: 503, ctype: "text/html", body: []byte("<html>upstream down</html>"), is: apierrors.IsServiceUnavailable, contains: "upstream down"},
		{name: "plain 401", code: 401, ctype: "text/plain", body: []byte("Unauthorized"), is: apierrors.IsUnauthorized, contains: "Unauthorized"},
		{name: "empty 404", code: 404, is: apierrors.IsNotFound, contains: "could not find"},
		{name: "binary 500", code: 500, ctype: "application/octet-stream", body: []byte{0xff, 0xfe, 0}, is: apierrors.IsInternalError, contains: "non-text"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				switch {
				case tt.proto:
					w.Header().Set("Content-Type", MediaTypeProtobuf)
					w.WriteHeader(tt.code)
					raw, _ := status(404, metav1.StatusReasonNotFound).Marshal()
					w.Write(protoObjectRaw("v1", "Status", raw))
				default:
					ct := tt.ctype
					if ct == "" {
						ct = "application/json"
					}
					w.Header().Set("Content-Type", ct)
					w.WriteHeader(tt.code)
					w.Write(tt.body)
				}
			})
			ct := JSON
			if tt.proto {
				ct = Protobuf
			}
			c, _ := newTestClient(t, h, Options{ContentType: ct, Retry: RetryPolicy{MaxRetries: -1}})
			var pod corev1.Pod
			err := c.Get().Namespace("ns").Resource("pods").Name("p").Do(t.Context(), &pod)
			if err == nil {
				t.Fatal("no error")
			}
			if !tt.is(err) {
				t.Errorf("predicate false for %v (reason %q)", err, apierrors.ReasonForError(err))
			}
			if !tt.is(errors.Join(errors.New("wrapped"), err)) {
				t.Errorf("predicate false for a wrapped error")
			}
			var se *StatusError
			if !errors.As(err, &se) || se.Code != tt.code {
				t.Errorf("not a *StatusError with code %d: %#v", tt.code, err)
			}
			if !strings.Contains(err.Error(), tt.contains) || !strings.Contains(err.Error(), "/api/v1/namespaces/ns/pods/p") {
				t.Errorf("message %q lacks %q or the path", err, tt.contains)
			}
		})
	}
}

func mustJSON(v any) []byte {
	b, err := jsonMarshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestRetries uses a fake clock: the test moves time when the client is
// waiting, so nothing sleeps.
func TestRetries(t *testing.T) {
	tests := []struct {
		name       string
		method     string
		responses  []int
		retryAfter string
		policy     RetryPolicy
		wantCalls  int
		wantCode   int // final status, 200 = success
		wantWaits  []time.Duration
	}{
		{name: "429 then ok, Retry-After", method: "GET", responses: []int{429, 429, 200}, retryAfter: "2", wantCalls: 3, wantCode: 200, wantWaits: []time.Duration{2 * time.Second, 2 * time.Second}},
		{name: "503 then ok, backoff", method: "PUT", responses: []int{503, 503, 503, 200}, wantCalls: 4, wantCode: 200, wantWaits: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond, time.Second}},
		{name: "delete retried", method: "DELETE", responses: []int{429, 200}, wantCalls: 2, wantCode: 200, wantWaits: []time.Duration{250 * time.Millisecond}},
		{name: "post not retried", method: "POST", responses: []int{429, 200}, wantCalls: 1, wantCode: 429},
		{name: "patch not retried", method: "PATCH", responses: []int{503, 200}, wantCalls: 1, wantCode: 503},
		{name: "500 not retried", method: "GET", responses: []int{500, 200}, wantCalls: 1, wantCode: 500},
		{name: "max retries", method: "GET", responses: []int{429, 429, 429, 200}, policy: RetryPolicy{MaxRetries: 2}, wantCalls: 3, wantCode: 429, wantWaits: []time.Duration{250 * time.Millisecond, 500 * time.Millisecond}},
		{name: "wait budget", method: "GET", responses: []int{429, 429, 200}, retryAfter: "20", wantCalls: 2, wantCode: 429, wantWaits: []time.Duration{20 * time.Second}},
		{name: "retries off", method: "GET", responses: []int{429, 200}, policy: RetryPolicy{MaxRetries: -1}, wantCalls: 1, wantCode: 429},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var calls atomic.Int32
			h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
				n := calls.Add(1)
				code := tt.responses[n-1]
				if tt.retryAfter != "" && code != 200 {
					w.Header().Set("Retry-After", tt.retryAfter)
				}
				w.Header().Set("Content-Type", "application/json")
				w.WriteHeader(code)
				if code == 200 {
					w.Write([]byte(`{}`))
				} else {
					w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure","code":` + itoa(code) + `}`))
				}
			})
			fake := &recordingClock{Fake: clock.NewFake(time.Unix(0, 0))}
			var infos []RequestInfo
			var mu sync.Mutex
			obs := ObserverFunc(func(_ context.Context, i RequestInfo) { mu.Lock(); infos = append(infos, i); mu.Unlock() })
			c, _ := newTestClient(t, h, Options{Retry: tt.policy, clock: fake, Observer: obs})
			done := make(chan error, 1)
			go func() { done <- c.Verb(tt.method).Resource("pods").Name("p").Do(t.Context(), nil) }()
			var waits []time.Duration
			deadline := time.Now().Add(30 * time.Second)
			for {
				select {
				case err := <-done:
					if tt.wantCode == 200 && err != nil {
						t.Fatalf("Do = %v", err)
					}
					if tt.wantCode != 200 {
						var se *StatusError
						if !errors.As(err, &se) || se.Code != tt.wantCode {
							t.Fatalf("Do = %v, want status %d", err, tt.wantCode)
						}
					}
					if int(calls.Load()) != tt.wantCalls {
						t.Errorf("calls = %d, want %d", calls.Load(), tt.wantCalls)
					}
					if len(waits) != len(tt.wantWaits) {
						t.Fatalf("waits = %v, want %v", waits, tt.wantWaits)
					}
					for i := range waits {
						if waits[i] != tt.wantWaits[i] {
							t.Errorf("wait %d = %v, want %v", i, waits[i], tt.wantWaits[i])
						}
					}
					mu.Lock()
					defer mu.Unlock()
					if len(infos) != tt.wantCalls {
						t.Fatalf("observer saw %d attempts, want %d", len(infos), tt.wantCalls)
					}
					for i, in := range infos {
						if in.Attempt != i || in.Retrying != (i < len(tt.wantWaits)) || in.Resource != "pods" || in.Method != tt.method {
							t.Errorf("observed attempt %d = %+v", i, in)
						}
					}
					return
				default:
				}
				if time.Now().After(deadline) {
					t.Fatalf("Do had not returned 30s after it was called: %d calls, waits %v", calls.Load(), waits)
				}
				// Step exactly to the armed timer's deadline.
				if d, ok := nextTimer(fake); ok {
					waits = append(waits, d)
					fake.Step(d)
				}
				yield()
			}
		})
	}
}

// recordingClock is a fake clock that remembers the delay of the last
// timer armed, so a test can step exactly to it.
type recordingClock struct {
	*clock.Fake
	last atomic.Int64
}

func (r *recordingClock) NewTimer(d time.Duration) clock.Timer {
	r.last.Store(int64(d))
	return r.Fake.NewTimer(d)
}

func nextTimer(f *recordingClock) (time.Duration, bool) {
	if f.Waiters() == 0 {
		return 0, false
	}
	return time.Duration(f.last.Load()), true
}

func TestRetryConnectionReset(t *testing.T) {
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if calls.Add(1) == 1 {
			// Hijack and close: the client sees the connection die.
			conn, _, err := w.(http.Hijacker).Hijack()
			if err == nil {
				conn.Close()
			}
			return
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	})
	c, _ := newTestClient(t, h, Options{Retry: RetryPolicy{Backoff: time.Nanosecond}})
	if err := c.Get().Resource("pods").Do(t.Context(), nil); err != nil {
		t.Fatalf("GET after reset: %v", err)
	}
	if calls.Load() != 2 {
		t.Errorf("calls = %d, want 2", calls.Load())
	}
	calls.Store(0)
	if err := c.Post().Resource("pods").Body([]byte(`{}`)).Do(t.Context(), nil); err == nil {
		t.Error("POST after reset should fail, not be retried")
	}
}

func TestRateLimiter(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	b := newTokenBucket(2, 3, fake)
	for i := 0; i < 3; i++ {
		if d := b.reserve(); d != 0 {
			t.Fatalf("burst token %d waited %v", i, d)
		}
	}
	if d := b.reserve(); d != 500*time.Millisecond {
		t.Errorf("4th token wait = %v, want 500ms", d)
	}
	if d := b.reserve(); d != time.Second {
		t.Errorf("5th token wait = %v, want 1s", d)
	}
	fake.Step(10 * time.Second)
	if d := b.reserve(); d != 0 {
		t.Errorf("after refill wait = %v", d)
	}
	// Wait honours the context.
	for n := 0; b.reserve() == 0; n++ { // take what refilled: at most the burst
		if n > 3 {
			t.Fatalf("%d tokens taken at once from a bucket of burst 3", n)
		}
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := b.Wait(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Wait with cancelled ctx = %v", err)
	}
	// A client with QPS waits on the fake clock between requests.
	var calls atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) { calls.Add(1); w.Write([]byte(`{}`)) })
	c, _ := newTestClient(t, h, Options{clock: fake}, func(cfg *config.Config) { cfg.QPS, cfg.Burst = 1, 1 })
	if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { done <- c.Get().AbsPath("x").Do(t.Context(), nil) }()
	deadline := time.Now().Add(30 * time.Second)
	for fake.Waiters() == 0 {
		if time.Now().After(deadline) {
			t.Fatal("the second request did not wait on the limiter's timer within 30s")
		}
		yield()
	}
	if calls.Load() != 1 {
		t.Errorf("second request sent before the limiter allowed it")
	}
	fake.Step(time.Second)
	select {
	case err := <-done:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(30 * time.Second):
		t.Fatal("the second request had not returned 30s after the limiter's second")
	}
}

func TestStream(t *testing.T) {
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.URL.Path != "/api/v1/namespaces/ns/pods/p/log" || r.URL.Query().Get("follow") != "true" {
			http.NotFound(w, r)
			return
		}
		w.Header().Set("Content-Type", "text/plain")
		io.WriteString(w, "line 1\nline 2\n")
	})
	c, _ := newTestClient(t, h, Options{})
	rc, err := c.Get().Namespace("ns").Resource("pods").Name("p").SubResource("log").
		Options(&corev1.PodLogOptions{Follow: true}).Stream(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	b, _ := io.ReadAll(rc)
	if string(b) != "line 1\nline 2\n" {
		t.Errorf("stream = %q", b)
	}
	if _, err := c.Get().Namespace("ns").Resource("pods").Name("q").SubResource("log").Stream(t.Context()); !apierrors.IsNotFound(err) {
		t.Errorf("missing log: %v", err)
	}
}

// TestRetryWaitCaps: with no response at all (a refused or reset
// connection) the waits stop growing at a second, so that a client finds a
// restarted server quickly; answers without Retry-After grow to 8s.
func TestRetryWaitCaps(t *testing.T) {
	p := RetryPolicy{}.withDefaults()
	unavailable := &http.Response{StatusCode: http.StatusServiceUnavailable, Header: http.Header{}}
	ms := time.Millisecond
	for n, want := range []struct{ noResponse, answered time.Duration }{
		{250 * ms, 250 * ms}, {500 * ms, 500 * ms}, {time.Second, time.Second},
		{time.Second, 2 * time.Second}, {time.Second, 4 * time.Second}, {time.Second, 8 * time.Second}, {time.Second, 8 * time.Second},
	} {
		if got := p.retryWait(nil, n); got != want.noResponse {
			t.Errorf("retry %d with no response: wait %s, want %s", n, got, want.noResponse)
		}
		if got := p.retryWait(unavailable, n); got != want.answered {
			t.Errorf("retry %d after a 503: wait %s, want %s", n, got, want.answered)
		}
	}
}

// TestPooledBodiesAreNotKept checks that what Do decodes from a protobuf
// or JSON response, typed or unstructured, does not alias the body
// buffer, which the next response is read into.
func TestPooledBodiesAreNotKept(t *testing.T) {
	ps := &podServer{pod: testPod("first", "5")}
	pc, _ := newTestClient(t, ps, Options{ContentType: Protobuf})
	jc, _ := newTestClient(t, ps, Options{ContentType: JSON})
	for _, o := range []intern.Options{{}, {Share: intern.New(), Structs: true}} {
		ctx := intern.WithOptions(t.Context(), o)
		var kept []*unstructured.Unstructured
		var want []*unstructured.Unstructured
		for i := range 20 {
			ps.mu.Lock()
			p := testPod(fmt.Sprintf("pod-%02d", i), strconv.Itoa(100+i))
			p.Labels = map[string]string{"n": strconv.Itoa(i)}
			ps.pod = p
			ps.mu.Unlock()
			var got unstructured.Unstructured
			if err := jc.Get().Namespace("default").Resource("pods").Name(p.Name).Do(ctx, &got); err != nil {
				t.Fatal(err)
			}
			kept = append(kept, &got)
			want = append(want, got.DeepCopy())
		}
		for i := range kept {
			if !equality.Semantic.DeepEqual(kept[i], want[i]) {
				t.Fatalf("unstructured pod %d changed after later responses were read:\n%+v\nwant %+v", i, kept[i], want[i])
			}
		}
	}
	for _, pc := range []*Client{pc, jc} {
		for _, o := range []intern.Options{{}, {Share: intern.New(), Structs: true}} {
			ctx := intern.WithOptions(t.Context(), o)
			var kept []*corev1.Pod
			var want []*corev1.Pod
			for i := range 20 {
				ps.mu.Lock()
				p := testPod(fmt.Sprintf("pod-%02d", i), strconv.Itoa(100+i))
				p.Labels = map[string]string{"n": strconv.Itoa(i)}
				p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fmt.Sprintf("m%02d", i), FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: fmt.Appendf(nil, `{"f:metadata":{"f:labels":{"f:n%02d":{}}}}`, i)}}}
				ps.pod = p
				ps.mu.Unlock()
				var got corev1.Pod
				if err := pc.Get().Namespace("default").Resource("pods").Name(p.Name).Do(ctx, &got); err != nil {
					t.Fatal(err)
				}
				kept = append(kept, &got)
				want = append(want, got.DeepCopy())
			}
			for i := range kept {
				if !equality.Semantic.DeepEqual(kept[i], want[i]) {
					t.Fatalf("%s: pod %d changed after later responses were read:\n%+v\nwant %+v", pc.ContentType(), i, kept[i], want[i])
				}
			}
		}
	}
}
