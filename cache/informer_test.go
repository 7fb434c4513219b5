package cache_test

import (
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/internal/clock"
)

func TestInformerDeliversChangesInOrder(t *testing.T) {
	bothHandlerModes(t, testInformerDeliversChangesInOrder)
}

func testInformerDeliversChangesInOrder(t *testing.T, hopts cache.HandlerOptions) {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, quiet())
	rec := newRecorder()
	reg, err := inf.AddHandler(rec, hopts)
	if err != nil {
		t.Fatal(err)
	}
	stop := run(t, inf)

	initial := rec.next(2)
	slices.Sort(initial)
	if want := []string{"add a rv=1 initial=true", "add b rv=2 initial=true"}; !slices.Equal(initial, want) {
		t.Fatalf("initial list: %q, want %q", initial, want)
	}
	eventually(reg.HasSynced)
	if !inf.HasSynced() {
		t.Fatal("a handler synced before its informer")
	}

	lw.send(watch.Added, cm("c", "11"))
	lw.send(watch.Modified, cm("a", "12"))
	lw.send(watch.Modified, cm("a", "13"))
	lw.send(watch.Deleted, cm("b", "14"))
	lw.send(watch.Deleted, cm("zz", "15")) // never cached: no call
	lw.send(watch.Added, cm("b", "16"))
	want := []string{
		"add c rv=11 initial=false",
		"update a rv=1->12",
		"update a rv=12->13",
		"delete b rv=14 unknown=false",
		"add b rv=16 initial=false",
	}
	if got := rec.next(len(want)); !slices.Equal(got, want) {
		t.Fatalf("calls:\n  %s\nwant:\n  %s", strings.Join(got, "\n  "), strings.Join(want, "\n  "))
	}
	if got, _ := inf.Indexer().Get("ns/a"); got.ResourceVersion != "13" {
		t.Errorf("lister has a at rv %s, want 13", got.ResourceVersion)
	}
	if err := stop(); err != nil {
		t.Fatalf("Start: %v", err)
	}
	if err := inf.LastError(); !errors.Is(err, cache.ErrStopped) {
		t.Errorf("LastError after stop = %v, want ErrStopped", err)
	}
}

func TestInformerRelistSendsTheDifference(t *testing.T) {
	bothHandlerModes(t, testInformerRelistSendsTheDifference)
}

func testInformerRelistSendsTheDifference(t *testing.T, hopts cache.HandlerOptions) {
	lw := newFeed(
		list("10", "", cm("a", "1"), cm("b", "2"), cm("c", "3")),
		list("20", "", cm("a", "1"), cm("b", "19"), cm("d", "18")),
	)
	inf := cache.NewInformer(lw, quiet())
	rec := newRecorder()
	if _, err := inf.AddHandler(rec, hopts); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	rec.next(3)
	lw.expire() // 410: the reflector lists again
	// a is unchanged (same resourceVersion): no call. b changed, d is
	// new, c is gone: its deletion was missed, so it is a tombstone.
	got := rec.next(3)
	slices.Sort(got)
	want := []string{"add d rv=18 initial=false", "delete c rv=3 unknown=true", "update b rv=2->19"}
	if !slices.Equal(got, want) {
		t.Fatalf("after relist: %q, want %q", got, want)
	}
	lw.send(watch.Added, cm("e", "21"))
	if got := rec.next(1)[0]; got != "add e rv=21 initial=false" {
		t.Fatalf("after relist, then an add: %q (a stray call for an unchanged object?)", got)
	}
}

func TestInformerLateHandlerGetsTheCacheFirst(t *testing.T) {
	bothHandlerModes(t, testInformerLateHandlerGetsTheCacheFirst)
}

func testInformerLateHandlerGetsTheCacheFirst(t *testing.T, hopts cache.HandlerOptions) {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, quiet())
	run(t, inf)
	eventually(inf.HasSynced)
	lw.send(watch.Added, cm("c", "11"))
	eventually(func() bool { _, ok := inf.Indexer().Get("ns/c"); return ok })

	rec := newRecorder()
	reg, err := inf.AddHandler(rec, hopts)
	if err != nil {
		t.Fatal(err)
	}
	got := rec.next(3)
	slices.Sort(got)
	if want := []string{"add a rv=1 initial=true", "add b rv=2 initial=true", "add c rv=11 initial=true"}; !slices.Equal(got, want) {
		t.Fatalf("late handler got %q, want %q", got, want)
	}
	eventually(reg.HasSynced)
	lw.send(watch.Deleted, cm("a", "12"))
	if got := rec.next(1)[0]; got != "delete a rv=12 unknown=false" {
		t.Fatalf("then %q", got)
	}
}

