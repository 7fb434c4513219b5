package workqueue

import (
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// Options configures a [Queue]. The zero value is valid: an unnamed
// queue without metrics, with [DefaultLimiter].
//
// There is no clock option: the queue and its limiters read the time and
// arm timers through the time package. To test code that depends on
// delays without waiting for them, run it in a testing/synctest bubble,
// where that time is fake (see the package documentation and the
// FakeTime example).
type Options[T comparable] struct {
	// Name identifies the queue to the metrics provider, which typically
	// uses it as a label. Default "": the provider decides what an empty
	// name means.
	Name string

	// Metrics receives the queue's metrics. Default nil: nothing is
	// recorded, and the queue reads no clock on Add, Get or Done.
	Metrics MetricsProvider

	// MetricsUpdatePeriod is how often the unfinished-work and
	// longest-running-processor gauges are recomputed while the queue
	// runs. It matters only when Metrics is set. Default 500ms.
	MetricsUpdatePeriod time.Duration

	// RateLimiter chooses the delay of AddRateLimited. Default nil:
	// [DefaultLimiter]. The queue does not share its limiter's state with
	// any other queue unless the caller passes the same one.
	RateLimiter RateLimiter[T]
}

// entry states.
const (
	stateReady      uint8 = iota // in the ready ring, not processing
	stateProcessing              // handed out by Get, no Add since
	stateDirty                   // processing, and Add was called since Get
	stateIdle                    // finished; kept in the idle list for reuse
	stateFree                    // in the free list, or released
)

// maxIdle is how many entries of finished items a queue keeps (least
// recently finished evicted first), so that re-adding a recently
// processed item, the common case of a controller, finds its entry
// instead of inserting into and later deleting from the map.
const maxIdle = 1024

// entry is the queue's record of an item that is ready or processing.
// An item with no entry is idle. Entries live in one slice (the slab) and
// are named by index, so that a large backlog is a few big objects without
// pointers between them rather than one heap object per item: the garbage
// collector scans it quickly and the ring of ready items holds no
// pointers at all.
type entry[T comparable] struct {
	item T
	// Nanoseconds since the metrics' epoch, set only when metrics are on:
	// when the entry became ready while it is ready, when Get handed it
	// out while it is processing (it is never both).
	at int64
	// prio is the priority of a ready entry, or of the next round of a
	// dirty one.
	prio int
	// next links the free list. prev and next link the idle list, and,
	// with metrics on, the list of processing entries, oldest first; an
	// entry is in at most one list. -1 ends a list.
	prev, next int32
	// seq is the position of the entry's last push in its level's ring
	// (see level): a reference in a ring whose position differs is stale.
	seq   uint32
	state uint8
}

// shrinkAbove is the slab capacity above which a queue that becomes
// empty releases its slab, ring and map, so that one burst does not pin
// its memory forever. Below it, buffers are kept so that steady state
// does not allocate. It is twice the idle entries kept: a queue needs
// more only while a burst is under way. (A controller that hands 3,000
// keys to other replicas, one per key, kept its peak-sized slab and map
// when this was 4,096.)
const shrinkAbove = 2 * maxIdle

// releaseAbove is the size above which the items waiting for a time
// (AddAfter) and the failures a rate limiter counts release their memory
// once none are left. A controller that retried a burst of keys (every
// key of a shard it just took over, say) would otherwise hold a heap and
// maps of the burst's size for as long as it runs. Below it, they are
// kept so that steady state does not allocate.
const releaseAbove = 256

// Queue is a work queue of comparable items with priorities,
// deduplication, delayed adds and rate-limited retries. It implements
// [PriorityInterface] and therefore [RateLimitingInterface],
// [DelayingInterface] and [Interface]; see Interface and
// PriorityInterface for the guarantees it makes.
//
// A Queue is safe for concurrent use by any number of producers and
// workers. Create one with [New]; the zero value is not usable. After
// ShutDown it holds no goroutine and no armed timer.
//
// In steady state (once its internal buffers have grown to the working
// set) Add, Get, Done and AddAfter, and their priority forms, do not
// allocate. The queue keeps the records of up to 1024 recently finished
// items, so that adding one of them again needs no map insertion; a
// queue that empties after holding more than 2048 items releases its
// buffers.
type Queue[T comparable] struct {
	mu       sync.Mutex
	ready    sync.Cond   // signalled when an item becomes ready or on shutdown
	idle     sync.Cond   // broadcast when the last processing item is Done
	items    map[T]int32 // item -> index in slab
	slab     []entry[T]
	free     int32 // head (oldest) of the free list in slab, -1 if empty
	freeTail int32 // tail (newest) of the free list, -1 if empty
	idleHead int32 // least recently finished idle entry, -1 if none
	idleTail int32 // most recently finished idle entry, -1 if none
	nidle    int
	levels   []level // one ring of ready entries per priority, highest first; see priority.go
	nready   int     // items ready, over all levels
	nproc    int     // items processing
	waiting  int     // goroutines blocked in Get
	shutting bool
	draining int // goroutines blocked in ShutDownWithDrain

	delay   delays[T]      // AddAfter state; see delaying.go
	limiter RateLimiter[T] // see ratelimiting.go
	clock   clock.Clock
	metrics *queueMetrics[T] // nil when Options.Metrics is nil
}

// New returns an empty, running queue configured by opts.
func New[T comparable](opts Options[T]) *Queue[T] {
	return newQueue(opts, clock.Real{})
}

// newQueue is New with the time source c, which also drives the default
// limiter. This package's tests pass a fake clock through it.
func newQueue[T comparable](opts Options[T], c clock.Clock) *Queue[T] {
	q := &Queue[T]{
		items:    make(map[T]int32),
		free:     -1,
		freeTail: -1,
		idleHead: -1,
		idleTail: -1,
		clock:    c,
	}
	q.ready.L = &q.mu
	q.idle.L = &q.mu
	q.limiter = opts.RateLimiter
	if q.limiter == nil {
		q.limiter = defaultLimiter[T](q.clock)
	}
	q.delay.init()
	if opts.Metrics != nil {
		q.metrics = newQueueMetrics(q, opts.Metrics.QueueMetrics(opts.Name), opts.MetricsUpdatePeriod)
	}
	return q
}

// Add marks item as needing processing, at [PriorityNormal]. If item is
// ready already, the call does nothing; if it is processing, it becomes
// ready again when the worker calls Done. After ShutDown, Add does
// nothing. Add(item) is AddWithPriority(item, PriorityNormal).
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	if !q.shutting {
		q.addLocked(item, PriorityNormal)
	}
	q.mu.Unlock()
}

