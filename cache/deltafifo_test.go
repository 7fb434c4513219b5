package cache_test

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"

	"github.com/loom-k8s/loom/cache"
)

func newItemFIFO(known cache.Reader[item]) *cache.DeltaFIFO[item] {
	return cache.NewDeltaFIFO(cache.DeltaFIFOOptions[item]{KeyFunc: itemKey, KnownObjects: known})
}

func TestDeltaFIFOPopWaitsForAnItem(t *testing.T) {
	f := newItemFIFO(nil)
	got := make(chan string)
	go func() {
		_ = f.Pop(t.Context(), func(key string, _ []cache.Delta[item]) error {
			got <- key
			return nil
		})
	}()
	if err := f.Add(item{"a", "1"}); err != nil {
		t.Fatal(err)
	}
	if k := <-got; k != "a" {
		t.Fatalf("popped %q, want a", k)
	}
}

func TestDeltaFIFOPopEnds(t *testing.T) {
	tests := []struct {
		name string
		end  func(f *cache.DeltaFIFO[item], cancel context.CancelFunc)
		want error
	}{
		{"context canceled", func(_ *cache.DeltaFIFO[item], cancel context.CancelFunc) { cancel() }, context.Canceled},
		{"closed", func(f *cache.DeltaFIFO[item], _ context.CancelFunc) { f.Close() }, cache.ErrClosed},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := newItemFIFO(nil)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			done := make(chan error)
			go func() {
				done <- f.Pop(ctx, func(string, []cache.Delta[item]) error {
					return errors.New("process must not be called")
				})
			}()
			tt.end(f, cancel)
			if err := <-done; !errors.Is(err, tt.want) {
				t.Fatalf("Pop = %v, want %v", err, tt.want)
			}
		})
	}
}

func TestDeltaFIFOPopWithDoneContextPopsNothing(t *testing.T) {
	f := newItemFIFO(nil)
	_ = f.Add(item{"a", "1"})
	ctx, cancel := context.WithCancel(t.Context())
	cancel()
	err := f.Pop(ctx, func(string, []cache.Delta[item]) error { t.Error("process called"); return nil })
	if !errors.Is(err, context.Canceled) {
		t.Fatalf("Pop = %v, want context.Canceled", err)
	}
	if f.Len() != 1 {
		t.Fatalf("Len = %d, want 1", f.Len())
	}
}

func TestDeltaFIFOProcessError(t *testing.T) {
	f := newItemFIFO(nil)
	_ = f.Add(item{"a", "1"})
	boom := errors.New("boom")
	err := f.Pop(t.Context(), func(string, []cache.Delta[item]) error { return boom })
	var pe *cache.ProcessError
	if !errors.As(err, &pe) || pe.Key != "a" || !errors.Is(err, boom) {
		t.Fatalf("Pop = %v, want a ProcessError for a wrapping boom", err)
	}
	if f.Len() != 0 {
		t.Fatalf("Len = %d after a failed process, want 0: failed items are not re-queued", f.Len())
	}
}

func TestDeltaFIFOKeyErrors(t *testing.T) {
	keyErr := errors.New("no key")
	f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[item]{KeyFunc: func(item) (string, error) { return "", keyErr }})
	for name, write := range map[string]func() error{
		"Add":     func() error { return f.Add(item{}) },
		"Update":  func() error { return f.Update(item{}) },
		"Delete":  func() error { return f.Delete(item{}) },
		"Replace": func() error { return f.Replace([]item{{}}) },
	} {
		var ke *cache.KeyError
		if err := write(); !errors.As(err, &ke) || !errors.Is(err, keyErr) {
			t.Errorf("%s = %v, want a KeyError wrapping the key function's error", name, err)
		}
	}
	if f.Len() != 0 {
		t.Errorf("Len = %d, want 0", f.Len())
	}
	// A type that is not an API object has no default key function.
	g := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[item]{})
	if err := g.Add(item{"a", "1"}); !errors.Is(err, cache.ErrNoKeyFunc) {
		t.Errorf("Add without a key function = %v, want ErrNoKeyFunc", err)
	}
	// An empty key is refused.
	if err := newItemFIFO(nil).Add(item{}); !errors.Is(err, cache.ErrEmptyKey) {
		t.Errorf("Add with an empty key = %v, want ErrEmptyKey", err)
	}
}

// TestDeltaFIFOConcurrent runs producers, resyncs and consumers
// together, with an informer-like consumer that applies deltas to the known store: every
// key must come out, nothing twice, and the store must end up matching.
func TestDeltaFIFOConcurrent(t *testing.T) {
	known := cache.NewStore(cache.StoreOptions[item]{KeyFunc: itemKey})
	f := newItemFIFO(known)
	const producers, perProducer, consumers = 4, 200, 3
	var wg sync.WaitGroup
	for p := range producers {
		wg.Go(func() {
			for i := range perProducer {
				key := fmt.Sprintf("p%d-%d", p, i)
				_ = f.Add(item{key, "1"})
				_ = f.Update(item{key, "2"})
				if i%4 == 0 {
					_ = f.Delete(item{key, "3"})
				}
			}
		})
	}
	// Resyncs meanwhile re-deliver known objects; they must not change
	// the outcome.
	resyncDone := make(chan struct{})
	go func() {
		defer close(resyncDone)
		for range 50 {
			if err := f.Resync(); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	var mu sync.Mutex
	popped := map[string]int{}
	var cwg sync.WaitGroup
	for range consumers {
		cwg.Go(func() {
			for {
				err := f.Pop(t.Context(), func(key string, ds []cache.Delta[item]) error {
					mu.Lock()
					popped[key]++
					mu.Unlock()
					for _, d := range ds {
						if d.Type == cache.Deleted {
							_ = known.Delete(d.Object)
						} else {
							_ = known.Update(d.Object)
						}
					}
					return nil
				})
				if errors.Is(err, cache.ErrClosed) {
					return
				}
				if err != nil {
					t.Error(err)
					return
				}
			}
		})
	}
	wg.Wait()
	<-resyncDone
	f.Close()
	cwg.Wait()
	// A key may be popped more than once if its later deltas arrived
	// after an earlier pop; it must be popped at least once, and the
	// store must hold exactly the keys not deleted, at their last value.
	for p := range producers {
		for i := range perProducer {
			key := fmt.Sprintf("p%d-%d", p, i)
			if popped[key] == 0 {
				t.Errorf("%s never popped", key)
			}
			it, ok := known.Get(key)
			if deleted := i%4 == 0; ok == deleted || (ok && it.Val != "2") {
				t.Errorf("known %s = %v, %v; deleted = %v", key, it, ok, deleted)
			}
		}
	}
}

func TestDeltaTypeString(t *testing.T) {
	for typ, want := range map[cache.DeltaType]string{
		cache.Added: "Added", cache.Updated: "Updated", cache.Deleted: "Deleted",
		cache.Replaced: "Replaced", cache.Sync: "Sync", 0: "DeltaType(0)", 9: "DeltaType(9)",
	} {
		if got := typ.String(); got != want {
			t.Errorf("%d.String() = %q, want %q", typ, got, want)
		}
	}
}