func TestInformerSlowHandlerDelaysOnlyItself(t *testing.T) {
	lw := newFeed(list("10", ""))
	inf := cache.NewInformer(lw, quiet())
	release := make(chan struct{})
	slow := newRecorder()
	blocked := cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(obj *corev1.ConfigMap, initial bool) {
			if obj.Name == "first" {
				<-release // stuck until the others are done
			}
			slow.OnAdd(obj, initial)
		},
	}
	slowReg, err := inf.AddHandler(blocked, cache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fast := newRecorder()
	if _, err := inf.AddHandler(fast, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	eventually(inf.HasSynced)
	const n = 2000 // far more than any fixed buffer would hold
	lw.send(watch.Added, cm("first", "1"))
	for i := range n {
		lw.send(watch.Added, cm("o"+strconv.Itoa(i), strconv.Itoa(100+i)))
	}
	if got := fast.next(n + 1); got[n] != "add o1999 rv=2099 initial=false" {
		t.Fatalf("fast handler's last call %q", got[n])
	}
	if got := inf.Indexer().Len(); got != n+1 {
		t.Fatalf("cache has %d objects while a handler is stuck; want %d", got, n+1)
	}
	close(release)
	got := slow.next(n + 1)
	for i, line := range got[1:] {
		if want := "add o" + strconv.Itoa(i) + " rv=" + strconv.Itoa(100+i) + " initial=false"; line != want {
			t.Fatalf("slow handler call %d: %q, want %q", i+1, line, want)
		}
	}
	eventually(slowReg.HasSynced)
}

func TestInformerRemoveHandler(t *testing.T) { bothHandlerModes(t, testInformerRemoveHandler) }

func testInformerRemoveHandler(t *testing.T, hopts cache.HandlerOptions) {
	lw := newFeed(list("10", "", cm("a", "1")))
	inf := cache.NewInformer(lw, quiet())
	removed, kept := newRecorder(), newRecorder()
	reg, err := inf.AddHandler(removed, hopts)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddHandler(kept, hopts); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	removed.next(1)
	kept.next(1)
	reg.Remove()
	reg.Remove() // idempotent
	lw.send(watch.Added, cm("b", "11"))
	kept.next(1)
	if len(removed.ch) != 0 {
		t.Fatalf("a removed handler was called: %q", <-removed.ch)
	}
}

// A handler that removes itself from inside a call.
func TestInformerHandlerRemovesItself(t *testing.T) {
	bothHandlerModes(t, testInformerHandlerRemovesItself)
}

func testInformerHandlerRemovesItself(t *testing.T, hopts cache.HandlerOptions) {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, quiet())
	var reg cache.Registration
	var mu sync.Mutex
	calls := 0
	done := make(chan struct{})
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{Add: func(*corev1.ConfigMap, bool) {
		mu.Lock()
		defer mu.Unlock()
		calls++
		if calls == 1 {
			reg.Remove()
			close(done)
		}
	}}, hopts)
	if err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	<-done
	other := newRecorder()
	if _, err := inf.AddHandler(other, hopts); err != nil {
		t.Fatal(err)
	}
	other.next(2)
	lw.send(watch.Added, cm("c", "11"))
	other.next(1)
	mu.Lock()
	defer mu.Unlock()
	if calls != 1 {
		t.Fatalf("%d calls; want 1, then none after Remove", calls)
	}
}

func TestInformerResyncIsPerHandler(t *testing.T) {
	bothHandlerModes(t, testInformerResyncIsPerHandler)
}

func testInformerResyncIsPerHandler(t *testing.T, hopts cache.HandlerOptions) {
	fake := clock.NewFake(time.Unix(0, 0))
	opts := quiet()
	cache.SetInformerClock(&opts, fake)
	opts.ResyncPeriod = time.Hour // the default: overridden below
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, opts)
	minutely, never := newRecorder(), newRecorder()
	if _, err := inf.AddHandler(minutely, withResync(hopts, time.Minute)); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddHandler(never, withResync(hopts, -1)); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	minutely.next(2)
	never.next(2)
	// A resync before the informer has synced does nothing, and the
	// informer marks itself synced only after queuing the first list.
	eventually(inf.HasSynced)
	eventually(func() bool { return fake.Waiters() == 1 }) // the minutely handler's timer

	fake.Step(time.Minute)
	got := minutely.next(2)
	slices.Sort(got)
	if want := []string{"update a rv=1->1", "update b rv=2->2"}; !slices.Equal(got, want) {
		t.Fatalf("resync: %q, want %q", got, want)
	}
	lw.send(watch.Added, cm("c", "11"))
	if got := never.next(1)[0]; got != "add c rv=11 initial=false" {
		t.Fatalf("a handler without resync got %q", got)
	}
	if got := minutely.next(1)[0]; got != "add c rv=11 initial=false" {
		t.Fatalf("after its resync: %q", got)
	}
	eventually(func() bool { return fake.Waiters() == 1 }) // re-armed
	fake.Step(time.Minute)
	if got := minutely.next(3); len(got) != 3 || !strings.HasPrefix(got[0], "update") {
		t.Fatalf("second resync: %q", got)
	}
}

