// Package stores holds keyed stores and queues that Loom's informers do
// not use, for programs that build their own machinery on package
// [github.com/loom-k8s/loom/cache]:
//
//   - [FIFO] keeps only the newest object of each key, in arrival order:
//     for queues where only the latest state of an object matters;
//   - [Heap] pops the least object first by a given order: for priority
//     queues;
//   - [ExpirationCache] forgets an object a fixed time after it was
//     written: for answers that are costly to get and may be stale for a
//     while, such as discovery results;
//   - [UndeltaStore] hands its whole contents to a function after each
//     change: for consumers that want the full state rather than deltas.
//
// Each is a [cache.ReadWriter], keyed by a [cache.KeyFunc] that defaults
// to [cache.MetaNamespaceKey] for API objects, and is safe for concurrent
// use. Package [github.com/loom-k8s/loom/cache/cachetest] checks them
// against the same rules as the informer's [cache.Store].
package stores
