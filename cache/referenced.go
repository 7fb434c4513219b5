package cache

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
)

// ErrReferencedOnly is returned (wrapped) for what a referenced-only cache
// cannot do: index full objects, or be asked for as a plain informer.
var ErrReferencedOnly = errors.New("a referenced-only cache holds metadata, and full objects only for those read")

// defaultEvictAfter is CachedClientOptions.EvictAfter's default.
const defaultEvictAfter = 10 * time.Minute

// NewReferencedClient returns a referenced-only CachedClient: meta, a
// metadata-only informer of live's resource, keeps every object's
// metadata, and the client holds the full object only for the objects
// it has been asked to read. The first read of an object fetches it from
// the server with a GET; later reads return the held object for as long
// as its resourceVersion is the one the metadata cache has. When the
// watch reports a change (a new resourceVersion) or a delete, the held
// object is let go, and the next read fetches it again. An object no read
// has asked for in opts.EvictAfter is let go too.
//
// A read never returns an object older than the metadata the cache has
// seen: a held object must carry the cached resourceVersion or a newer
// one, and a fetched one is checked against it too. Reads of this
// client's own writes wait as [CachedClient]'s do. Handlers and indexes
// see metadata; List and ByIndex select on metadata and return full
// objects, fetching those not held (so list narrowly). With a manager,
// set [InformerForOptions].ReferencedOnly instead (see [CachedClientFor]).
func NewReferencedClient[T client.Object](live *client.Client[T], meta *Informer[*metav1.PartialObjectMetadata], opts CachedClientOptions) (*CachedClient[T], error) {
	c := newCachedClient(live, opts)
	r := &referenced[T]{meta: meta, live: live, evictAfter: opts.EvictAfter, held: map[string]*heldObject[T]{}, fetching: map[string]*fetch[T]{}}
	if r.evictAfter <= 0 {
		r.evictAfter = defaultEvictAfter
	}
	c.ref = r
	// This handler lets go of a held object that a change made stale. It
	// runs inline, so usually before a user's handler told of the same
	// change reads it; reads check the resourceVersion in any case.
	if _, err := meta.AddHandler(HandlerFuncs[*metav1.PartialObjectMetadata]{
		Add:    func(o *metav1.PartialObjectMetadata, _ bool) { r.changed(o, true); c.observe(o, true) },
		Update: func(_, o *metav1.PartialObjectMetadata) { r.changed(o, true); c.observe(o, true) },
		Delete: func(o *metav1.PartialObjectMetadata, _ bool) { r.changed(o, false); c.observe(o, false) },
	}, HandlerOptions{ResyncPeriod: -1, Inline: true}); err != nil {
		return nil, err
	}
	return c, nil
}

// referenced holds the full objects a referenced-only client has read.
type referenced[T client.Object] struct {
	meta       *Informer[*metav1.PartialObjectMetadata]
	live       *client.Client[T]
	evictAfter time.Duration

	fetches atomic.Uint64 // GETs sent

	mu        sync.Mutex
	held      map[string]*heldObject[T]
	fetching  map[string]*fetch[T] // GETs in flight, by key
	lastSweep time.Time
}

// heldObject is a full object and when a read last asked for it.
type heldObject[T client.Object] struct {
	obj  T
	read time.Time
}

// fetch is one GET in flight, which every read of its key waits for.
type fetch[T client.Object] struct {
	done chan struct{}
	obj  T
	err  error
}

// holds returns the full object held for namespace/name, if any.
func (r *referenced[T]) holds(namespace, name string) (T, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	h, ok := r.held[key(namespace, name)]
	if !ok {
		var zero T
		return zero, false
	}
	return h.obj, true
}

// Held returns how many full objects a referenced-only client holds (0
// for other clients).
func (c *CachedClient[T]) Held() int {
	if c.ref == nil {
		return 0
	}
	c.ref.mu.Lock()
	defer c.ref.mu.Unlock()
	return len(c.ref.held)
}

// Fetches returns how many GETs a referenced-only client has sent to
// fetch objects for reads (0 for other clients).
func (c *CachedClient[T]) Fetches() uint64 {
	if c.ref == nil {
		return 0
	}
	return c.ref.fetches.Load()
}