func TestInformerTransform(t *testing.T) {
	withFields := func(name, rv string) *corev1.ConfigMap {
		o := cm(name, rv)
		o.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply}}
		return o
	}
	lw := newFeed(list("10", "", withFields("a", "1")))
	opts := quiet()
	opts.Transform = cache.StripManagedFields[*corev1.ConfigMap]
	inf := cache.NewInformer(lw, opts)
	var mu sync.Mutex
	var seen []int
	events := make(chan struct{}, 10)
	record := func(o *corev1.ConfigMap) {
		mu.Lock()
		seen = append(seen, len(o.ManagedFields))
		mu.Unlock()
		events <- struct{}{}
	}
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add:    func(o *corev1.ConfigMap, _ bool) { record(o) },
		Update: func(_, o *corev1.ConfigMap) { record(o) },
		Delete: func(o *corev1.ConfigMap, _ bool) { record(o) },
	}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	<-events
	lw.send(watch.Modified, withFields("a", "11"))
	<-events
	lw.send(watch.Deleted, withFields("a", "12"))
	<-events
	mu.Lock()
	defer mu.Unlock()
	if !slices.Equal(seen, []int{0, 0, 0}) {
		t.Fatalf("managedFields entries seen by the handler: %v, want none", seen)
	}
}

func TestInformerTransformErrorStopsIt(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1")))
	opts := quiet()
	boom := errors.New("boom")
	opts.Transform = func(o *corev1.ConfigMap) (*corev1.ConfigMap, error) { return nil, boom }
	inf := cache.NewInformer(lw, opts)
	err := inf.Start(t.Context()) // returns on its own: the informer is broken
	var te *cache.TransformError
	if !errors.As(err, &te) || !errors.Is(err, boom) || te.Name != "a" {
		t.Fatalf("Start = %v, want a TransformError for a wrapping boom", err)
	}
	if !errors.Is(inf.LastError(), boom) {
		t.Errorf("LastError = %v", inf.LastError())
	}
}

func TestInformerMutationDetector(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	opts := quiet()
	opts.DetectMutations = true
	var mu sync.Mutex
	var reported []error
	opts.OnMutation = func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() }
	inf := cache.NewInformer(lw, opts)
	mutated := make(chan struct{})
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(o *corev1.ConfigMap, _ bool) {
			if o.Name == "b" {
				o.Labels = map[string]string{"oops": "changed the cache"} // forbidden
				close(mutated)
			}
		},
	}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, inf)
	<-mutated
	var me *cache.MutationError
	if err := inf.CheckMutations(); !errors.As(err, &me) || !slices.Equal(me.Keys, []string{"ns/b"}) {
		t.Fatalf("CheckMutations = %v, want a MutationError for ns/b", err)
	}
	if err := stop(); !errors.As(err, &me) {
		t.Fatalf("Start = %v, want the MutationError of its last check", err)
	}
	mu.Lock()
	defer mu.Unlock()
	if len(reported) != 1 {
		t.Fatalf("OnMutation called %d times, want once (at stop)", len(reported))
	}
}

func TestInformerMutationDetectorIsQuietWhenNobodyMutates(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1")))
	opts := quiet()
	opts.DetectMutations = true
	inf := cache.NewInformer(lw, opts)
	stop := run(t, inf)
	eventually(inf.HasSynced)
	lw.send(watch.Modified, cm("a", "2"))
	lw.send(watch.Deleted, cm("a", "3"))
	lw.send(watch.Added, cm("b", "4"))
	eventually(func() bool { _, ok := inf.Indexer().Get("ns/b"); return ok })
	if err := stop(); err != nil {
		t.Fatal(err)
	}
}

