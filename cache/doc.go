// Package cache is Loom's client-side cache: the [Reflector] that lists
// and watches, the [DeltaFIFO] that carries changes from it to an
// [Informer], the indexed [Store] that holds the cache, the
// shared-informer [Factory], and the readers over it ([CachedClient],
// [StoreReader]). This overview covers the storage half (stores,
// indexes, queues), then informers, the factory and readers; each type
// documents the details. The stores and queues are generic over the
// element type T and work for any Go type given a key function; API
// objects (pointers such as *corev1.Pod) need none, as they are filed by
// namespace/name.
//
// # Getting started
//
// A cache of pods, with a custom index and a label-selector query:
//
//	pods := cache.NewStore(cache.StoreOptions[*corev1.Pod]{
//		Indexers: cache.Indexers[*corev1.Pod]{
//			"node": func(p *corev1.Pod) ([]string, error) { return []string{p.Spec.NodeName}, nil },
//		},
//	})
//	_ = pods.Add(pod)
//	onNode, _ := pods.ByIndex("node", "node-1")
//	frontends, _ := pods.Select("default", labels.SelectorFromSet(labels.Set{"tier": "frontend"}))
//
// # Where Loom uses each type
//
//   - [Store] is the informer cache (client-go's Store, ThreadSafeStore
//     and Indexer in one type). The informer is its only writer; listers
//     and reconcilers read it through [Indexer].
//   - [DeltaFIFO] sits between the reflector and the informer: the
//     reflector writes list and watch results into it through [Writer],
//     and the informer pops each key's deltas, applies them to the Store
//     (its KnownObjects) and hands them to event handlers.
//   - The stores that are not on the informer path (FIFO, Heap,
//     ExpirationCache, UndeltaStore) live in package
//     [github.com/loom-k8s/loom/cache/stores].
//
// # Keys
//
// A [KeyFunc] maps an object to its key. The default, for types that
// satisfy [Object], is [MetaNamespaceKey]: "namespace/name", or "name"
// for cluster-scoped objects; [SplitKey] reverses it. Other types must
// give one in their options; the MyPod example in this package's
// examples shows a plain struct keyed by its Name field.
//
// # Readers and writers
//
// Reading and writing are separate interfaces of a few methods each:
// [Reader] (Get, List, ListKeys, Len), [Writer] (Add, Update, Delete,
// Replace) and [IndexReader] (index and label-selector queries). [Indexer]
// is Reader plus IndexReader: the read-only view handed to listers. Both
// the Store and the DeltaFIFO are Writers, so a reflector can fill either.
//
// Objects given to a writer become shared with every reader, and objects
// returned by any reader are shared with the store: nobody may mutate
// them. Copy an object (DeepCopy, for API types) before changing it.
//
// # Indexes and label selectors
//
// A Store keeps three kinds of index, each a map from a value to the set
// of objects filed under it: the namespace index ([NamespaceIndex]),
// custom indexes ([IndexFunc], given in [StoreOptions] or added with
// [Store.AddIndexers] or [Informer.AddIndexer]), and a label index (label key → value → objects).
// [Store.Select] answers a labels.Selector from the smallest candidate
// set among the namespace and the selector's "=", "==", "in" and "exists"
// requirements, and checks each candidate against the whole selector; it
// scans only when the selector has none of those requirements and no
// namespace is given. Internally objects live in a slice addressed by
// 32-bit ids; an index set is a sorted slice of ids (4 bytes per member)
// or, once it holds at least 1 in 32 of the objects, a bitmap (a label
// every object has costs one bit per object). The store's own memory
// beside client-go's Indexer is measured by the benchmarks in bench/
// (docs/performance.md says how to run them).
//
// # Deltas and tombstones
//
// A [Delta] is a [DeltaType] (Added, Updated, Deleted, Replaced, Sync)
// and the object. When a relist (Replace) no longer contains an object
// the consumer has, the DeltaFIFO queues a tombstone: a Deleted delta
// with FinalStateUnknown set, carrying the last state known. Deletes that
// happen while a watch is disconnected are only ever seen this way, and
// the state a tombstone carries may be stale. Code that must observe the
// final state of every object should use a finalizer instead. The
// [DeltaFIFO] type documents every queueing rule, what Pop does when
// processing fails, and what HasSynced means.
//
// # Informers
//
// An [Informer] keeps a [Store] in step with the server and tells
// handlers about every change:
//
//	Reflector ──► DeltaFIFO ──► pop loop ──► Store (read through readers)
//	   (list, watch)                │
//	                                ├──► one buffer and goroutine per handler
//	                                └──► inline handlers, called right there
//
// The reflector writes into the DeltaFIFO, whose KnownObjects is the
// Store; one goroutine pops each key's deltas, applies them to the Store
// (Added, Updated, Replaced → store; Deleted → remove) and queues a
// [Handler] call for every handler. Each handler has its own unbounded
// buffer and goroutine, so a slow handler delays only itself. A handler
// that only enqueues keys can be inline instead ([HandlerOptions].Inline):
// the pop loop calls it directly, saving a goroutine hand-off per event,
// which is how the controller package's For and Owns sources run. A relist
// that finds an object unchanged (same resourceVersion) calls no handler,
// and keeps the cached object, which is then not even decoded: its
// namespace, name and resourceVersion are read from the response first
// (a paginated list's items, or a streaming list's ADDED events).
//
// A selector may change while an informer runs
// ([ListWatchOptions].LabelSelectorFunc, or [FactoryOptions].KindSelector):
// [Informer.Relist] (or [Factory.Relist] for every informer of some
// kinds) then lists again at once and returns when the cache holds what
// that list found, handlers having been told of the objects that left and
// came. When the selector only narrowed, [Informer.Narrow] (or
// [Factory.Narrow]) lets go of the objects that no longer match and
// watches on from where it was, without a list. A sharded manager uses
// both to follow the buckets a ring gives it.
//
//	inf := cache.NewInformer(cache.ListWatch(pods, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.Pod]{
//		Transform: cache.StripManagedFields[*corev1.Pod],
//	})
//	reg, _ := inf.AddHandler(cache.HandlerFuncs[*corev1.Pod]{
//		Add:    func(p *corev1.Pod, initial bool) { queue.Add(key(p)) },
//		Update: func(_, p *corev1.Pod) { queue.Add(key(p)) },
//		Delete: func(p *corev1.Pod, _ bool) { queue.Add(key(p)) },
//	}, cache.HandlerOptions{})
//	go inf.Start(ctx) // blocks until ctx ends
//	if err := cache.WaitForCacheSync(ctx, reg); err != nil { ... }
//	pod, ok := inf.Indexer().Get("default/web-0")
//
// Handlers can be added at any time; one added late first receives the
// cached objects as OnAdd(obj, initial=true). Handlers can be removed
// ([Registration].Remove), have their own resync period
// ([HandlerOptions].ResyncPeriod: every period the handler alone gets
// OnUpdate(obj, obj) for every cached object, read from the Store; the
// reflector and the DeltaFIFO are not involved) and their own HasSynced.
//
// Two meanings of synced: [Informer.HasSynced] is true once the first
// list is in the Store and every notification of it has been queued;
// [Registration].HasSynced once that handler has returned from all of
// them. [WaitForCacheSync] waits for either kind and fails fast, with a
// [*SyncError] per laggard, when one cannot sync without help (RBAC
// Forbidden, Unauthorized, a missing resource, a stopped informer).
//
// Objects in the cache are shared, read-only, by the Store, every
// lister and every handler. A transform ([InformerOptions].Transform)
// shapes them before they are stored; the mutation detector
// ([InformerOptions].DetectMutations, or LOOM_CACHE_MUTATION_DETECTOR=true)
// finds code that changes them, in tests. In production, writes check
// what they send: a [CachedClient] refuses to create or update from an
// object its cache holds, with [ErrCachedObject], and every client.Client
// refuses an object holding a part that cached objects share (see
// [Sharing]) and that was changed in place, with a
// *client.SharedChangedError. Every client also looks in the cached
// object of the same key, in each sharing informer of the process that
// holds the resource (once synced): a copy made after the change carries
// it in parts of its own, so a write that holds the changed value where
// the cached object holds the part is refused too; one that replaced the
// part is not. Not checked: parts one object repeats (a Deployment's
// labels and its template's, decoded as one value), which are not in the
// sharing table, and objects whose informer shares no parts
// (ShareOff) or cannot name its resource (a custom ListerWatcher).
//
// Metadata-only informers are informers of
// *metav1.PartialObjectMetadata, over a client made with
// client.For[metav1.PartialObjectMetadata] and the resource; dynamic
// ones are informers of *unstructured.Unstructured.
//
// A referenced-only [CachedClient] ([InformerForOptions].ReferencedOnly
// with [CachedClientFor], or [NewReferencedClient]) sits between the two:
// it caches every object's metadata, and the full object only for the
// objects read, fetched on the first read and let go when the watch
// reports a change. It is for kinds of which a controller reads a few
// among many large objects, such as the Secrets its objects name.
//
// # Factory
//
// A [Factory] shares informers: [InformerFor] returns one informer per
// object type, resource, namespace, label and field selector and
// transform name. [Factory.Start] starts those not yet running,
// [Factory.WaitForCacheSync] waits for them, [Factory.StopInformer]
// stops one (a custom resource whose definition was deleted) and
// [Factory.Shutdown] stops all and waits for their goroutines.
//
// A factory caches all namespaces, one (FactoryOptions.Namespace) or a
// set (FactoryOptions.Namespaces). Over a set, each informer lists and
// watches every namespace with requests of its own, so roles granted in
// those namespaces suffice, and keeps them in one cache;
// [Factory.SetNamespaces] changes the set while it runs, listing only
// the namespaces added.
//
// # Reading the cache
//
// Reconcilers read through client.Reader (and client.IndexedReader for
// index reads), whose Get fails with a NotFound error, as the API server
// does, when the object is absent. The manager's cached clients are the
// recommended way to get one; without a manager, [NewCachedClient] pairs
// an informer with a live client for writes, and [StoreReader] reads any
// store, such as an informer's [Informer.Indexer] or one filled by hand
// in a unit test. Every one of them reads the cache, never the server;
// live reads go through client.Client.
//
// # Errors
//
// Methods return errors rather than panicking: [*KeyError] when a key
// cannot be computed, [*IndexError] when an index function fails (the
// write changes nothing), [*ProcessError] from Pop, and sentinels such as
// [ErrClosed] and [ErrNoSuchIndex], usually wrapped; test with errors.Is
// and errors.As.
//
// # Conformance
//
// Package cachetest checks any [ReadWriter] or indexed store against the
// invariants this package promises, in the style of testing/slogtest.
package cache
