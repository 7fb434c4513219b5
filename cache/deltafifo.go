package cache

import (
	"context"
	"slices"
	"strings"
	"sync"

	"github.com/loom-k8s/loom/internal/waitlist"
)

// DeltaFIFOOptions configures [NewDeltaFIFO]. The zero value is valid for
// API object types.
type DeltaFIFOOptions[T any] struct {
	// KeyFunc files objects. Default nil: [MetaNamespaceKey] when T
	// satisfies [Object]; for any other T every write fails with
	// [ErrNoKeyFunc].
	KeyFunc KeyFunc[T]
	// KnownObjects is the store the consumer keeps up to date from the
	// deltas it pops: an informer's [Store]. Replace uses it to find the
	// objects that vanished, Resync to re-deliver every object, and
	// Delete to ignore deletions of objects the consumer never had.
	// Default nil: Replace tombstones only keys still queued, Resync does
	// nothing, and every Delete is queued.
	KnownObjects Reader[T]
}

// DeltaFIFO is the queue between a reflector and an informer. Writers
// (the reflector) record what happened to each object as [Delta] values;
// the consumer (the informer) pops all of one key's deltas at once, in
// the order keys first got a delta since they were last popped.
//
// The rules:
//
//   - Add, Update and Delete append Added, Updated and Deleted deltas to
//     the object's key. A key is queued once, however many deltas it has;
//     its place is where its first pending delta put it.
//   - Two consecutive Deleted deltas collapse into one: the later one,
//     unless it is a tombstone and the earlier one is not.
//   - Delete of an object that is neither queued nor in KnownObjects is
//     ignored when KnownObjects is set (the consumer never had it).
//   - Replace appends a Replaced delta for each listed object, then a
//     tombstone (a Deleted delta with FinalStateUnknown set) for each key
//     that is queued or known but not listed, unless its newest delta is
//     already a Deleted. The tombstone carries the newest queued object,
//     else the known one. Tombstones are queued in key order.
//   - Resync appends a Sync delta, with the known object, for each key of
//     KnownObjects that has no pending delta.
//   - Pop hands out the oldest key with all its deltas, then forgets them.
//
// DeltaFIFO is safe for concurrent use. Pop calls process with the queue
// locked, so that KnownObjects is updated before any other write is
// queued; process must therefore not call the DeltaFIFO.
//
// The zero value is not usable; call [NewDeltaFIFO].
type DeltaFIFO[T any] struct {
	keyFunc KeyFunc[T]
	known   Reader[T]

	mu      sync.Mutex
	items   map[string][]Delta[T] // pending deltas per key; never empty
	queue   []string              // keys of items, oldest first
	peak    int                   // most keys in items since it was last made
	waiting waitlist.List         // Pops waiting for an item
	closed  bool
	done    chan struct{} // closed by Close

	replaced bool // the first Replace has happened
	initial  int  // pops left until the first Replace's keys are all popped

	// A Replace taken in pieces (beginReplace to endReplace) is
	// replacing. listed holds the keys it has queued, to tombstone the
	// others at its end; it stays nil when the Replace began with nothing
	// queued or known (fresh), because then every key there is at its end
	// was listed.
	replacing bool
	listed    map[string]struct{}

	marks []fifoMark // see popped
}

// fifoMark is closed once left more keys have been popped and processed.
type fifoMark struct {
	left int
	ch   chan struct{}
}

// NewDeltaFIFO returns an empty DeltaFIFO configured by opts.
func NewDeltaFIFO[T any](opts DeltaFIFOOptions[T]) *DeltaFIFO[T] {
	return &DeltaFIFO[T]{
		keyFunc: defaultKeyFunc(opts.KeyFunc),
		known:   opts.KnownObjects,
		items:   map[string][]Delta[T]{},
		waiting: waitlist.New(),
		done:    make(chan struct{}),
	}
}

// Add queues an Added delta for obj. It fails with a [*KeyError], or
// [ErrClosed] after Close.
func (f *DeltaFIFO[T]) Add(obj T) error { return f.write(Added, obj) }

// Update queues an Updated delta for obj. It fails as Add does.
func (f *DeltaFIFO[T]) Update(obj T) error { return f.write(Updated, obj) }

