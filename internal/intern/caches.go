package intern

import (
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
)

// caches holds, by resource, how to read the objects of the caches whose
// objects share parts through a table, so that a write of any object can
// look at the cached object of the same name (see CachedChanged).
type caches struct {
	n  atomic.Int32 // caches added and not removed: 0 makes CachedChanged free
	mu sync.RWMutex
	// by maps a resource to its caches. A slice is never changed once
	// stored: readers use it without the lock.
	by map[string][]*cache
}

type cache struct {
	get func(namespace, name string) (any, bool)
}

// AddCache tells t of a cache of resource (such as "configmaps" or
// "widgets.example.com") whose objects share parts through t: get reads
// the cached object namespace/name ("" for a cluster-scoped one). remove
// forgets it; call it when the cache stops.
func (t *Table) AddCache(resource string, get func(namespace, name string) (any, bool)) (remove func()) {
	c := &cache{get: get}
	cs := &t.caches
	cs.mu.Lock()
	if cs.by == nil {
		cs.by = map[string][]*cache{}
	}
	cs.by[resource] = append(slices.Clip(cs.by[resource]), c)
	cs.mu.Unlock()
	cs.n.Add(1)
	return sync.OnceFunc(func() {
		cs.mu.Lock()
		rest := slices.DeleteFunc(slices.Clone(cs.by[resource]), func(x *cache) bool { return x == c })
		if len(rest) == 0 {
			delete(cs.by, resource)
		} else {
			cs.by[resource] = rest
		}
		cs.mu.Unlock()
		cs.n.Add(-1)
	})
}

// HasCaches reports whether any cache was added (see AddCache) and not
// removed: without one, CachedChanged reports nothing.
func (t *Table) HasCaches() bool { return t.caches.n.Load() > 0 }

// CachedChanged reports whether a cache of resource (see AddCache) holds
// an object namespace/name with a part changed in place since t gave it
// out, that written, the object about to be written under that name,
// holds too, and where (see ChangedIn). A copy of such an object, made
// after the change, carries the change in parts of its own, where
// Changed cannot see it; a write of the copy can look here.
func (t *Table) CachedChanged(resource, namespace, name string, written reflect.Value) (path string, changed bool) {
	cs := &t.caches
	if cs.n.Load() == 0 {
		return "", false
	}
	cs.mu.RLock()
	list := cs.by[resource]
	cs.mu.RUnlock()
	for _, c := range list {
		if obj, ok := c.get(namespace, name); ok {
			if path, changed := t.ChangedIn(reflect.ValueOf(obj), written); changed {
				return path, true
			}
		}
	}
	return "", false
}
