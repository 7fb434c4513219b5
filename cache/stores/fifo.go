package stores

import (
	"context"
	"slices"
	"sync"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/internal/waitlist"
)

// FIFOOptions configures [NewFIFO]. The zero value is valid for API
// object types.
type FIFOOptions[T any] struct {
	// KeyFunc files objects. Default nil: [cache.MetaNamespaceKey] when T
	// satisfies [cache.Object]; for any other T every write fails with
	// [cache.ErrNoKeyFunc].
	KeyFunc cache.KeyFunc[T]
}

// FIFO is a queue of objects, one entry per key, that keeps only the
// newest object of each key: Add or Update of a queued key replaces its
// object and keeps its place; Delete takes the key out of the queue;
// Replace makes the queue hold exactly the given objects in their order.
// Pop hands out the oldest. While queued, objects can be read through the
// [cache.Reader] methods.
//
// Use it when only the latest state of each object matters and changes
// in between can be dropped; use [cache.DeltaFIFO] when every change must be
// seen. Loom's informers use DeltaFIFO; FIFO is offered for users.
//
// FIFO is safe for concurrent use. The zero value is not usable; call
// [NewFIFO].
type FIFO[T any] struct {
	keyFunc cache.KeyFunc[T]

	mu      sync.Mutex
	items   map[string]T
	queue   []string // keys of items, oldest first
	waiting waitlist.List
	closed  bool
	done    chan struct{}
}

var _ cache.ReadWriter[int] = (*FIFO[int])(nil)

// NewFIFO returns an empty FIFO configured by opts.
func NewFIFO[T any](opts FIFOOptions[T]) *FIFO[T] {
	return &FIFO[T]{
		keyFunc: defaultKeyFunc(opts.KeyFunc),
		items:   map[string]T{},
		waiting: waitlist.New(),
		done:    make(chan struct{}),
	}
}

// Add queues obj, or replaces the queued object with its key. It fails
// with a [*cache.KeyError], or [cache.ErrClosed] after Close.
func (q *FIFO[T]) Add(obj T) error {
	key, err := keyOf(q.keyFunc, obj)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return cache.ErrClosed
	}
	q.put(key, obj)
	return nil
}

func (q *FIFO[T]) put(key string, obj T) {
	if _, ok := q.items[key]; !ok {
		q.queue = append(q.queue, key)
		q.waiting.Notify()
	}
	q.items[key] = obj
}

// Update is Add.
func (q *FIFO[T]) Update(obj T) error { return q.Add(obj) }

// Delete takes obj's key out of the queue, if queued. It costs time
// proportional to the queue's length. It fails as Add does.
func (q *FIFO[T]) Delete(obj T) error {
	key, err := keyOf(q.keyFunc, obj)
	if err != nil {
		return err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return cache.ErrClosed
	}
	if _, ok := q.items[key]; ok {
		delete(q.items, key)
		q.queue = slices.DeleteFunc(q.queue, func(k string) bool { return k == key })
	}
	return nil
}

// Replace makes the queue hold exactly objs, in their order (a key given
// twice keeps its first place and its last object). It fails, changing
// nothing, as Add does.
func (q *FIFO[T]) Replace(objs []T) error {
	keys := make([]string, len(objs))
	for i, obj := range objs {
		key, err := keyOf(q.keyFunc, obj)
		if err != nil {
			return err
		}
		keys[i] = key
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.closed {
		return cache.ErrClosed
	}
	q.items = make(map[string]T, len(objs))
	q.queue = make([]string, 0, len(objs))
	for i, obj := range objs {
		q.put(keys[i], obj)
	}
	return nil
}

// Pop waits for the oldest queued object, removes it and returns it. It
// fails with ctx.Err() if ctx is done first (an already done ctx pops
// nothing), and with [cache.ErrClosed] once the queue is closed and empty.
func (q *FIFO[T]) Pop(ctx context.Context) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	q.mu.Lock()
	defer q.mu.Unlock()
	for len(q.queue) == 0 {
		if q.closed {
			return zero, cache.ErrClosed
		}
		if err := q.waiting.Wait(ctx, &q.mu, q.done); err != nil {
			return zero, err
		}
	}
	key := q.queue[0]
	q.queue[0] = ""
	q.queue = q.queue[1:]
	if len(q.queue) > 0 {
		q.waiting.Notify()
	}
	obj := q.items[key]
	delete(q.items, key)
	return obj, nil
}

// Close makes further writes fail with [cache.ErrClosed] and wakes every
// waiting Pop; Pop hands out what is still queued, then returns
// ErrClosed. Close is idempotent.
func (q *FIFO[T]) Close() {
	q.mu.Lock()
	defer q.mu.Unlock()
	if !q.closed {
		q.closed = true
		close(q.done)
	}
}

// Get returns the queued object with key, and whether there is one.
func (q *FIFO[T]) Get(key string) (T, bool) {
	q.mu.Lock()
	defer q.mu.Unlock()
	obj, ok := q.items[key]
	return obj, ok
}

// List returns the queued objects, oldest first.
func (q *FIFO[T]) List() []T {
	q.mu.Lock()
	defer q.mu.Unlock()
	out := make([]T, 0, len(q.queue))
	for _, key := range q.queue {
		out = append(out, q.items[key])
	}
	return out
}

// ListKeys returns the queued keys, oldest first.
func (q *FIFO[T]) ListKeys() []string {
	q.mu.Lock()
	defer q.mu.Unlock()
	return slices.Clone(q.queue)
}

// Len returns the number of queued objects.
func (q *FIFO[T]) Len() int {
	q.mu.Lock()
	defer q.mu.Unlock()
	return len(q.queue)
}