// Delete queues a Deleted delta for obj, which should be the object's
// final state. It fails as Add does.
func (f *DeltaFIFO[T]) Delete(obj T) error { return f.write(Deleted, obj) }

func (f *DeltaFIFO[T]) write(t DeltaType, obj T) error {
	key, err := keyOf(f.keyFunc, obj)
	if err != nil {
		return err
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if f.replacing && f.listed == nil {
		f.trackListed()
	}
	if t == Deleted && f.known != nil && len(f.items[key]) == 0 {
		if _, ok := f.known.Get(key); !ok {
			return nil // the consumer never had it, nor will
		}
	}
	f.queueDelta(key, Delta[T]{Type: t, Object: obj})
	return nil
}

// queueDelta appends d to key's deltas, collapsing consecutive deletes.
// The caller holds mu.
func (f *DeltaFIFO[T]) queueDelta(key string, d Delta[T]) {
	deltas := f.items[key]
	if n := len(deltas); n > 0 {
		if d.Type == Deleted && deltas[n-1].Type == Deleted {
			if !d.FinalStateUnknown || deltas[n-1].FinalStateUnknown {
				deltas[n-1] = d
			}
			return
		}
		f.items[key] = append(deltas, d)
		return
	}
	f.items[key] = []Delta[T]{d}
	f.queue = append(f.queue, key)
	f.peak = max(f.peak, len(f.items))
	f.waiting.Notify()
}

// fifoReleaseAbove is the number of keys above which a DeltaFIFO that
// empties makes its map anew: a Go map never gives back room, and an
// informer that took a burst (its first list, or every object of a shard
// that another replica took over) would hold a map of the burst's size
// for as long as it runs. Below it, the map is kept so that steady state
// does not allocate.
const fifoReleaseAbove = 256

// releaseIfIdle makes the map anew when the queue is empty after a burst
// (see fifoReleaseAbove). A Replace in pieces is one burst: its pages
// empty the queue in turn, and a map made anew for each would only be
// grown again by the next page. The caller holds mu.
func (f *DeltaFIFO[T]) releaseIfIdle() {
	if len(f.queue) == 0 && f.peak > fifoReleaseAbove && !f.replacing {
		f.items, f.queue, f.peak = map[string][]Delta[T]{}, nil, 0
	}
}

// Replace records a full list: a Replaced delta per object in objs, and a
// tombstone for each key queued or known that objs lacks (see
// [DeltaFIFO]). The first Replace also fixes what [DeltaFIFO.HasSynced]
// waits for. It fails, queuing nothing, with a [*KeyError], or with
// [ErrClosed] after Close.
func (f *DeltaFIFO[T]) Replace(objs []T) error {
	keys := make([]string, len(objs))
	listed := make(map[string]struct{}, len(objs))
	for i, obj := range objs {
		key, err := keyOf(f.keyFunc, obj)
		if err != nil {
			return err
		}
		keys[i] = key
		listed[key] = struct{}{}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	for i, obj := range objs {
		f.queueDelta(keys[i], Delta[T]{Type: Replaced, Object: obj})
	}
	f.tombstoneLocked(listed)
	if !f.replaced {
		f.replaced = true
		f.initial = len(f.queue)
	}
	return nil
}

// beginReplace starts a Replace whose objects come in pieces
// (replaceItems) as a list's pages or a streaming list's events arrive,
// so that old versions die as their keys are replaced instead of the
// whole list waiting beside the cache. endReplace then queues the
// tombstones. A beginReplace forgets an unfinished one: the objects it
// queued stay queued, and the next endReplace tombstones what its own
// list lacks. It reports whether the Replace is fresh: nothing was
// queued or known, so no object of the list can replace another.
func (f *DeltaFIFO[T]) beginReplace() (fresh bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	f.replacing = true
	f.listed = nil
	if len(f.items) > 0 || !knownEmpty(f.known) {
		f.listed = map[string]struct{}{}
	}
	return f.listed == nil
}

// trackListed starts to track the keys of a fresh Replace in progress,
// because another write came: every key queued or known so far came from
// the Replace. The caller holds mu.
func (f *DeltaFIFO[T]) trackListed() {
	f.listed = make(map[string]struct{}, len(f.items))
	for key := range f.items {
		f.listed[key] = struct{}{}
	}
	if f.known != nil {
		for _, key := range f.known.ListKeys() {
			f.listed[key] = struct{}{}
		}
	}
}

// knownEmpty reports whether known is nil or, when it can tell its
// length (a [Store] can), holds nothing.
func knownEmpty[T any](known Reader[T]) bool {
	if known == nil {
		return true
	}
	l, ok := known.(interface{ Len() int })
	return ok && l.Len() == 0
}

// replaceItems queues a Replaced delta for each of objs, part of the
// Replace that beginReplace started. It fails as Replace does.
func (f *DeltaFIFO[T]) replaceItems(objs []T) error {
	keys := make([]string, len(objs))
	for i, obj := range objs {
		key, err := keyOf(f.keyFunc, obj)
		if err != nil {
			return err
		}
		keys[i] = key
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if !f.replacing {
		panic("cache: replaceItems without beginReplace")
	}
	for i, obj := range objs {
		if f.listed != nil {
			f.listed[keys[i]] = struct{}{}
		}
		f.queueDelta(keys[i], Delta[T]{Type: Replaced, Object: obj})
	}
	return nil
}

// endReplace ends the Replace that beginReplace started: a tombstone for
// each key queued or known that it did not list, as Replace queues them.
// The first Replace to end also fixes what HasSynced waits for.
func (f *DeltaFIFO[T]) endReplace() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if f.listed != nil {
		f.tombstoneLocked(f.listed)
	}
	f.replacing, f.listed = false, nil
	f.releaseIfIdle()
	if !f.replaced {
		f.replaced = true
		f.initial = len(f.queue)
	}
	return nil
}

// tombstoneLocked queues a tombstone for each key queued or known that
// listed lacks, unless its newest delta is a Deleted, in key order. The
// caller holds mu.
func (f *DeltaFIFO[T]) tombstoneLocked(listed map[string]struct{}) {
	f.tombstoneIfLocked(func(key string, _ T) bool {
		_, ok := listed[key]
		return !ok
	})
}

// tombstoneIfLocked queues a tombstone, carrying the newest queued object,
// else the known one, for each key queued or known for which gone holds,
// unless its newest delta is a Deleted, in key order. The caller holds mu.
func (f *DeltaFIFO[T]) tombstoneIfLocked(gone func(key string, newest T) bool) {
	type tomb struct {
		key string
		obj T
	}
	var tombs []tomb
	for key, deltas := range f.items {
		if d := deltas[len(deltas)-1]; d.Type != Deleted && gone(key, d.Object) {
			tombs = append(tombs, tomb{key, d.Object})
		}
	}
	if f.known != nil {
		for _, key := range f.known.ListKeys() {
			if len(f.items[key]) > 0 {
				continue
			}
			if obj, ok := f.known.Get(key); ok && gone(key, obj) {
				tombs = append(tombs, tomb{key, obj})
			}
		}
	}
	slices.SortFunc(tombs, func(a, b tomb) int { return strings.Compare(a.key, b.key) })
	for _, t := range tombs {
		f.queueDelta(t.key, Delta[T]{Type: Deleted, Object: t.obj, FinalStateUnknown: true})
	}
}

// prune queues a tombstone for each key queued or known whose newest
// object keep rejects (see tombstoneIfLocked): what Replace would do with
// a list that lacks them, without a list. It is how an informer whose
// selector narrowed lets the objects go that no longer match. It fails
// with [ErrClosed] after Close.
func (f *DeltaFIFO[T]) prune(keep func(T) bool) error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	f.tombstoneIfLocked(func(_ string, newest T) bool { return !keep(newest) })
	return nil
}

// Resync queues a Sync delta, carrying the known object, for every key of
// KnownObjects that has no pending delta, in the order KnownObjects lists
// them. It does nothing without KnownObjects. It fails with [ErrClosed]
// after Close.
func (f *DeltaFIFO[T]) Resync() error {
	f.mu.Lock()
	defer f.mu.Unlock()
	if f.closed {
		return ErrClosed
	}
	if f.known == nil {
		return nil
	}
	for _, key := range f.known.ListKeys() {
		if len(f.items[key]) > 0 {
			continue
		}
		if obj, ok := f.known.Get(key); ok {
			f.queueDelta(key, Delta[T]{Type: Sync, Object: obj})
		}
	}
	return nil
}

// Pop waits for the oldest queued key and calls process with it and all
// its deltas, oldest first; the deltas slice then belongs to process. It
// returns:
//
//   - nil once process has returned nil;
//   - a [*ProcessError] wrapping what process returned otherwise. The
//     deltas are consumed all the same: DeltaFIFO never re-delivers.
//     Unlike client-go's ErrRequeue there is no way back into the queue,
//     because a redelivered batch would be reordered behind newer
//     deltas of other keys and would confuse HasSynced; a consumer that
//     can fail retries itself, or relies on the next resync or relist;
//   - ctx.Err() if ctx is done before an item is available (an already
//     done ctx pops nothing);
//   - [ErrClosed] once the queue is closed and empty. Items queued before
//     Close are still handed out.
//
// process runs with the queue locked (see [DeltaFIFO]); it must not call
// the DeltaFIFO. Concurrent Pops are allowed and run process one at a
// time.
func (f *DeltaFIFO[T]) Pop(ctx context.Context, process func(key string, deltas []Delta[T]) error) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	f.mu.Lock()
	for len(f.queue) == 0 {
		if f.closed {
			f.mu.Unlock()
			return ErrClosed
		}
		if err := f.waiting.Wait(ctx, &f.mu, f.done); err != nil {
			f.mu.Unlock()
			return err
		}
	}
	defer f.mu.Unlock()
	key := f.queue[0]
	f.queue[0] = ""
	f.queue = f.queue[1:]
	if len(f.queue) > 0 {
		f.waiting.Notify()
	}
	deltas := f.items[key]
	delete(f.items, key)
	f.releaseIfIdle()
	if f.initial > 0 {
		f.initial--
	}
	err := process(key, deltas)
	f.countMarksLocked()
	if err != nil {
		return &ProcessError{Key: key, Err: err}
	}
	return nil
}

