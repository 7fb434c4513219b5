package stores_test

import (
	"context"
	"errors"
	"slices"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/cache/cachetest"
	"github.com/loom-k8s/loom/cache/stores"
)

type obj = cachetest.Object

func popAll[T any](t *testing.T, pop func(context.Context) (T, error), n int) []T {
	t.Helper()
	var out []T
	for range n {
		v, err := pop(t.Context())
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, v)
	}
	return out
}

func names(objs []*obj) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.Name
	}
	return out
}

func TestFIFO(t *testing.T) {
	q := stores.NewFIFO(stores.FIFOOptions[*obj]{})
	for _, n := range []string{"a", "b", "c", "d"} {
		_ = q.Add(&obj{Name: n, Version: 1})
	}
	_ = q.Update(&obj{Name: "a", Version: 2}) // keeps its place, newest object
	_ = q.Delete(&obj{Name: "b"})
	_ = q.Add(&obj{Name: "b", Version: 3}) // back of the queue
	got := popAll(t, q.Pop, 4)
	if n := names(got); !slices.Equal(n, []string{"a", "c", "d", "b"}) || got[0].Version != 2 {
		t.Errorf("popped %q (a at version %d), want [a c d b] with a at 2", n, got[0].Version)
	}
	_ = q.Replace([]*obj{{Name: "z"}, {Name: "y"}, {Name: "z", Version: 9}})
	if n := q.ListKeys(); !slices.Equal(n, []string{"z", "y"}) {
		t.Errorf("after Replace, keys = %q, want [z y]", n)
	}
	if o, _ := q.Get("z"); o.Version != 9 {
		t.Errorf("Replace kept version %d of z, want the last, 9", o.Version)
	}
	q.Close()
	if err := q.Add(&obj{Name: "late"}); !errors.Is(err, cache.ErrClosed) {
		t.Errorf("Add after Close = %v", err)
	}
	if n := names(popAll(t, q.Pop, 2)); !slices.Equal(n, []string{"z", "y"}) {
		t.Errorf("drain after Close popped %q", n)
	}
	if _, err := q.Pop(t.Context()); !errors.Is(err, cache.ErrClosed) {
		t.Errorf("Pop of a closed, empty FIFO = %v", err)
	}
}

func TestFIFOPopWaits(t *testing.T) {
	q := stores.NewFIFO(stores.FIFOOptions[*obj]{})
	got := make(chan *obj)
	go func() {
		o, _ := q.Pop(t.Context())
		got <- o
	}()
	_ = q.Add(&obj{Name: "a"})
	if o := <-got; o.Name != "a" {
		t.Fatalf("popped %v", o)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error)
	go func() { _, err := q.Pop(ctx); done <- err }()
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("Pop after cancel = %v", err)
	}
}

func TestHeap(t *testing.T) {
	byVersion := func(a, b *obj) bool { return a.Version < b.Version }
	h := stores.NewHeap(stores.HeapOptions[*obj]{Less: byVersion})
	for i, n := range []string{"e", "b", "d", "a", "c"} {
		_ = h.Add(&obj{Name: n, Version: 10 * (5 - i)})
	}
	// versions: e=50 b=40 d=30 a=20 c=10
	_ = h.Update(&obj{Name: "e", Version: 5}) // moves to the front
	_ = h.Delete(&obj{Name: "d"})
	if p, _ := h.Peek(); p.Name != "e" {
		t.Errorf("Peek = %v, want e", p)
	}
	if n := names(popAll(t, h.Pop, 4)); !slices.Equal(n, []string{"e", "c", "a", "b"}) {
		t.Errorf("popped %q, want [e c a b]", n)
	}
	if _, ok := h.Peek(); ok {
		t.Error("Peek of an empty heap found something")
	}

	// Default order: by key.
	k := stores.NewHeap(stores.HeapOptions[*obj]{})
	_ = k.Replace([]*obj{{Namespace: "b", Name: "x"}, {Namespace: "a", Name: "y"}, {Name: "z"}, {Namespace: "a", Name: "x"}})
	k.Close()
	var got []string
	for {
		o, err := k.Pop(t.Context())
		if errors.Is(err, cache.ErrClosed) {
			break
		}
		key, _ := cache.MetaNamespaceKey(o)
		got = append(got, key)
	}
	if !slices.Equal(got, []string{"a/x", "a/y", "b/x", "z"}) {
		t.Errorf("default order popped %q", got)
	}
}