// addLocked implements AddWithPriority. q.mu must be held and the queue
// running.
func (q *Queue[T]) addLocked(item T, prio int) {
	if i, ok := q.items[item]; ok {
		switch e := &q.slab[i]; e.state {
		case stateReady:
			if prio > e.prio {
				q.raise(i, prio)
			}
		case stateProcessing:
			e.state = stateDirty
			e.prio = prio
			if q.metrics != nil {
				q.metrics.added()
			}
		case stateDirty:
			e.prio = max(e.prio, prio)
		case stateIdle:
			q.unlinkIdle(i)
			if q.metrics != nil {
				q.metrics.added()
			}
			q.pushReady(i, prio)
		}
		return
	}
	i := q.newEntry(item)
	q.items[item] = i
	if q.metrics != nil {
		q.metrics.added()
	}
	q.pushReady(i, prio)
}

// pushReady appends entry i to the ring of priority prio and wakes one
// waiting worker. q.mu must be held.
func (q *Queue[T]) pushReady(i int32, prio int) {
	l := q.push(i, prio)
	if q.metrics != nil {
		q.metrics.readied(i, l)
	}
	if q.waiting > 0 {
		q.ready.Signal()
	}
}

// Get blocks until an item is ready or the queue is shut down. It
// returns the ready item of the highest priority that became ready
// first, now processing, and true; or the zero value and false once the
// queue is shut down and no item is ready. The caller must call
// Done(item) when it has finished with the item.
func (q *Queue[T]) Get() (item T, ok bool) {
	q.mu.Lock()
	for q.nready == 0 && !q.shutting {
		q.waiting++
		q.ready.Wait()
		q.waiting--
	}
	if q.nready == 0 {
		q.mu.Unlock()
		return item, false
	}
	i, l := q.pop()
	e := &q.slab[i]
	e.state = stateProcessing
	item = e.item
	q.nproc++
	if q.metrics != nil {
		q.metrics.started(i, l)
	}
	q.mu.Unlock()
	return item, true
}

// Done marks item as no longer processing. If Add was called for item
// while it was processing, item becomes ready again, at the back of the
// line of the highest priority it was added with since Get. Done for an
// item that is not processing does nothing.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	i, ok := q.items[item]
	if !ok {
		q.mu.Unlock()
		return
	}
	switch q.slab[i].state {
	case stateProcessing:
		q.nproc--
		if q.metrics != nil {
			q.metrics.finished(i)
		}
		q.retire(i)
	case stateDirty:
		q.nproc--
		if q.metrics != nil {
			q.metrics.finished(i)
		}
		q.pushReady(i, q.slab[i].prio)
	default: // ready or idle: not processing
		q.mu.Unlock()
		return
	}
	if q.nproc == 0 && q.draining > 0 {
		q.idle.Broadcast()
	}
	q.mu.Unlock()
}