// popped returns a channel that is closed once every key queued now has
// been popped and processed: a key queued again later keeps its place, so
// that is once as many keys as are queued now have been.
func (f *DeltaFIFO[T]) popped() <-chan struct{} {
	ch := make(chan struct{})
	f.mu.Lock()
	defer f.mu.Unlock()
	if len(f.queue) == 0 {
		close(ch)
		return ch
	}
	f.marks = append(f.marks, fifoMark{left: len(f.queue), ch: ch})
	return ch
}

// countMarksLocked counts a pop against the marks. The caller holds mu.
func (f *DeltaFIFO[T]) countMarksLocked() {
	kept := f.marks[:0]
	for _, m := range f.marks {
		if m.left--; m.left == 0 {
			close(m.ch)
			continue
		}
		kept = append(kept, m)
	}
	clear(f.marks[len(kept):])
	f.marks = kept
}

// HasSynced reports whether the first Replace has happened and every key
// it left queued (listed objects, tombstones, and keys queued before it)
// has been popped and processed. Writes before the first Replace do not
// make a DeltaFIFO synced. An informer's HasSynced builds on this.
func (f *DeltaFIFO[T]) HasSynced() bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.replaced && f.initial == 0
}

// Close makes further writes fail with [ErrClosed] and wakes every
// waiting Pop; Pop hands out what is still queued, then returns
// ErrClosed. Close is idempotent.
func (f *DeltaFIFO[T]) Close() {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.closed {
		f.closed = true
		close(f.done)
	}
}

// Len returns the number of queued keys.
func (f *DeltaFIFO[T]) Len() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.queue)
}

// ListKeys returns the queued keys, oldest first.
func (f *DeltaFIFO[T]) ListKeys() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.queue)
}

// List returns the newest object of each queued key, oldest key first.
// The objects are shared: do not mutate them.
func (f *DeltaFIFO[T]) List() []T {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make([]T, 0, len(f.queue))
	for _, key := range f.queue {
		d := f.items[key]
		out = append(out, d[len(d)-1].Object)
	}
	return out
}

// Deltas returns a copy of the deltas pending for key, oldest first, and
// whether there are any.
func (f *DeltaFIFO[T]) Deltas(key string) ([]Delta[T], bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	d, ok := f.items[key]
	return slices.Clone(d), ok
}