// Pops waiting together are each woken by an item of their own, however
// the items arrive: one by one or in a single Replace.
func TestPopsWaitingTogether(t *testing.T) {
	objs := []*obj{{Name: "a"}, {Name: "b"}, {Name: "c"}}
	tests := []struct {
		name string
		// queue makes a queue: pop takes one item from it, waiting for
		// one, and fill queues the three objects.
		queue func() (pop func(context.Context) error, fill func())
	}{
		{"FIFO, one by one", func() (func(context.Context) error, func()) {
			q := stores.NewFIFO(stores.FIFOOptions[*obj]{})
			pop := func(ctx context.Context) error { _, err := q.Pop(ctx); return err }
			return pop, func() {
				for _, o := range objs {
					_ = q.Add(o)
				}
			}
		}},
		{"Heap, one Replace", func() (func(context.Context) error, func()) {
			h := stores.NewHeap(stores.HeapOptions[*obj]{})
			pop := func(ctx context.Context) error { _, err := h.Pop(ctx); return err }
			return pop, func() { _ = h.Replace(slices.Clone(objs)) }
		}},
		{"DeltaFIFO, one Replace", func() (func(context.Context) error, func()) {
			f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[*obj]{})
			pop := func(ctx context.Context) error {
				return f.Pop(ctx, func(string, []cache.Delta[*obj]) error { return nil })
			}
			return pop, func() { _ = f.Replace(slices.Clone(objs)) }
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				ctx, cancel := context.WithCancel(t.Context())
				defer cancel()
				pop, fill := tt.queue()
				popped := make(chan struct{}, len(objs))
				for range objs {
					go func() {
						if pop(ctx) == nil {
							popped <- struct{}{}
						}
					}()
				}
				synctest.Wait() // every Pop waits
				fill()
				synctest.Wait() // every Pop that can go on has
				if n := len(popped); n != len(objs) {
					t.Fatalf("%d of %d waiting Pops got an item", n, len(objs))
				}
			})
		})
	}
}

func TestHeapPopWaits(t *testing.T) {
	h := stores.NewHeap(stores.HeapOptions[*obj]{})
	got := make(chan *obj)
	go func() {
		o, _ := h.Pop(t.Context())
		got <- o
	}()
	_ = h.Replace([]*obj{{Name: "b"}, {Name: "a"}})
	if o := <-got; o.Name != "a" && o.Name != "b" {
		t.Fatalf("popped %v", o)
	}
	done := make(chan error)
	go func() {
		_, _ = h.Pop(t.Context()) // the other one
		_, err := h.Pop(t.Context())
		done <- err
	}()
	h.Close()
	if err := <-done; !errors.Is(err, cache.ErrClosed) {
		t.Fatalf("Pop after Close = %v", err)
	}
}

// TestExpirationCache runs in a testing/synctest bubble, where time.Sleep
// moves the time forward at once and exactly.
func TestExpirationCache(t *testing.T) {
	synctest.Test(t, checkExpirationCache)
}

func checkExpirationCache(t *testing.T) {
	c := stores.NewExpirationCache(stores.ExpirationCacheOptions[*obj]{TTL: time.Minute})
	_ = c.Add(&obj{Name: "a"})
	time.Sleep(30 * time.Second)
	_ = c.Add(&obj{Name: "b"})
	time.Sleep(30*time.Second - 1)
	if got := c.ListKeys(); len(got) != 2 {
		t.Fatalf("just before a expires, keys = %q", got)
	}
	time.Sleep(1) // a is TTL old: expired
	if _, ok := c.Get("a"); ok {
		t.Error("a did not expire at TTL")
	}
	if _, ok := c.Get("b"); !ok {
		t.Error("b expired early")
	}
	_ = c.Update(&obj{Name: "b", Version: 2}) // refreshes b
	time.Sleep(59 * time.Second)
	if o, ok := c.Get("b"); !ok || o.Version != 2 {
		t.Errorf("refreshed b = %v, %v", o, ok)
	}
	time.Sleep(time.Second)
	if n := c.Len(); n != 0 {
		t.Errorf("Len after everything expired = %d", n)
	}
	if l := c.List(); len(l) != 0 {
		t.Errorf("List after everything expired = %v", l)
	}
	_ = c.Replace([]*obj{{Name: "x"}, {Name: "y"}})
	time.Sleep(time.Minute)
	if n := c.Len(); n != 0 {
		t.Errorf("replaced objects did not expire: Len = %d", n)
	}

	d := stores.NewExpirationCache(stores.ExpirationCacheOptions[*obj]{})
	_ = d.Add(&obj{Name: "a"})
	time.Sleep(stores.DefaultTTL - 1)
	if d.Len() != 1 {
		t.Error("default TTL is shorter than DefaultTTL")
	}
	time.Sleep(1)
	if d.Len() != 0 {
		t.Error("default TTL is longer than DefaultTTL")
	}
}

func TestUndeltaStore(t *testing.T) {
	var pushes [][]string
	u := stores.NewUndeltaStore(stores.UndeltaStoreOptions[*obj]{Push: func(all []*obj) {
		n := names(all)
		slices.Sort(n)
		pushes = append(pushes, n)
	}})
	_ = u.Add(&obj{Name: "a"})
	_ = u.Add(&obj{Name: "b"})
	_ = u.Update(&obj{Name: "a", Version: 2})
	_ = u.Delete(&obj{Name: "b"})
	_ = u.Replace([]*obj{{Name: "c"}, {Name: "d"}})
	if err := u.Add(&obj{}); !errors.Is(err, cache.ErrEmptyKey) {
		t.Errorf("Add with no name = %v", err)
	}
	want := [][]string{{"a"}, {"a", "b"}, {"a", "b"}, {"a"}, {"c", "d"}}
	if !slices.EqualFunc(pushes, want, slices.Equal[[]string]) {
		t.Errorf("pushes = %q, want %q (a failed write pushes nothing)", pushes, want)
	}
}
