package cache_test

import (
	"math/rand/v2"
	"sync"
	"sync/atomic"
	"testing"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

// TestStoreConcurrentReaders runs readers of every kind against one
// writer (an informer's shape) under -race. Readers check what holds at
// any instant: every listed object can be read back, and every Select
// result matches its selector. At the end the store must equal the
// writer's model.
func TestStoreConcurrentReaders(t *testing.T) {
	s := cache.NewStore(cache.StoreOptions[*obj]{Indexers: cache.Indexers[*obj]{
		"ver": func(o *obj) ([]string, error) { return []string{o.Labels["ver"]}, nil },
	}})
	sel := labels.SelectorFromSet(labels.Set{"app": "a"})
	var stop atomic.Bool
	var wg sync.WaitGroup
	for i := range 4 {
		wg.Go(func() {
			r := rand.New(rand.NewPCG(uint64(i), 2))
			for !stop.Load() {
				switch r.IntN(4) {
				case 0:
					for _, o := range s.List() {
						if o == nil {
							t.Error("List returned nil")
						}
					}
				case 1:
					got, err := s.Select(namespaces[r.IntN(len(namespaces))], sel)
					if err != nil {
						t.Error(err)
					}
					for _, o := range got {
						if o.Labels["app"] != "a" {
							t.Errorf("Select(app=a) returned %v", o.Labels)
						}
					}
				case 2:
					if _, err := s.ByIndex("ver", "1"); err != nil {
						t.Error(err)
					}
				case 3:
					_ = s.ListIndexFuncValues(cache.NamespaceIndex)
					_, _ = s.Get("ns1/o1")
				}
			}
		})
	}
	r := rand.New(rand.NewPCG(9, 9))
	model := map[string]*obj{}
	for step := range 5000 {
		o := randObj(r, step, 100)
		switch n := r.IntN(100); {
		case n < 60:
			_ = s.Update(o)
			model[keyOfObj(o)] = o
		case n < 98:
			_ = s.Delete(o)
			delete(model, keyOfObj(o))
		default:
			objs := make([]*obj, 0, 50)
			clear(model)
			for range 50 {
				o := randObj(r, step, 100)
				objs = append(objs, o)
				model[keyOfObj(o)] = o
			}
			_ = s.Replace(objs)
		}
	}
	stop.Store(true)
	wg.Wait()
	if s.Len() != len(model) {
		t.Fatalf("Len = %d, model has %d", s.Len(), len(model))
	}
	for k, want := range model {
		if got, ok := s.Get(k); !ok || got != want {
			t.Errorf("Get(%q) = %v, %v; want %v", k, got, ok, want)
		}
	}
	checkSelect(t, s, model, "", sel)
}
