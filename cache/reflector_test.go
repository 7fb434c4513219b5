package cache_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// scriptLW answers List and Watch calls from a script, one step per call,
// and records each call. When the script runs out it blocks until the
// context ends.
type scriptLW struct {
	mu    sync.Mutex
	steps []step
	calls []string
	times []time.Time   // when each call was made
	done  chan struct{} // closed when the script has run out
}

type step struct {
	list   *client.List[*corev1.ConfigMap]
	events []rest.Event[*corev1.ConfigMap]
	end    error         // how a watch ends after its events (nil: io.EOF)
	lasts  time.Duration // how long a watch stays open after its events
	err    error         // the call fails
}

func newScript(steps ...step) *scriptLW { return &scriptLW{steps: steps, done: make(chan struct{})} }

func (s *scriptLW) next(ctx context.Context, call string) (step, bool) {
	s.mu.Lock()
	s.calls = append(s.calls, call)
	s.times = append(s.times, time.Now())
	if len(s.steps) == 0 {
		s.mu.Unlock()
		select {
		case <-s.done:
		default:
			close(s.done)
		}
		<-ctx.Done()
		return step{}, false
	}
	st := s.steps[0]
	s.steps = s.steps[1:]
	s.mu.Unlock()
	return st, true
}

func (s *scriptLW) List(ctx context.Context, o metav1.ListOptions) (*client.List[*corev1.ConfigMap], error) {
	st, ok := s.next(ctx, fmt.Sprintf("list rv=%q continue=%q", o.ResourceVersion, o.Continue))
	if !ok {
		return nil, ctx.Err()
	}
	if st.list == nil && st.err == nil {
		return nil, fmt.Errorf("script: a watch step answered a list")
	}
	return st.list, st.err
}

func (s *scriptLW) Watch(ctx context.Context, o metav1.ListOptions) (cache.Watch[*corev1.ConfigMap], error) {
	call := fmt.Sprintf("watch rv=%q bookmarks=%v", o.ResourceVersion, o.AllowWatchBookmarks)
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		call = "streaming list"
	}
	st, ok := s.next(ctx, call)
	if !ok {
		return nil, ctx.Err()
	}
	if st.err != nil {
		return nil, st.err
	}
	return &scriptWatch{events: st.events, end: st.end, lasts: st.lasts}, nil
}

func (s *scriptLW) Calls() []string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return slices.Clone(s.calls)
}

type scriptWatch struct {
	events []rest.Event[*corev1.ConfigMap]
	end    error
	lasts  time.Duration
}

func (w *scriptWatch) Next() (rest.Event[*corev1.ConfigMap], error) {
	if len(w.events) == 0 {
		time.Sleep(w.lasts)
		w.lasts = 0
		if w.end != nil {
			return rest.Event[*corev1.ConfigMap]{}, w.end
		}
		return rest.Event[*corev1.ConfigMap]{}, io.EOF
	}
	ev := w.events[0]
	w.events = w.events[1:]
	return ev, nil
}

func (w *scriptWatch) Stop() {}

func cm(name, rv string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: name, ResourceVersion: rv}}
}

func list(rv string, cont string, items ...*corev1.ConfigMap) *client.List[*corev1.ConfigMap] {
	return &client.List[*corev1.ConfigMap]{ListMeta: metav1.ListMeta{ResourceVersion: rv, Continue: cont}, Items: items}
}

func ev(t watch.EventType, obj *corev1.ConfigMap) rest.Event[*corev1.ConfigMap] {
	return rest.Event[*corev1.ConfigMap]{Type: t, Object: obj}
}

func bookmark(rv string, end bool) rest.Event[*corev1.ConfigMap] {
	o := cm("", rv)
	if end {
		o.Annotations = map[string]string{"k8s.io/initial-events-end": "true"}
	}
	return ev(watch.Bookmark, o)
}

func errEvent(code int32, reason metav1.StatusReason) rest.Event[*corev1.ConfigMap] {
	return rest.Event[*corev1.ConfigMap]{Type: watch.Error, Status: &metav1.Status{Status: metav1.StatusFailure, Code: code, Reason: reason}}
}

