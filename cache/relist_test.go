package cache_test

import (
	"context"
	"errors"
	"slices"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
)

// selectingLW lists the ConfigMaps of the group its selector names at
// the time of the call, and holds each watch open, with no events, until
// its context ends. It counts the watches that ended.
type selectingLW struct {
	selector atomic.Value // string: a key of groups
	groups   map[string][]*corev1.ConfigMap
	lists    atomic.Int32
	ended    atomic.Int32
	listed   chan string  // receives the selector of each list, if not nil
	watchRV  atomic.Value // string: the resourceVersion of the last watch
}

func (l *selectingLW) List(ctx context.Context, _ metav1.ListOptions) (*client.List[*corev1.ConfigMap], error) {
	sel := l.selector.Load().(string)
	l.lists.Add(1)
	if l.listed != nil {
		l.listed <- sel
	}
	var items []*corev1.ConfigMap
	for _, o := range l.groups[sel] {
		items = append(items, o.DeepCopy())
	}
	return &client.List[*corev1.ConfigMap]{ListMeta: metav1.ListMeta{ResourceVersion: "10"}, Items: items}, nil
}

func (l *selectingLW) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watch[*corev1.ConfigMap], error) {
	l.watchRV.Store(opts.ResourceVersion)
	<-ctx.Done()
	l.ended.Add(1)
	return nil, ctx.Err()
}

func cachedNames(inf *cache.Informer[*corev1.ConfigMap]) []string {
	var names []string
	for _, o := range inf.Indexer().List() {
		names = append(names, o.Name)
	}
	slices.Sort(names)
	return names
}

// recordEvents adds an inline handler to inf that records what it is
// told ("add a1", "delete a1"); seen returns a copy of that so far.
func recordEvents(t *testing.T, inf *cache.Informer[*corev1.ConfigMap]) (seen func() []string) {
	t.Helper()
	var mu sync.Mutex
	var events []string
	record := func(what string, o *corev1.ConfigMap) {
		mu.Lock()
		events = append(events, what+" "+o.Name)
		mu.Unlock()
	}
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add:    func(o *corev1.ConfigMap, _ bool) { record("add", o) },
		Update: func(_, o *corev1.ConfigMap) { record("update", o) },
		Delete: func(o *corev1.ConfigMap, _ bool) { record("delete", o) },
	}, cache.HandlerOptions{Inline: true}); err != nil {
		t.Fatal(err)
	}
	return func() []string {
		mu.Lock()
		defer mu.Unlock()
		return slices.Clone(events)
	}
}

// TestRelistFollowsTheSelector checks that Relist ends the watch under
// way, lists with the selector of the moment, and returns once the cache
// holds exactly what that list found, the handlers being told of what
// left and what came, and nothing of what stayed the same.
func TestRelistFollowsTheSelector(t *testing.T) {
	lw := &selectingLW{groups: map[string][]*corev1.ConfigMap{
		"a": {cm("a1", "1"), cm("a2", "2"), cm("both", "3")},
		"b": {cm("b1", "4"), cm("both", "3")},
	}}
	lw.selector.Store("a")
	inf := cache.NewInformer[*corev1.ConfigMap](lw, quiet())
	seen := recordEvents(t, inf)
	stop := startSynced(t.Context(), t, inf)
	if got := cachedNames(inf); !slices.Equal(got, []string{"a1", "a2", "both"}) {
		t.Fatalf("first list cached %v", got)
	}
	lw.selector.Store("b")
	if err := inf.Relist(t.Context()); err != nil {
		t.Fatal(err)
	}
	if got := cachedNames(inf); !slices.Equal(got, []string{"b1", "both"}) {
		t.Errorf("after Relist the cache holds %v, want [b1 both]", got)
	}
	if n := lw.lists.Load(); n != 2 {
		t.Errorf("%d lists, want 2", n)
	}
	if n := lw.ended.Load(); n != 1 {
		t.Errorf("%d watches ended, want 1: Relist ends the watch under way", n)
	}
	got := seen()[3:]
	slices.Sort(got)
	// "both" is listed again unchanged: its handlers hear nothing of it.
	want := []string{"add b1", "delete a1", "delete a2"}
	if !slices.Equal(got, want) {
		t.Errorf("after Relist the handler saw %v, want %v", got, want)
	}
	stop()
	if err := inf.Relist(t.Context()); !errors.Is(err, cache.ErrStopped) {
		t.Errorf("Relist of a stopped informer = %v, want ErrStopped", err)
	}
}

