package cachetest_test

import (
	"fmt"
	"testing"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/cache/cachetest"
)

// CheckIndexer returns every violation, joined; nil means the store
// keeps every rule. In a test, RunIndexer reports one subtest per case.
func ExampleCheckIndexer() {
	err := cachetest.CheckIndexer(func(ix cache.Indexers[*cachetest.Object]) cachetest.Indexed {
		return cache.NewStore(cache.StoreOptions[*cachetest.Object]{Indexers: ix})
	})
	fmt.Println("violations:", err)
	// Output:
	// violations: <nil>
}

func TestRunStore(t *testing.T) {
	cachetest.RunStore(t, func() cache.ReadWriter[*cachetest.Object] {
		return cache.NewStore(cache.StoreOptions[*cachetest.Object]{})
	})
}
