package stores_test

import (
	"testing"
	"time"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/cache/cachetest"
	"github.com/loom-k8s/loom/cache/stores"
)

// TestConformance runs each store through cachetest's store kit.
func TestConformance(t *testing.T) {
	cases := map[string]cachetest.NewStore{
		"UndeltaStore": func() cache.ReadWriter[*obj] {
			return stores.NewUndeltaStore(stores.UndeltaStoreOptions[*obj]{Push: func([]*obj) {}})
		},
		"ExpirationCache": func() cache.ReadWriter[*obj] {
			// On the real clock: a TTL far beyond the test's timeout
			// keeps every object for the whole case.
			return stores.NewExpirationCache(stores.ExpirationCacheOptions[*obj]{TTL: 24 * time.Hour})
		},
		"FIFO": func() cache.ReadWriter[*obj] { return stores.NewFIFO(stores.FIFOOptions[*obj]{}) },
		"Heap": func() cache.ReadWriter[*obj] { return stores.NewHeap(stores.HeapOptions[*obj]{}) },
	}
	for name, newStore := range cases {
		t.Run(name, func(t *testing.T) { cachetest.RunStore(t, newStore) })
	}
}