// Len returns the number of ready items. Items that are processing or
// waiting for an AddAfter delay are not counted.
func (q *Queue[T]) Len() int {
	q.mu.Lock()
	n := q.nready
	q.mu.Unlock()
	return n
}

// ShutDown stops the queue from accepting items, drops the items waiting
// for an AddAfter delay, stops its timers and wakes every blocked Get.
// Ready items are still handed out by Get until none remain; workers
// that keep calling Get therefore finish the backlog and then see false.
// ShutDown does not wait for processing items; see ShutDownWithDrain.
// Calling it more than once is harmless.
func (q *Queue[T]) ShutDown() {
	q.mu.Lock()
	q.shutDownLocked()
	q.mu.Unlock()
}

// ShutDownWithDrain shuts the queue down as ShutDown does, then blocks
// until no item is processing, that is until Done was called for every
// item handed out by Get. Workers must keep running for it to return.
func (q *Queue[T]) ShutDownWithDrain() {
	q.mu.Lock()
	q.shutDownLocked()
	q.draining++
	for q.nproc > 0 {
		q.idle.Wait()
	}
	q.draining--
	q.mu.Unlock()
}

// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
func (q *Queue[T]) ShuttingDown() bool {
	q.mu.Lock()
	s := q.shutting
	q.mu.Unlock()
	return s
}

func (q *Queue[T]) shutDownLocked() {
	if q.shutting {
		return
	}
	q.shutting = true
	q.delay.stop()
	if q.metrics != nil {
		q.metrics.stop()
	}
	q.ready.Broadcast()
}

// newEntry returns the index of a fresh entry for item. It may grow the
// slab, so it invalidates pointers into it. q.mu must be held.
func (q *Queue[T]) newEntry(item T) int32 {
	i := q.free
	if i < 0 {
		q.slab = append(q.slab, entry[T]{})
		i = int32(len(q.slab) - 1)
	} else {
		q.free = q.slab[i].next
		if q.free < 0 {
			q.freeTail = -1
		}
	}
	q.slab[i] = entry[T]{item: item, prev: -1, next: -1}
	return i
}

// freeEntry appends entry i, already out of the map and of every list, to
// the free list, dropping its item for the collector. The free list is
// first in, first out: entries are freed roughly in the order Get handed
// them out, so reusing them in that order keeps the ready ring walking
// the slab mostly sequentially, which matters once the slab is larger
// than the CPU caches. q.mu must be held.
func (q *Queue[T]) freeEntry(i int32) {
	// A stale reference to it may remain in a ring: the state tells pop
	// that it is not ready.
	q.slab[i] = entry[T]{next: -1, state: stateFree}
	if q.freeTail >= 0 {
		q.slab[q.freeTail].next = i
	} else {
		q.free = i
	}
	q.freeTail = i
}

// retire makes entry i, whose item has finished, idle: it goes to the
// tail of the idle list, and the least recently finished idle entry is
// dropped if there are too many. With more than maxIdle items ready or
// processing, it frees the entry instead. When nothing is ready or processing and
// the slab is large, it releases the slab, the rings and the map instead.
// q.mu must be held.
func (q *Queue[T]) retire(i int32) {
	if q.nproc == 0 && q.nready == 0 && cap(q.slab) > shrinkAbove {
		q.slab, q.free, q.freeTail = nil, -1, -1
		q.idleHead, q.idleTail, q.nidle = -1, -1, 0
		q.levels = nil // all empty: their gauges, if any, are at zero
		q.items = make(map[T]int32)
		return
	}
	e := &q.slab[i]
	if q.nready+q.nproc > maxIdle {
		// A large backlog: a finished item is unlikely to come back soon,
		// and evicting another idle entry would touch a colder part of
		// the map than deleting this one, which Done just looked up.
		delete(q.items, e.item)
		q.freeEntry(i)
		return
	}
	e.state = stateIdle
	e.prev, e.next = q.idleTail, -1
	if q.idleTail >= 0 {
		q.slab[q.idleTail].next = i
	} else {
		q.idleHead = i
	}
	q.idleTail = i
	q.nidle++
	if q.nidle > maxIdle {
		old := q.idleHead
		q.unlinkIdle(old)
		delete(q.items, q.slab[old].item)
		q.freeEntry(old)
	}
}

// unlinkIdle removes idle entry i from the idle list. q.mu must be held.
func (q *Queue[T]) unlinkIdle(i int32) {
	e := &q.slab[i]
	if e.prev >= 0 {
		q.slab[e.prev].next = e.next
	} else {
		q.idleHead = e.next
	}
	if e.next >= 0 {
		q.slab[e.next].prev = e.prev
	} else {
		q.idleTail = e.prev
	}
	e.prev, e.next = -1, -1
	q.nidle--
}
