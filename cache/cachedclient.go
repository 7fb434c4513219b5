package cache

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strconv"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
)

// CachedClientOptions configure [NewCachedClient]. The zero value is valid.
type CachedClientOptions struct {
	// Wait bounds how long a read waits for the cache to catch up with
	// this client's own writes. Zero means five seconds.
	Wait time.Duration
	// BeforeWrite, when set, is called with each object Create, Update or
	// Apply is about to send, and may change it; an error stops the write
	// and is returned. (UpdateStatus, ApplyStatus and Patch do not call
	// it.) A sharded manager
	// uses it to keep the bucket label on the objects of sharded kinds.
	// Nil means none.
	BeforeWrite func(ctx context.Context, obj client.Object) error
	// EvictAfter is how long a referenced-only client (see
	// [InformerForOptions].ReferencedOnly) keeps a full object that no
	// read has asked for; the object's metadata stays cached. It is
	// ignored for other clients. Default ten minutes.
	EvictAfter time.Duration
}

// ErrStaleCache is returned (wrapped in a *StaleCacheError) when the cache
// has not caught up with a write of this client within the wait.
var ErrStaleCache = errors.New("cache has not caught up with this client's write")

// ErrCachedObject is returned (wrapped) by a CachedClient's Create, Update
// and UpdateStatus when given the very object its cache holds, as a read
// returned it. That object is shared with every reader, and parts of it
// (containers, labels, managed fields) may be shared with other cached
// objects: writing it means it was, or is about to be, changed in place,
// and the change would show in every one of them and be sent with their
// next write. DeepCopy the object and change and write the copy.
var ErrCachedObject = errors.New("object is the cache's own, shared with every reader: DeepCopy it and write the copy")

// StaleCacheError names the object and the resourceVersion the read waited
// for.
type StaleCacheError struct {
	Key             string
	ResourceVersion string // written; "" for a delete
	Waited          time.Duration
}

func (e *StaleCacheError) Error() string {
	what := "the delete"
	if e.ResourceVersion != "" {
		what = "resourceVersion " + e.ResourceVersion
	}
	return fmt.Sprintf("cache: %s: cache has not seen %s after %s", e.Key, what, e.Waited)
}

func (e *StaleCacheError) Unwrap() error { return ErrStaleCache }

// CachedClient writes through a live client and reads from an informer's
// cache, with one promise the two alone do not give: a read of an object
// this client wrote returns the write or something newer. A read that
// would return an older state waits (up to Options.Wait) for the informer
// to deliver the write, and fails with a *StaleCacheError rather than
// returning stale data.
//
// Reads of objects this client has not written are plain cache reads and
// may lag the server, as every cache read does. The promise relies on
// resourceVersions of one resource increasing with each write, which
// kube-apiserver backed by etcd guarantees.
//
// Objects returned by reads are shared with the cache: do not change them.
// Create, Update and UpdateStatus refuse them with [ErrCachedObject]; write
// a DeepCopy. They also refuse, with a *client.SharedChangedError
// ([client.ErrSharedChanged]), to write an object that holds a part shared
// with other cached objects that was changed in place, or whose cached
// version holds one when the object holds the same value there: a copy
// made after such a change carries it. A CachedClient is safe for
// concurrent use.
//
// A referenced-only CachedClient ([NewReferencedClient], or
// [InformerForOptions].ReferencedOnly) keeps the same promises over a
// cache of metadata, holding in full only the objects it has read.
type CachedClient[T client.Object] struct {
	live *client.Client[T]
	inf  *Informer[T]   // nil for a referenced-only client
	ref  *referenced[T] // set for a referenced-only client
	wait time.Duration
	err  error // set by FailedCachedClient: every call returns it

	beforeWrite func(context.Context, client.Object) error

	mu      sync.Mutex
	changed chan struct{} // closed and replaced on every cache change
	written map[string]written
	peak    int // the most entries written has held since it was made
	// deleting holds the Deletes in flight, by key, so that one whose
	// watch event beats its response knows the cache has seen it.
	deleting map[string][]*deleteCall
}

// deleteCall is one Delete in flight.
type deleteCall struct {
	seen bool // the cache saw the key deleted since the request was sent
}

type written struct {
	rv      uint64 // 0 for a delete
	deleted bool
}