// changed is told of every metadata change: a held object older than m
// is let go, as is one whose object was deleted.
func (r *referenced[T]) changed(m *metav1.PartialObjectMetadata, present bool) {
	k := key(m.GetNamespace(), m.GetName())
	r.mu.Lock()
	defer r.mu.Unlock()
	if h, ok := r.held[k]; ok && (!present || !notOlder(h.obj.GetResourceVersion(), m.GetResourceVersion())) {
		delete(r.held, k)
	}
	r.sweep(time.Now())
}

// sweep lets go of the objects no read has asked for in evictAfter. It
// looks at most four times per evictAfter. r.mu must be held.
func (r *referenced[T]) sweep(now time.Time) {
	if now.Sub(r.lastSweep) < r.evictAfter/4 {
		return
	}
	r.lastSweep = now
	for k, h := range r.held {
		if now.Sub(h.read) >= r.evictAfter {
			delete(r.held, k)
		}
	}
	if len(r.held) == 0 {
		r.held = map[string]*heldObject[T]{} // give back a grown map's room
	}
}

// full returns the full object whose cached metadata is m: the held one
// if it is not older than m, otherwise one fetched from the server. ok is
// false when the server no longer has the object (the watch will report
// the delete).
func (r *referenced[T]) full(ctx context.Context, m *metav1.PartialObjectMetadata) (obj T, ok bool, err error) {
	namespace, name, want := m.GetNamespace(), m.GetName(), m.GetResourceVersion()
	k := key(namespace, name)
	for {
		r.mu.Lock()
		now := time.Now()
		r.sweep(now)
		if h, ok := r.held[k]; ok && notOlder(h.obj.GetResourceVersion(), want) {
			h.read = now
			r.mu.Unlock()
			return h.obj, true, nil
		}
		f, waiting := r.fetching[k]
		if !waiting {
			f = &fetch[T]{done: make(chan struct{})}
			r.fetching[k] = f
		}
		r.mu.Unlock()

		if !waiting {
			r.fetches.Add(1)
			f.obj, f.err = r.live.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
			// Not held if the metadata cache has seen a delete meanwhile.
			// (The store is read before r.mu is taken: the informer may
			// hold the store while its handlers take r.mu.)
			_, present := r.meta.store.Get(k)
			r.mu.Lock()
			delete(r.fetching, k)
			if f.err == nil && present {
				r.keep(k, f.obj)
			}
			r.mu.Unlock()
			close(f.done)
		} else {
			select {
			case <-f.done:
			case <-ctx.Done():
				return obj, false, ctx.Err()
			}
		}
		switch {
		case apierrors.IsNotFound(f.err):
			return obj, false, nil
		case f.err != nil && waiting && ctx.Err() == nil && (errors.Is(f.err, context.Canceled) || errors.Is(f.err, context.DeadlineExceeded)):
			continue // the fetch this read waited for was given up by its reader
		case f.err != nil:
			return obj, false, fmt.Errorf("cache: fetching %s: %w", k, f.err)
		case notOlder(f.obj.GetResourceVersion(), want):
			return f.obj, true, nil
		}
		// A fetch that began before the watch delivered m: fetch again.
	}
}

// keep holds obj, unless what is held is newer. r.mu must be held.
func (r *referenced[T]) keep(k string, obj T) {
	if h, ok := r.held[k]; ok && !notOlder(obj.GetResourceVersion(), h.obj.GetResourceVersion()) {
		h.read = time.Now()
		return
	}
	r.held[k] = &heldObject[T]{obj: obj, read: time.Now()}
}

// fullAll returns the full objects of metas, fetching those not held;
// objects the server no longer has are left out.
func (r *referenced[T]) fullAll(ctx context.Context, metas []*metav1.PartialObjectMetadata) ([]T, error) {
	out := make([]T, 0, len(metas))
	for _, m := range metas {
		obj, ok, err := r.full(ctx, m)
		if err != nil {
			return nil, err
		}
		if ok {
			out = append(out, obj)
		}
	}
	return out, nil
}

// notOlder reports whether resourceVersion have is want or newer. Both
// are compared as the integers kube-apiserver's etcd storage makes them;
// versions that are not integers are only equal or not.
func notOlder(have, want string) bool {
	h, err1 := strconv.ParseUint(have, 10, 64)
	w, err2 := strconv.ParseUint(want, 10, 64)
	if err1 != nil || err2 != nil {
		return have == want
	}
	return h >= w
}
