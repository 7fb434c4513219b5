// Package cachetest checks implementations of the cache package's store
// interfaces against the invariants that package promises, in the style
// of testing/slogtest: a table of cases, each a few writes followed by
// composable checks, with every violation reported (joined with
// errors.Join) under the name of the rule it breaks.
//
// [RunStore] and [CheckStore] test any [cache.ReadWriter]; [RunIndexer]
// and [CheckIndexer] additionally test the index and label-selector
// queries of an [Indexed] store. The stores under test hold [*Object]
// values and must file them with the default key function,
// cache.MetaNamespaceKey. cache's own tests run the kit against Store,
// UndeltaStore, ExpirationCache, FIFO and Heap.
package cachetest