// TestRelistsMeetInOneList checks that Relist calls made while a list is
// under way wait for a list that began after them, and that calls made
// together may share one.
func TestRelistsMeetInOneList(t *testing.T) {
	lw := &selectingLW{groups: map[string][]*corev1.ConfigMap{
		"a": {cm("a1", "1")}, "b": {cm("b1", "2")}, "c": {cm("c1", "3")},
	}, listed: make(chan string, 16)}
	lw.selector.Store("a")
	inf := cache.NewInformer[*corev1.ConfigMap](lw, quiet())
	stop := startSynced(t.Context(), t, inf)
	defer stop()
	<-lw.listed
	lw.selector.Store("b")
	errs := make(chan error, 2)
	go func() { errs <- inf.Relist(t.Context()) }()
	if sel := <-lw.listed; sel != "b" {
		t.Fatalf("relisted with %q", sel)
	}
	// A second change, while (or after) the first relist lists.
	lw.selector.Store("c")
	go func() { errs <- inf.Relist(t.Context()) }()
	for range 2 {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
	if got := cachedNames(inf); !slices.Equal(got, []string{"c1"}) {
		t.Errorf("after both Relists the cache holds %v, want [c1]", got)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	if err := inf.Relist(ctx); !errors.Is(err, context.Canceled) {
		t.Errorf("Relist with an ended context = %v", err)
	}
}

// TestNarrowLetsGoWithoutAList checks that Narrow ends the watch under
// way, lets go of the cached objects that keep rejects (the handlers see
// them deleted, and nothing of the others), and watches again from the
// same resourceVersion without listing; and that a Reflector whose store
// cannot let go lists again instead.
func TestNarrowLetsGoWithoutAList(t *testing.T) {
	groups := map[string][]*corev1.ConfigMap{
		"ab": {cm("a1", "1"), cm("b1", "2"), cm("both", "3")},
		"b":  {cm("b1", "2"), cm("both", "3")},
	}
	keepB := func(o *corev1.ConfigMap) bool { return o.Name != "a1" }

	t.Run("informer", func(t *testing.T) {
		lw := &selectingLW{groups: groups}
		lw.selector.Store("ab")
		inf := cache.NewInformer[*corev1.ConfigMap](lw, quiet())
		seen := recordEvents(t, inf)
		stop := startSynced(t.Context(), t, inf)
		lw.selector.Store("b")
		if err := inf.Narrow(t.Context(), keepB); err != nil {
			t.Fatal(err)
		}
		if got := cachedNames(inf); !slices.Equal(got, []string{"b1", "both"}) {
			t.Errorf("after Narrow the cache holds %v, want [b1 both]", got)
		}
		if n := lw.lists.Load(); n != 1 {
			t.Errorf("%d lists, want 1: Narrow does not list", n)
		}
		eventually(func() bool { // a watch from resourceVersion 10 after the one Narrow ended
			rv, _ := lw.watchRV.Load().(string)
			return lw.ended.Load() == 1 && rv == "10" && cache.InformerReflectorStats(inf).Watches == 2
		})
		got := seen()[3:]
		if want := []string{"delete a1"}; !slices.Equal(got, want) {
			t.Errorf("after Narrow the handler saw %v, want %v", got, want)
		}
		stop()
		if err := inf.Narrow(t.Context(), keepB); !errors.Is(err, cache.ErrStopped) {
			t.Errorf("Narrow of a stopped informer = %v, want ErrStopped", err)
		}
	})

	t.Run("plain store", func(t *testing.T) {
		lw := &selectingLW{groups: groups}
		lw.selector.Store("ab")
		store := cache.NewStore[*corev1.ConfigMap](cache.StoreOptions[*corev1.ConfigMap]{})
		r := cache.NewReflector[*corev1.ConfigMap](lw, store, quiet().Reflector)
		ctx, cancel := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() { done <- r.Run(ctx) }()
		defer func() { cancel(); <-done }()
		eventually(r.HasSynced)
		lw.selector.Store("b")
		select {
		case <-r.Narrow(func(o *corev1.ConfigMap) bool { return keepB(o) }):
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		}
		var names []string
		for _, o := range store.List() {
			names = append(names, o.Name)
		}
		slices.Sort(names)
		if !slices.Equal(names, []string{"b1", "both"}) || lw.lists.Load() != 2 {
			t.Errorf("after Narrow the store holds %v after %d lists, want [b1 both] after 2", names, lw.lists.Load())
		}
	})
}
