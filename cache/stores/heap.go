package stores

import (
	"container/heap"
	"context"
	"sync"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/internal/waitlist"
)

// HeapOptions configures [NewHeap]. The zero value is valid for API
// object types.
type HeapOptions[T any] struct {
	// KeyFunc files objects. Default nil: [cache.MetaNamespaceKey] when T
	// satisfies [cache.Object]; for any other T every write fails with
	// [cache.ErrNoKeyFunc].
	KeyFunc cache.KeyFunc[T]
	// Less orders the heap: Pop returns an object x for which no other
	// queued y has Less(y, x). It must be a strict weak order and must
	// not mutate its arguments. Default nil: by key.
	Less func(a, b T) bool
}

// Heap is a priority queue of objects, one per key: Pop hands out the
// least object by Less. Add or Update of a queued key replaces its object
// and moves it to its new place. Reads through the [cache.Reader] methods see
// the queued objects; List returns them in no particular order.
//
// Loom's workqueue keeps its own, simpler heap of delayed items; Heap is
// offered for users, for example to process objects by priority or
// deadline rather than arrival.
//
// Heap is safe for concurrent use. Add, Update, Delete and Pop take
// O(log n) time. The zero value is not usable; call [NewHeap].
type Heap[T any] struct {
	keyFunc cache.KeyFunc[T]

	mu      sync.Mutex
	h       heapData[T]
	waiting waitlist.List
	closed  bool
	done    chan struct{}
}

type heapEntry[T any] struct {
	key string
	obj T
}

// heapData implements container/heap.Interface.
type heapData[T any] struct {
	less    func(a, b T) bool
	entries []heapEntry[T]
	pos     map[string]int // key → index in entries
}

func (d *heapData[T]) Len() int { return len(d.entries) }
func (d *heapData[T]) Less(i, j int) bool {
	if d.less == nil {
		return d.entries[i].key < d.entries[j].key
	}
	return d.less(d.entries[i].obj, d.entries[j].obj)
}
func (d *heapData[T]) Swap(i, j int) {
	d.entries[i], d.entries[j] = d.entries[j], d.entries[i]
	d.pos[d.entries[i].key] = i
	d.pos[d.entries[j].key] = j
}
func (d *heapData[T]) Push(x any) {
	e := x.(heapEntry[T])
	d.pos[e.key] = len(d.entries)
	d.entries = append(d.entries, e)
}
func (d *heapData[T]) Pop() any {
	n := len(d.entries) - 1
	e := d.entries[n]
	d.entries[n] = heapEntry[T]{}
	d.entries = d.entries[:n]
	delete(d.pos, e.key)
	return e
}

var _ cache.ReadWriter[int] = (*Heap[int])(nil)

// NewHeap returns an empty Heap configured by opts.
func NewHeap[T any](opts HeapOptions[T]) *Heap[T] {
	h := &Heap[T]{
		keyFunc: defaultKeyFunc(opts.KeyFunc),
		waiting: waitlist.New(),
		done:    make(chan struct{}),
	}
	h.h.less = opts.Less
	h.h.pos = map[string]int{}
	return h
}

// Add queues obj, or replaces the queued object with its key and
// restores the heap order. It fails with a [*cache.KeyError], or [cache.ErrClosed]
// after Close.
func (h *Heap[T]) Add(obj T) error {
	key, err := keyOf(h.keyFunc, obj)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return cache.ErrClosed
	}
	if i, ok := h.h.pos[key]; ok {
		h.h.entries[i].obj = obj
		heap.Fix(&h.h, i)
		return nil
	}
	heap.Push(&h.h, heapEntry[T]{key: key, obj: obj})
	h.waiting.Notify()
	return nil
}

// Update is Add.
func (h *Heap[T]) Update(obj T) error { return h.Add(obj) }

// Delete removes the object with obj's key, if queued. It fails as Add
// does.
func (h *Heap[T]) Delete(obj T) error {
	key, err := keyOf(h.keyFunc, obj)
	if err != nil {
		return err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return cache.ErrClosed
	}
	if i, ok := h.h.pos[key]; ok {
		heap.Remove(&h.h, i)
	}
	return nil
}

// Replace makes the heap hold exactly objs (the last one wins when two
// share a key). It fails, changing nothing, as Add does.
func (h *Heap[T]) Replace(objs []T) error {
	entries := make([]heapEntry[T], 0, len(objs))
	pos := make(map[string]int, len(objs))
	for _, obj := range objs {
		key, err := keyOf(h.keyFunc, obj)
		if err != nil {
			return err
		}
		if i, ok := pos[key]; ok {
			entries[i].obj = obj
			continue
		}
		pos[key] = len(entries)
		entries = append(entries, heapEntry[T]{key: key, obj: obj})
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.closed {
		return cache.ErrClosed
	}
	h.h.entries, h.h.pos = entries, pos
	heap.Init(&h.h)
	if len(entries) > 0 {
		h.waiting.Notify()
	}
	return nil
}

// Pop waits for an object, removes the least one and returns it. It
// fails with ctx.Err() if ctx is done first (an already done ctx pops
// nothing), and with [cache.ErrClosed] once the heap is closed and empty.
func (h *Heap[T]) Pop(ctx context.Context) (T, error) {
	var zero T
	if err := ctx.Err(); err != nil {
		return zero, err
	}
	h.mu.Lock()
	defer h.mu.Unlock()
	for h.h.Len() == 0 {
		if h.closed {
			return zero, cache.ErrClosed
		}
		if err := h.waiting.Wait(ctx, &h.mu, h.done); err != nil {
			return zero, err
		}
	}
	obj := heap.Pop(&h.h).(heapEntry[T]).obj
	if h.h.Len() > 0 {
		h.waiting.Notify()
	}
	return obj, nil
}

// Peek returns the least object without removing it, and whether there
// is one.
func (h *Heap[T]) Peek() (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if h.h.Len() == 0 {
		var zero T
		return zero, false
	}
	return h.h.entries[0].obj, true
}

// Close makes further writes fail with [cache.ErrClosed] and wakes every
// waiting Pop; Pop hands out what is still queued, then returns
// ErrClosed. Close is idempotent.
func (h *Heap[T]) Close() {
	h.mu.Lock()
	defer h.mu.Unlock()
	if !h.closed {
		h.closed = true
		close(h.done)
	}
}

// Get returns the queued object with key, and whether there is one.
func (h *Heap[T]) Get(key string) (T, bool) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i, ok := h.h.pos[key]; ok {
		return h.h.entries[i].obj, true
	}
	var zero T
	return zero, false
}

// List returns the queued objects in no particular order.
func (h *Heap[T]) List() []T {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]T, len(h.h.entries))
	for i, e := range h.h.entries {
		out[i] = e.obj
	}
	return out
}

// ListKeys returns the queued keys in no particular order.
func (h *Heap[T]) ListKeys() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.h.entries))
	for i, e := range h.h.entries {
		out[i] = e.key
	}
	return out
}

// Len returns the number of queued objects.
func (h *Heap[T]) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.h.Len()
}