func TestInformerLifeCycle(t *testing.T) {
	lw := newFeed(list("10", ""))
	inf := cache.NewInformer(lw, quiet())
	if inf.Name() != "*v1.ConfigMap" {
		t.Errorf("default name %q", inf.Name())
	}
	if _, err := inf.AddHandler(nil, cache.HandlerOptions{}); !errors.Is(err, cache.ErrNilHandler) {
		t.Errorf("nil handler: %v", err)
	}
	stop := run(t, inf)
	eventually(inf.HasSynced) // an empty first list syncs too
	if err := inf.Start(t.Context()); !errors.Is(err, cache.ErrAlreadyStarted) {
		t.Errorf("second Start: %v", err)
	}
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	if _, err := inf.AddHandler(newRecorder(), cache.HandlerOptions{}); !errors.Is(err, cache.ErrStopped) {
		t.Errorf("AddHandler after stop: %v", err)
	}
}

// A handler added before Start, while the first list is in progress,
// and after: each HasSynced becomes true only when that handler has
// returned from every initial call.
func TestInformerHandlerHasSynced(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2"), cm("c", "3")))
	inf := cache.NewInformer(lw, quiet())
	gate := make(chan struct{})
	var calls sync.WaitGroup
	calls.Add(3)
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{Add: func(*corev1.ConfigMap, bool) {
		calls.Done()
		<-gate
	}}, cache.HandlerOptions{})
	if err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	eventually(inf.HasSynced)
	if reg.HasSynced() {
		t.Fatal("handler synced while stuck in its first call")
	}
	close(gate)
	calls.Wait()
	if err := cache.WaitForCacheSync(t.Context(), inf, reg); err != nil {
		t.Fatal(err)
	}
	if want := "*v1.ConfigMap handler 1"; reg.Name() != want {
		t.Errorf("registration name %q, want %q", reg.Name(), want)
	}
}

// A resync that falls due while the handler is still working through the
// previous one is skipped, so a slow handler's buffer does not fill up
// with resyncs.
func TestInformerResyncSkipsWhileBehind(t *testing.T) {
	fake := clock.NewFake(time.Unix(0, 0))
	opts := quiet()
	cache.SetInformerClock(&opts, fake)
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, opts)
	rec := newRecorder()
	entered, gate := make(chan struct{}), make(chan struct{})
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: rec.OnAdd,
		Update: func(old, new *corev1.ConfigMap) {
			entered <- struct{}{}
			<-gate
			rec.OnUpdate(old, new)
		},
	}, cache.HandlerOptions{ResyncPeriod: time.Minute}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	rec.next(2)
	eventually(inf.HasSynced) // an earlier resync would do nothing
	eventually(func() bool { return fake.Waiters() == 1 })
	fake.Step(time.Minute) // resync 1: two updates queued
	<-entered
	eventually(func() bool { return fake.Waiters() == 1 }) // re-armed
	fake.Step(time.Minute)                                 // resync 2 falls due while resync 1 is in progress
	gate <- struct{}{}
	<-entered
	gate <- struct{}{}
	lw.send(watch.Added, cm("c", "11"))
	got := rec.next(3)
	if !strings.HasPrefix(got[0], "update") || !strings.HasPrefix(got[1], "update") || got[2] != "add c rv=11 initial=false" {
		t.Fatalf("calls %q: want one resync (two updates), then the add", got)
	}
}

func TestInformerMutationDetectorFromEnvironment(t *testing.T) {
	t.Setenv(cache.MutationDetectorEnv, "true")
	lw := newFeed(list("10", "", cm("a", "1")))
	inf := cache.NewInformer(lw, quiet()) // DetectMutations not set
	mutated := make(chan struct{})
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(o *corev1.ConfigMap, _ bool) { o.Data = map[string]string{"x": "y"}; close(mutated) },
	}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	stop := run(t, inf)
	<-mutated
	var me *cache.MutationError
	if err := stop(); !errors.As(err, &me) {
		t.Fatalf("Start = %v, want a MutationError: %s=true should switch the detector on", err, cache.MutationDetectorEnv)
	}
}

// bothHandlerModes runs test for a handler with its own goroutine and for
// an inline one: what a handler sees must not depend on the mode.
func bothHandlerModes(t *testing.T, test func(t *testing.T, opts cache.HandlerOptions)) {
	for _, mode := range []struct {
		name string
		opts cache.HandlerOptions
	}{{"own goroutine", cache.HandlerOptions{}}, {"inline", cache.HandlerOptions{Inline: true}}} {
		t.Run(mode.name, func(t *testing.T) { test(t, mode.opts) })
	}
}

func withResync(opts cache.HandlerOptions, d time.Duration) cache.HandlerOptions {
	opts.ResyncPeriod = d
	return opts
}