var gone = apierrors.NewResourceExpired("too old resource version")

func TestReflectorScripts(t *testing.T) {
	invalid := apierrors.NewInvalid(schema.GroupKind{Kind: "ListOptions"}, "", nil)
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("rbac says no"))
	tests := []struct {
		name      string
		streaming cache.StreamingList
		steps     []step
		wantCalls []string
		wantKeys  []string // the store at the end
		wantErrs  int      // errors reported
	}{{
		name:      "paginated list, then watch from its resourceVersion; bookmarks only advance it",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "c1", cm("a", "5"))},
			{list: list("10", "", cm("b", "6"))},
			{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("c", "11")), bookmark("15", false), ev(watch.Deleted, cm("a", "16"))}},
		},
		wantCalls: []string{`list rv="" continue=""`, `list rv="" continue="c1"`, `watch rv="10" bookmarks=true`, `watch rv="16" bookmarks=true`},
		wantKeys:  []string{"ns/b", "ns/c"},
	}, {
		name: "streaming list, then the same watch goes on",
		steps: []step{
			{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("a", "3")), ev(watch.Added, cm("b", "4")), bookmark("9", true), ev(watch.Modified, cm("a", "12"))}},
		},
		wantCalls: []string{"streaming list", `watch rv="12" bookmarks=true`},
		wantKeys:  []string{"ns/a", "ns/b"},
	}, {
		name: "when a streaming list's watch breaks later, it is resumed, not listed again",
		steps: []step{
			{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("a", "3")), bookmark("9", true), ev(watch.Modified, cm("a", "12"))}, end: io.ErrUnexpectedEOF},
		},
		wantCalls: []string{"streaming list", `watch rv="12" bookmarks=true`},
		wantKeys:  []string{"ns/a"},
	}, {
		name: "a server that refuses streaming lists gets paginated lists, for good",
		steps: []step{
			{err: invalid},
			{list: list("10", "", cm("a", "5"))},
			{events: []rest.Event[*corev1.ConfigMap]{errEvent(http.StatusGone, metav1.StatusReasonExpired)}},
			{list: list("20", "", cm("b", "18"))},
		},
		wantCalls: []string{"streaming list", `list rv="" continue=""`, `watch rv="10" bookmarks=true`, `list rv="" continue=""`, `watch rv="20" bookmarks=true`},
		wantKeys:  []string{"ns/b"},
	}, {
		name:      "410 when starting a watch relists at once",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "", cm("a", "5"))},
			{err: gone},
			{list: list("30", "", cm("z", "29"))},
		},
		wantCalls: []string{`list rv="" continue=""`, `watch rv="10" bookmarks=true`, `list rv="" continue=""`, `watch rv="30" bookmarks=true`},
		wantKeys:  []string{"ns/z"},
	}, {
		name:      "a watch that made progress and then broke is resumed from the last resourceVersion, with no error reported",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "", cm("a", "5"))},
			{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("b", "12"))}, end: io.ErrUnexpectedEOF},
			{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("c", "13"))}, end: errors.New("connection reset by peer")},
		},
		wantCalls: []string{`list rv="" continue=""`, `watch rv="10" bookmarks=true`, `watch rv="12" bookmarks=true`, `watch rv="13" bookmarks=true`},
		wantKeys:  []string{"ns/a", "ns/b", "ns/c"},
	}, {
		name:      "a watch that broke before making progress is an error",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "", cm("a", "5"))},
			{end: io.ErrUnexpectedEOF},
			{events: []rest.Event[*corev1.ConfigMap]{bookmark("10", false)}, end: io.ErrUnexpectedEOF},
		},
		wantCalls: []string{`list rv="" continue=""`, `watch rv="10" bookmarks=true`, `watch rv="10" bookmarks=true`, `watch rv="10" bookmarks=true`},
		wantKeys:  []string{"ns/a"},
		wantErrs:  2,
	}, {
		name:      "a watch that closes at once with no events is an error, so it is retried after a backoff",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "")},
			{},
		},
		wantCalls: []string{`list rv="" continue=""`, `watch rv="10" bookmarks=true`, `watch rv="10" bookmarks=true`},
		wantErrs:  1,
	}, {
		name:      "a failing list is reported and retried",
		streaming: cache.StreamingOff,
		steps: []step{
			{err: forbidden},
			{err: forbidden},
			{list: list("10", "", cm("a", "1"))},
		},
		wantCalls: []string{`list rv="" continue=""`, `list rv="" continue=""`, `list rv="" continue=""`, `watch rv="10" bookmarks=true`},
		wantKeys:  []string{"ns/a"},
		wantErrs:  2,
	}, {
		name:      "an expired continue token restarts with one unpaginated list",
		streaming: cache.StreamingOff,
		steps: []step{
			{list: list("10", "c1", cm("a", "1"))},
			{err: gone},
			{list: list("12", "", cm("a", "1"), cm("b", "11"))},
		},
		wantCalls: []string{`list rv="" continue=""`, `list rv="" continue="c1"`, `list rv="" continue=""`, `watch rv="12" bookmarks=true`},
		wantKeys:  []string{"ns/a", "ns/b"},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			lw := newScript(tt.steps...)
			store := cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{})
			var mu sync.Mutex
			var errs []error
			r := cache.NewReflector(lw, store, cache.ReflectorOptions{
				Streaming: tt.streaming, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond,
				ErrorHandler: func(err error) { mu.Lock(); errs = append(errs, err); mu.Unlock() },
			})
			ctx, cancel := context.WithCancel(t.Context())
			done := make(chan error, 1)
			go func() { done <- r.Run(ctx) }()
			await(t, lw.done, "the reflector to run through its script")
			cancel()
			if err := await(t, done, "Run to return once cancelled"); err != nil {
				t.Fatalf("Run: %v", err)
			}
			if got := lw.Calls(); !slices.Equal(got, tt.wantCalls) {
				t.Errorf("calls:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(tt.wantCalls, "\n  "))
			}
			keys := store.ListKeys()
			slices.Sort(keys)
			if !slices.Equal(keys, tt.wantKeys) && (len(keys) > 0 || len(tt.wantKeys) > 0) {
				t.Errorf("store %v, want %v", keys, tt.wantKeys)
			}
			if len(errs) != tt.wantErrs {
				t.Errorf("reported %d errors (%v), want %d", len(errs), errs, tt.wantErrs)
			}
			if !r.HasSynced() {
				t.Error("not synced")
			}
		})
	}
}

