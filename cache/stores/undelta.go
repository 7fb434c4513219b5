package stores

import (
	"sync"

	"github.com/loom-k8s/loom/cache"
)

// UndeltaStoreOptions configures [NewUndeltaStore]. The zero value is
// valid for API object types, though a store without Push is a plain
// store.
type UndeltaStoreOptions[T any] struct {
	// KeyFunc files objects. Default nil: [cache.MetaNamespaceKey] when T
	// satisfies [cache.Object]; for any other T every write fails with
	// [cache.ErrNoKeyFunc].
	KeyFunc cache.KeyFunc[T]
	// Push receives the whole contents, in no particular order, after
	// every successful write. It is called synchronously by the writing
	// goroutine, one call at a time, in the order of the writes; it owns
	// the slice, must not mutate the objects, and must not write to the
	// store. Default nil: nothing is pushed.
	Push func(all []T)
}

// UndeltaStore is a store that turns changes back into states: after
// each write it pushes its whole contents to a function. Use it to feed
// code that wants "the current set" rather than events, such as a
// configuration source that is rebuilt from scratch on every change (as
// the kubelet does with the pods bound to its node). Each push costs time
// and memory proportional to the store, so it suits small collections.
// Loom's informers do not use it; it is offered for users.
//
// UndeltaStore is safe for concurrent use. The zero value is not usable;
// call [NewUndeltaStore].
type UndeltaStore[T any] struct {
	mu    sync.Mutex // serializes writes with their pushes
	store *cache.Store[T]
	push  func([]T)
}

var _ cache.ReadWriter[int] = (*UndeltaStore[int])(nil)

// NewUndeltaStore returns an empty UndeltaStore configured by opts.
func NewUndeltaStore[T any](opts UndeltaStoreOptions[T]) *UndeltaStore[T] {
	// No label index: UndeltaStore offers no selector queries.
	noLabels := func(T) map[string]string { return nil }
	return &UndeltaStore[T]{
		store: cache.NewStore(cache.StoreOptions[T]{KeyFunc: opts.KeyFunc, Labels: noLabels}),
		push:  opts.Push,
	}
}

func (u *UndeltaStore[T]) then(err error) error {
	if err == nil && u.push != nil {
		u.push(u.store.List())
	}
	return err
}

// Add stores obj, then pushes. It fails, pushing nothing, with a
// [*cache.KeyError].
func (u *UndeltaStore[T]) Add(obj T) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.then(u.store.Add(obj))
}

// Update stores obj, then pushes. It fails as Add does.
func (u *UndeltaStore[T]) Update(obj T) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.then(u.store.Update(obj))
}

// Delete removes the object with obj's key, then pushes (even if there
// was none). It fails as Add does.
func (u *UndeltaStore[T]) Delete(obj T) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.then(u.store.Delete(obj))
}

// Replace makes the store hold exactly objs, then pushes. It fails as
// Add does.
func (u *UndeltaStore[T]) Replace(objs []T) error {
	u.mu.Lock()
	defer u.mu.Unlock()
	return u.then(u.store.Replace(objs))
}

// Get returns the object stored under key, and whether there is one.
func (u *UndeltaStore[T]) Get(key string) (T, bool) { return u.store.Get(key) }

// List returns every object, in no particular order.
func (u *UndeltaStore[T]) List() []T { return u.store.List() }

// ListKeys returns every key, in no particular order.
func (u *UndeltaStore[T]) ListKeys() []string { return u.store.ListKeys() }

// Len returns the number of objects.
func (u *UndeltaStore[T]) Len() int { return u.store.Len() }