// NewCachedClient returns a CachedClient over live (for writes) and inf
// (for reads); inf should list and watch what live writes.
func NewCachedClient[T client.Object](live *client.Client[T], inf *Informer[T], opts CachedClientOptions) (*CachedClient[T], error) {
	c := newCachedClient(live, opts)
	c.inf = inf
	if _, err := inf.AddHandler(HandlerFuncs[T]{
		Add:    func(o T, _ bool) { c.observe(o, true) },
		Update: func(_, o T) { c.observe(o, true) },
		Delete: func(o T, _ bool) { c.observe(o, false) },
	}, HandlerOptions{ResyncPeriod: -1}); err != nil {
		return nil, err
	}
	return c, nil
}

// CachedClientFor returns a CachedClient that writes through a client of
// f's REST client and options, and reads from f's informer for E chosen
// by opts (see [InformerFor]). With opts.ReferencedOnly, it reads from
// f's metadata-only informer of E's resource instead, and holds full
// objects only for those read (see [NewReferencedClient]); E's resource
// must then be known without a request: a built-in type, or one for
// which opts.Resource is set.
func CachedClientFor[E any, T interface {
	*E
	client.Object
}](f *Factory, opts InformerForOptions, ccopts CachedClientOptions) (*CachedClient[T], error) {
	copts := f.ClientOptions()
	copts.Resource = opts.Resource
	live, err := client.For[E, T](f.rc, copts)
	if err != nil {
		return nil, fmt.Errorf("cache: CachedClientFor: %w", err)
	}
	if !opts.ReferencedOnly {
		inf, err := InformerFor[E, T](f, opts)
		if err != nil {
			return nil, err
		}
		return NewCachedClient(live, inf, ccopts)
	}
	res, ok := live.KnownResource()
	if !ok {
		return nil, fmt.Errorf("cache: CachedClientFor %T: the resource of a referenced-only client must be known without a request (set Resource): %w", T(new(E)), ErrReferencedOnly)
	}
	opts.Resource, opts.ReferencedOnly = res, false
	meta, err := InformerFor[metav1.PartialObjectMetadata](f, opts)
	if err != nil {
		return nil, err
	}
	return NewReferencedClient(live, meta, ccopts)
}

func newCachedClient[T client.Object](live *client.Client[T], opts CachedClientOptions) *CachedClient[T] {
	if opts.Wait <= 0 {
		opts.Wait = 5 * time.Second
	}
	return &CachedClient[T]{live: live, wait: opts.Wait, beforeWrite: opts.BeforeWrite, changed: make(chan struct{}), written: map[string]written{}, deleting: map[string][]*deleteCall{}}
}

// FailedCachedClient returns a CachedClient whose every call fails with
// err. It is for constructors that report a setup error elsewhere and
// cannot return one, such as manager.CachedClient (whose manager's Start
// returns err).
func FailedCachedClient[T client.Object](err error) *CachedClient[T] {
	return &CachedClient[T]{err: err}
}

// observe is told of every change the cache applies: obj is the object as
// now cached (present) or just deleted. Once the cache includes this
// client's last write of obj, that write is forgotten: from then on the
// cache can only move forward, so reads need no more waiting, and the
// record of writes stays as small as the writes the cache has yet to see.
func (c *CachedClient[T]) observe(obj client.Object, present bool) {
	k := key(obj.GetNamespace(), obj.GetName())
	c.mu.Lock()
	if w, ok := c.written[k]; ok && fresh(w, obj, present) {
		c.forget(k)
	}
	if !present {
		for _, d := range c.deleting[k] {
			d.seen = true
		}
	}
	close(c.changed)
	c.changed = make(chan struct{})
	c.mu.Unlock()
}

// pending returns how many writes the cache has yet to show (for tests).
func (c *CachedClient[T]) pending() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.written)
}