// An inline handler is called on the informer's goroutine, before the
// change is visible to handlers with goroutines of their own, and a late
// one receives the cache before AddHandler returns.
func TestInformerInlineHandler(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1")))
	inf := cache.NewInformer(lw, quiet())
	var inlineCalls []string // written only while the informer calls
	var mu sync.Mutex
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(obj *corev1.ConfigMap, _ bool) {
			mu.Lock()
			inlineCalls = append(inlineCalls, "add "+obj.Name)
			mu.Unlock()
		},
	}, cache.HandlerOptions{Inline: true})
	if err != nil {
		t.Fatal(err)
	}
	buffered := newRecorder()
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{Add: func(obj *corev1.ConfigMap, initial bool) {
		mu.Lock()
		n := len(inlineCalls)
		mu.Unlock()
		// The inline handler was called for this object before it was
		// queued to this one.
		buffered.ch <- fmt.Sprintf("add %s after %d inline calls", obj.Name, n)
	}}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	if got := buffered.next(1)[0]; got != "add a after 1 inline calls" {
		t.Fatalf("%s", got)
	}
	if err := cache.WaitForCacheSync(t.Context(), inf, reg); err != nil {
		t.Fatal(err)
	}
	lw.send(watch.Added, cm("b", "11"))
	if got := buffered.next(1)[0]; got != "add b after 2 inline calls" {
		t.Fatalf("%s", got)
	}

	// A late inline handler has every cached object when AddHandler
	// returns, with no goroutine in between.
	late := newRecorder()
	lateReg, err := inf.AddHandler(late, cache.HandlerOptions{Inline: true})
	if err != nil {
		t.Fatal(err)
	}
	if n := len(late.ch); n != 2 {
		t.Fatalf("late inline handler had %d calls when AddHandler returned, want 2", n)
	}
	if !lateReg.HasSynced() {
		t.Fatal("late inline handler not synced when AddHandler returned")
	}
	got := late.next(2)
	slices.Sort(got)
	if want := []string{"add a rv=1 initial=true", "add b rv=11 initial=true"}; !slices.Equal(got, want) {
		t.Fatalf("late inline handler got %q, want %q", got, want)
	}
}

// blockingHandler blocks in its first OnUpdate until released, then
// records like a recorder.
type blockingHandler struct {
	*recorder
	blocked chan struct{} // closed when the first update blocks
	release chan struct{}
	once    sync.Once
}

func (b *blockingHandler) OnUpdate(old, new *corev1.ConfigMap) {
	b.once.Do(func() {
		close(b.blocked)
		<-b.release
	})
	b.recorder.OnUpdate(old, new)
}

// TestSlowInlineHandlerDoesNotStallTheReflector blocks an inline handler
// (a predicate stuck on something) and checks that the reflector still
// takes the watch's events meanwhile, and that the cache can be read;
// once released, the handler gets every change, in order.
func TestSlowInlineHandlerDoesNotStallTheReflector(t *testing.T) {
	lw := newFeed(list("10", "", cm("a", "1")))
	inf := cache.NewInformer(lw, quiet())
	h := &blockingHandler{recorder: newRecorder(), blocked: make(chan struct{}), release: make(chan struct{})}
	if _, err := inf.AddHandler(h, cache.HandlerOptions{Inline: true}); err != nil {
		t.Fatal(err)
	}
	run(t, inf)
	if got := h.next(1); got[0] != "add a rv=1 initial=true" {
		t.Fatalf("first call %q", got[0])
	}
	lw.send(watch.Modified, cm("a", "11"))
	<-h.blocked
	// The handler is stuck. The reflector must go on taking events: each
	// send returns only once the reflector has the event, and it takes
	// the next only after queueing the previous one.
	sent := make(chan struct{})
	go func() {
		defer close(sent)
		for rv := 12; rv <= 20; rv++ {
			lw.send(watch.Modified, cm("a", fmt.Sprint(rv)))
		}
	}()
	select {
	case <-sent:
	case <-time.After(time.Minute):
		close(h.release)
		t.Fatal("the reflector stopped taking events while an inline handler was blocked")
	}
	if _, ok := inf.Indexer().Get("ns/a"); !ok {
		t.Error("the cache could not be read while an inline handler was blocked")
	}
	close(h.release)
	// Updates of one key may be merged in the queue: the handler sees the
	// first, some of the rest in order, and the last.
	last := ""
	for last != "20" {
		line := <-h.ch
		from, to, ok := strings.Cut(strings.TrimPrefix(line, "update a rv="), "->")
		if !ok || !strings.HasPrefix(line, "update a rv=") {
			t.Fatalf("unexpected call %q", line)
		}
		if last != "" && from != last {
			t.Fatalf("call %q does not follow rv %s", line, last)
		}
		last = to
	}
}