func TestReflectorReportsWhyItCannotSync(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", errors.New("rbac says no"))
	lw := newScript(step{err: forbidden})
	r := cache.NewReflector(lw, cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{}), cache.ReflectorOptions{Streaming: cache.StreamingOff, InitialBackoff: time.Hour, MaxBackoff: time.Hour})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- r.Run(ctx) }()
	deadline := time.Now().Add(awaitBound)
	for r.LastError() == nil {
		if time.Now().After(deadline) {
			t.Fatalf("the first list did not fail within %v: LastError is nil", awaitBound)
		}
		time.Sleep(time.Millisecond) // wait for the first list to fail
	}
	err := r.LastError()
	var re *cache.ReflectorError
	if !errors.As(err, &re) || re.Phase != "list" || !apierrors.IsForbidden(err) || r.HasSynced() {
		t.Fatalf("LastError %v (synced %v): want a list-phase ReflectorError that is Forbidden", err, r.HasSynced())
	}
	cancel() // Run is in its hour-long backoff: cancel ends it at once
	if err := await(t, done, "Run to return once cancelled in its backoff"); err != nil {
		t.Fatal(err)
	}
}

// awaitBound bounds the waits of these tests: what they wait for takes
// milliseconds.
const awaitBound = 30 * time.Second

// await receives a value from ch, or fails t if none comes within
// awaitBound; what names what the value means.
func await[V any](t *testing.T, ch <-chan V, what string) V {
	t.Helper()
	select {
	case v := <-ch:
		return v
	case <-time.After(awaitBound):
		t.Fatalf("waited %v for %s", awaitBound, what)
		panic("unreachable")
	}
}
