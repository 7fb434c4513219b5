package cache_test

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"runtime"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// feedLW is a ListerWatcher for informer tests: List answers the given
// lists in turn (the last one again and again), and every watch reads
// the events the test sends, so a test drives the informer one event at
// a time.
type feedLW struct {
	mu     sync.Mutex
	lists  []*client.List[*corev1.ConfigMap]
	events chan rest.Event[*corev1.ConfigMap]
}

func newFeed(lists ...*client.List[*corev1.ConfigMap]) *feedLW {
	return &feedLW{lists: lists, events: make(chan rest.Event[*corev1.ConfigMap])}
}

func (f *feedLW) List(ctx context.Context, _ metav1.ListOptions) (*client.List[*corev1.ConfigMap], error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	l := f.lists[0]
	if len(f.lists) > 1 {
		f.lists = f.lists[1:]
	}
	// A copy of the list, so that a transform changing items in place
	// does not change the script.
	cp := &client.List[*corev1.ConfigMap]{ListMeta: l.ListMeta}
	for _, o := range l.Items {
		cp.Items = append(cp.Items, o.DeepCopy())
	}
	return cp, nil
}

func (f *feedLW) Watch(ctx context.Context, o metav1.ListOptions) (cache.Watch[*corev1.ConfigMap], error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		// As an old server does: the reflector falls back to lists.
		return nil, apierrors.NewBadRequest("sendInitialEvents is not supported")
	}
	return &feedWatch{ctx: ctx, events: f.events, stop: make(chan struct{})}, nil
}

// send hands ev to the informer's watch; it returns once the reflector
// has taken it.
func (f *feedLW) send(ev watch.EventType, obj *corev1.ConfigMap) {
	f.events <- rest.Event[*corev1.ConfigMap]{Type: ev, Object: obj}
}

// expire ends the current watch with 410 Gone, so the reflector lists
// again.
func (f *feedLW) expire() {
	f.events <- rest.Event[*corev1.ConfigMap]{Type: watch.Error, Status: &metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGone, Reason: metav1.StatusReasonExpired}}
}

type feedWatch struct {
	ctx    context.Context
	events chan rest.Event[*corev1.ConfigMap]
	stop   chan struct{}
	once   sync.Once
}

func (w *feedWatch) Next() (rest.Event[*corev1.ConfigMap], error) {
	select {
	case ev := <-w.events:
		return ev, nil
	case <-w.ctx.Done():
		return rest.Event[*corev1.ConfigMap]{}, w.ctx.Err()
	case <-w.stop:
		return rest.Event[*corev1.ConfigMap]{}, fmt.Errorf("stopped")
	}
}

func (w *feedWatch) Stop() { w.once.Do(func() { close(w.stop) }) }

func cmIn(ns, name, rv string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, ResourceVersion: rv, Labels: labels}}
}

// recorder is a Handler that writes each call as a line on a channel.
type recorder struct {
	ch chan string
}

func newRecorder() *recorder { return &recorder{ch: make(chan string, 10000)} }

func (r *recorder) OnAdd(obj *corev1.ConfigMap, initial bool) {
	r.ch <- fmt.Sprintf("add %s rv=%s initial=%v", obj.Name, obj.ResourceVersion, initial)
}

func (r *recorder) OnUpdate(old, new *corev1.ConfigMap) {
	r.ch <- fmt.Sprintf("update %s rv=%s->%s", new.Name, old.ResourceVersion, new.ResourceVersion)
}

func (r *recorder) OnDelete(obj *corev1.ConfigMap, unknown bool) {
	r.ch <- fmt.Sprintf("delete %s rv=%s unknown=%v", obj.Name, obj.ResourceVersion, unknown)
}

// next reads n calls. It panics, naming the calls it did read, if one
// is missing for a minute: a lost call fails the test at once rather
// than when the test binary times out.
func (r *recorder) next(n int) []string {
	out := make([]string, n)
	for i := range out {
		select {
		case out[i] = <-r.ch:
		case <-time.After(time.Minute):
			panic(fmt.Sprintf("recorder: call %d of %d never came; read %q", i+1, n, out[:i]))
		}
	}
	return out
}

// run starts inf and returns a function that stops it and returns what
// Start returned.
func run(t *testing.T, inf interface{ Start(context.Context) error }) (stop func() error) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- inf.Start(ctx) }()
	var once sync.Once
	var err error
	stop = func() error {
		once.Do(func() { cancel(); err = <-done })
		return err
	}
	t.Cleanup(func() { _ = stop() })
	return stop
}

// eventually polls cond until it holds. It is for states with no event
// to wait on. If cond does not hold within 30 seconds, eventually panics
// with the line of the test that called it, which names what was
// awaited: a wait that cannot end fails the test binary then, with every
// goroutine's stack, not at the test timeout. (It panics because its
// callers pass no *testing.T to fail.)
func eventually(cond func() bool) {
	const bound = 30 * time.Second
	deadline := time.Now().Add(bound)
	for !cond() {
		if time.Now().After(deadline) {
			panic(fmt.Sprintf("eventually: not true after %v: %s", bound, callerLine(2)))
		}
		time.Sleep(time.Millisecond)
	}
}

// callerLine returns the file, line number and source text of the call
// skip frames up the stack (1: callerLine's caller).
func callerLine(skip int) string {
	_, file, line, ok := runtime.Caller(skip)
	if !ok {
		return "(caller unknown)"
	}
	where := fmt.Sprintf("%s:%d", filepath.Base(file), line)
	if src, err := os.ReadFile(file); err == nil {
		if lines := strings.Split(string(src), "\n"); line <= len(lines) {
			where += ": " + strings.TrimSpace(lines[line-1])
		}
	}
	return where
}

// quiet are informer options for tests: paginated lists and fast
// backoff.
func quiet() cache.InformerOptions[*corev1.ConfigMap] {
	return cache.InformerOptions[*corev1.ConfigMap]{
		Reflector: cache.ReflectorOptions{Streaming: cache.StreamingOff, InitialBackoff: time.Millisecond, MaxBackoff: time.Millisecond},
	}
}
