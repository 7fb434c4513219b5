package cache

import (
	"context"
	"testing"

	corev1 "k8s.io/api/core/v1"
	cgcache "k8s.io/client-go/tools/cache"

	"github.com/loom-k8s/loom/cache"
)

// BenchmarkDeltaFIFO pushes watch-like traffic through each DeltaFIFO and
// pops it the way an informer does, applying the deltas to the store that
// is the queue's known objects: per op, 1,000 Updates of distinct stored
// pods (cycling through the 100k corpus) and 1,000 Pops, which empty the
// queue.
// Both queues start from a store holding the corpus.
func BenchmarkDeltaFIFO(b *testing.B) {
	s := buildStores(b)
	const batch = 1000
	b.Run("updates/client-go", func(b *testing.B) {
		known := cgcache.NewIndexer(cgcache.MetaNamespaceKeyFunc,
			cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
		for _, p := range s.pods {
			_ = known.Add(p)
		}
		f := cgcache.NewDeltaFIFOWithOptions(cgcache.DeltaFIFOOptions{
			KeyFunction: cgcache.MetaNamespaceKeyFunc, KnownObjects: known, EmitDeltaTypeReplaced: true,
		})
		process := func(obj any, _ bool) error {
			for _, d := range obj.(cgcache.Deltas) {
				if d.Type == cgcache.Deleted {
					_ = known.Delete(d.Object)
				} else {
					_ = known.Update(d.Object)
				}
			}
			return nil
		}
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			for range batch {
				_ = f.Update(s.pods[i%len(s.pods)])
				i++
			}
			for range batch { // the batch's keys are distinct
				if _, err := f.Pop(process); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
	b.Run("updates/loom", func(b *testing.B) {
		known := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
		if err := known.Replace(s.pods); err != nil {
			b.Fatal(err)
		}
		f := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[*corev1.Pod]{KnownObjects: known})
		process := func(_ string, deltas []cache.Delta[*corev1.Pod]) error {
			for _, d := range deltas {
				if d.Type == cache.Deleted {
					_ = known.Delete(d.Object)
				} else {
					_ = known.Update(d.Object)
				}
			}
			return nil
		}
		ctx := context.Background()
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			for range batch {
				_ = f.Update(s.pods[i%len(s.pods)])
				i++
			}
			for range batch {
				if err := f.Pop(ctx, process); err != nil {
					b.Fatal(err)
				}
			}
		}
	})
}
