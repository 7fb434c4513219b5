package cache_test

import (
	"strings"
	"testing"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/cache/cachetest"
)

type obj = cachetest.Object

func TestConformance(t *testing.T) {
	t.Run("Store", func(t *testing.T) {
		cachetest.RunIndexer(t, func(ix cache.Indexers[*obj]) cachetest.Indexed {
			return cache.NewStore(cache.StoreOptions[*obj]{Indexers: ix})
		})
	})
	t.Run("Store/AddIndexers", func(t *testing.T) {
		// Indexes added after construction must behave the same.
		cachetest.RunIndexer(t, func(ix cache.Indexers[*obj]) cachetest.Indexed {
			s := cache.NewStore(cache.StoreOptions[*obj]{})
			if err := s.AddIndexers(ix); err != nil {
				t.Fatal(err)
			}
			return s
		})
	})
}

// brokenStore forgets deletes; the kit must notice, naming the rule.
type brokenStore struct{ *cache.Store[*obj] }

func (brokenStore) Delete(*obj) error { return nil }

// TestConformanceCatchesViolations checks the kit itself: a store that
// ignores deletes must fail, with violations that name their rules.
func TestConformanceCatchesViolations(t *testing.T) {
	err := cachetest.CheckIndexer(func(ix cache.Indexers[*obj]) cachetest.Indexed {
		return brokenStore{cache.NewStore(cache.StoreOptions[*obj]{Indexers: ix})}
	})
	if err == nil {
		t.Fatal("CheckIndexer passed a store that ignores deletes")
	}
	for _, rule := range []string{
		`rule "Get does not return deleted objects"`,
		`rule "ListKeys lists every key once"`,
		`rule "ByIndex returns the objects filed under the value, once each"`,
	} {
		if !containsErr(err, rule) {
			t.Errorf("violations do not mention %s:\n%v", rule, err)
		}
	}
	if err := cachetest.CheckIndexer(func(ix cache.Indexers[*obj]) cachetest.Indexed {
		return cache.NewStore(cache.StoreOptions[*obj]{Indexers: ix})
	}); err != nil {
		t.Errorf("CheckIndexer(Store) = %v", err)
	}
}

func containsErr(err error, s string) bool {
	return err != nil && strings.Contains(err.Error(), s)
}