// forget drops the record of a write of k. A Go map never gives back
// room, so once the record is empty after holding many writes (the
// burst of a first sync, say) it is made anew. c.mu must be held.
func (c *CachedClient[T]) forget(k string) {
	delete(c.written, k)
	if len(c.written) == 0 && c.peak > 64 {
		c.written, c.peak = map[string]written{}, 0
	}
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// record notes a write of this client.
func (c *CachedClient[T]) record(obj T) {
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	if err != nil {
		return // not an etcd-backed server: no promise to keep
	}
	k := key(obj.GetNamespace(), obj.GetName())
	c.mu.Lock()
	defer c.mu.Unlock()
	w := written{rv: rv}
	if cached, ok := c.cached(obj.GetNamespace(), obj.GetName()); fresh(w, cached, ok) {
		// The cache has it already (the watch beat the response), and the
		// informer has called, or will call, observe for it: nothing to
		// wait for.
		c.forget(k)
		return
	}
	if old, ok := c.written[k]; !ok || old.deleted || rv > old.rv {
		c.written[k] = w
		c.peak = max(c.peak, len(c.written))
	}
}

// Create creates obj on the server.
func (c *CachedClient[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return c.write(ctx, "create", obj, true, func() (T, error) { return c.live.Create(ctx, obj, opts) })
}

// Update updates obj on the server.
func (c *CachedClient[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return c.write(ctx, "update", obj, true, func() (T, error) { return c.live.Update(ctx, obj, opts) })
}

// UpdateStatus updates obj's status on the server.
func (c *CachedClient[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return c.write(ctx, "update status", obj, false, func() (T, error) { return c.live.UpdateStatus(ctx, obj, opts) })
}

// Apply applies obj on the server with server-side apply (see
// client.Client.Apply: only the fields obj sets are sent); later reads
// see the result. Like Create, it passes obj to BeforeWrite first.
func (c *CachedClient[T]) Apply(ctx context.Context, obj T, opts client.ApplyOptions) (T, error) {
	return c.write(ctx, "apply", obj, true, func() (T, error) { return c.live.Apply(ctx, obj, opts) })
}

// ApplyStatus applies obj's status on the server with server-side apply;
// later reads see the result.
func (c *CachedClient[T]) ApplyStatus(ctx context.Context, obj T, opts client.ApplyOptions) (T, error) {
	return c.write(ctx, "apply status", obj, false, func() (T, error) { return c.live.ApplyStatus(ctx, obj, opts) })
}

// write makes a write of obj through do, named op: it refuses the cached
// object itself, passes obj to BeforeWrite first when before is set, and
// records the result so that later reads wait for the cache to hold it.
func (c *CachedClient[T]) write(ctx context.Context, op string, obj T, before bool, do func() (T, error)) (T, error) {
	var zero T
	if c.err != nil {
		return zero, c.err
	}
	if err := c.notCached(op, obj); err != nil {
		return zero, err
	}
	if before && c.beforeWrite != nil {
		if err := c.beforeWrite(ctx, obj); err != nil {
			return zero, err
		}
	}
	out, err := do()
	if err == nil {
		c.record(out)
	}
	return out, err
}

// Patch patches obj (by namespace and name), or one of its subresources,
// on the server.
func (c *CachedClient[T]) Patch(ctx context.Context, obj T, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	if c.err != nil {
		var zero T
		return zero, c.err
	}
	out, err := c.live.Namespace(obj.GetNamespace()).Patch(ctx, obj.GetName(), pt, data, opts, subresources...)
	if err == nil {
		c.record(out)
	}
	return out, err
}

// Delete deletes obj (by namespace and name) on the server; later reads
// wait until the cache no longer has it.
func (c *CachedClient[T]) Delete(ctx context.Context, obj T, opts metav1.DeleteOptions) error {
	if c.err != nil {
		return c.err
	}
	namespace, name := obj.GetNamespace(), obj.GetName()
	k := key(namespace, name)
	d := &deleteCall{}
	c.mu.Lock()
	c.deleting[k] = append(c.deleting[k], d)
	c.mu.Unlock()
	err := c.live.Namespace(namespace).Delete(ctx, name, opts)
	c.mu.Lock()
	defer c.mu.Unlock()
	if rest := slices.DeleteFunc(c.deleting[k], func(e *deleteCall) bool { return e == d }); len(rest) > 0 {
		c.deleting[k] = rest
	} else {
		delete(c.deleting, k)
	}
	if err != nil {
		return err
	}
	if d.seen {
		// The cache saw the key deleted after this request was sent: this
		// delete, or a later one. Nothing to wait for.
		c.forget(k)
		return nil
	}
	c.written[k] = written{deleted: true}
	c.peak = max(c.peak, len(c.written))
	return nil
}

// notCached returns an error wrapping [ErrCachedObject] if obj is the
// object the cache holds under its key. A copy that carries a shared part
// of the cached object changed in place is refused by the live client,
// which looks in the caches of every sharing informer, this one's too.
func (c *CachedClient[T]) notCached(op string, obj T) error {
	var cached T
	var ok bool
	if c.ref != nil {
		cached, ok = c.ref.holds(obj.GetNamespace(), obj.GetName())
	} else {
		cached, ok = c.inf.store.Get(key(obj.GetNamespace(), obj.GetName()))
	}
	if !ok {
		return nil
	}
	a, b := reflect.ValueOf(obj), reflect.ValueOf(cached)
	if a.Kind() == reflect.Pointer && b.Kind() == reflect.Pointer && a.UnsafePointer() == b.UnsafePointer() {
		return fmt.Errorf("cache: %s %s: %w", op, key(obj.GetNamespace(), obj.GetName()), ErrCachedObject)
	}
	return nil
}

// Get reads the object namespace/name from the cache, after waiting for
// the cache to hold this client's last write of it, if any. It returns an
// error for which apierrors.IsNotFound is true when the cache does not
// have the object, and a *StaleCacheError when the cache has not caught up
// with a write within the wait.
func (c *CachedClient[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	if c.err != nil {
		var zero T
		return zero, c.err
	}
	obj, ok, err := c.get(ctx, namespace, name)
	if err == nil && !ok {
		err = apierrors.NewNotFound(c.groupResource(ctx), name)
	}
	return obj, err
}

// List returns the cached objects in namespace ("" for all) whose labels
// match selector (nil for all). It waits for none of this client's
// writes: a list is as fresh as the cache.
func (c *CachedClient[T]) List(ctx context.Context, namespace string, selector labels.Selector) ([]T, error) {
	if c.err != nil {
		return nil, c.err
	}
	if selector == nil {
		selector = labels.Everything()
	}
	if c.ref != nil {
		metas, err := c.ref.meta.store.Select(namespace, selector)
		if err != nil {
			return nil, err
		}
		return c.ref.fullAll(ctx, metas)
	}
	return c.inf.store.Select(namespace, selector)
}

// ByIndex returns the cached objects that the index named index files
// under value, in namespace ("" for all namespaces), typed. Add the index
// with AddIndexer (or the informer's options) before the cache starts.
// An index function's values need not carry the namespace: objects of
// other namespaces are left out here. The objects are shared with the
// cache: read them, never change them. Like List, it reads the cache as
// it is, without waiting for this client's writes. It makes the client a
// client.IndexedReader.
func (c *CachedClient[T]) ByIndex(ctx context.Context, namespace, index, value string) ([]T, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.ref != nil {
		metas, err := byIndex(c.ref.meta.Indexer(), namespace, index, value)
		if err != nil {
			return nil, err
		}
		return c.ref.fullAll(ctx, metas)
	}
	return byIndex(c.inf.Indexer(), namespace, index, value)
}

// byIndex reads index of store, keeping namespace's objects.
func byIndex[T client.Object](store IndexReader[T], namespace, index, value string) ([]T, error) {
	objs, err := store.ByIndex(index, value)
	if err != nil || namespace == "" {
		return objs, err
	}
	kept := objs[:0:0]
	for _, o := range objs {
		if o.GetNamespace() == namespace {
			kept = append(kept, o)
		}
	}
	return kept, nil
}

// groupResource names the resource in NotFound errors.
func (c *CachedClient[T]) groupResource(ctx context.Context) schema.GroupResource {
	res, err := c.live.Resource(ctx)
	if err != nil {
		return schema.GroupResource{}
	}
	return res.Resource.GroupResource()
}

// get reads the named object from the cache, after waiting for the cache
// to hold this client's last write of it, if any. ok is false when the
// cache does not have the object.
func (c *CachedClient[T]) get(ctx context.Context, namespace, name string) (obj T, ok bool, err error) {
	k := key(namespace, name)
	wctx, cancel := context.WithTimeout(ctx, c.wait)
	defer cancel()
	start := time.Now()
	for {
		c.mu.Lock()
		w, wrote := c.written[k]
		changed := c.changed
		c.mu.Unlock()
		cached, ok := c.cached(namespace, name)
		if !wrote || fresh(w, cached, ok) {
			if !ok {
				return obj, false, nil
			}
			if c.ref != nil {
				return c.ref.full(ctx, cached.(*metav1.PartialObjectMetadata))
			}
			return cached.(T), true, nil
		}
		select {
		case <-changed:
		case <-wctx.Done():
			rv := ""
			if !w.deleted {
				rv = strconv.FormatUint(w.rv, 10)
			}
			return obj, false, &StaleCacheError{Key: k, ResourceVersion: rv, Waited: time.Since(start)}
		}
	}
}

// cached returns what the cache holds of namespace/name: the object, or,
// for a referenced-only client, its metadata.
func (c *CachedClient[T]) cached(namespace, name string) (client.Object, bool) {
	if c.ref != nil {
		m, ok := getIn[*metav1.PartialObjectMetadata](c.ref.meta.store, namespace, name)
		return m, ok
	}
	o, ok := getIn[T](c.inf.store, namespace, name)
	return o, ok
}

// AddIndexer adds an index to the client's informer (see
// Informer.AddIndexer), for reads by index through Informer().Indexer().
func (c *CachedClient[T]) AddIndexer(name string, fn IndexFunc[T]) error {
	if c.err != nil {
		return c.err
	}
	if c.ref != nil {
		return fmt.Errorf("cache: AddIndexer %q: index functions of a referenced-only client see metadata only: use AddObjectIndexer: %w", name, ErrReferencedOnly)
	}
	return c.inf.AddIndexer(name, fn)
}

// Informer returns the informer the client reads from (nil for a client
// made by FailedCachedClient, and for a referenced-only client, whose
// informer holds metadata: see [CachedClient.Metadata]).
func (c *CachedClient[T]) Informer() *Informer[T] { return c.inf }

// Metadata returns the metadata-only informer a referenced-only client
// reads from (nil for other clients).
func (c *CachedClient[T]) Metadata() *Informer[*metav1.PartialObjectMetadata] {
	if c.ref == nil {
		return nil
	}
	return c.ref.meta
}

// AddObjectHandler adds a handler to the client's informer (see
// Informer.AddObjectHandler), so that a controller can watch what the
// client reads: controller.Owns and Watches take it. The handlers of a
// referenced-only client are given each object's metadata, a
// *metav1.PartialObjectMetadata; the client's Get returns the full object.
func (c *CachedClient[T]) AddObjectHandler(h Handler[client.Object], opts HandlerOptions) (Registration, error) {
	if c.err != nil {
		return nil, c.err
	}
	if c.ref != nil {
		return c.ref.meta.AddObjectHandler(h, opts)
	}
	return c.inf.AddObjectHandler(h, opts)
}

// AddObjectIndexer adds an index to the client's informer (see
// Informer.AddObjectIndexer).
func (c *CachedClient[T]) AddObjectIndexer(name string, fn IndexFunc[client.Object]) error {
	if c.err != nil {
		return c.err
	}
	if c.ref != nil {
		return c.ref.meta.AddObjectIndexer(name, fn)
	}
	return c.inf.AddObjectIndexer(name, fn)
}

// Resource returns the resource of the client's informer (see
// Informer.Resource).
func (c *CachedClient[T]) Resource(ctx context.Context) (client.Resource, error) {
	if c.err != nil {
		return client.Resource{}, c.err
	}
	return c.live.Resource(ctx)
}

var (
	_ client.ReadWriter[*metav1.PartialObjectMetadata]    = (*CachedClient[*metav1.PartialObjectMetadata])(nil)
	_ client.IndexedReader[*metav1.PartialObjectMetadata] = (*CachedClient[*metav1.PartialObjectMetadata])(nil)
	_ client.Applier[*metav1.PartialObjectMetadata]       = (*CachedClient[*metav1.PartialObjectMetadata])(nil)
)

// fresh reports whether the cached state includes the write w.
func fresh[T client.Object](w written, obj T, ok bool) bool {
	if w.deleted {
		return !ok
	}
	if !ok {
		// Not there yet. (If someone else deleted it since, the read waits
		// and then fails: the client cannot tell the two apart.)
		return false
	}
	rv, err := strconv.ParseUint(obj.GetResourceVersion(), 10, 64)
	return err == nil && rv >= w.rv
}
