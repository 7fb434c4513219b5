package workqueue

import (
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// Options configures a [Queue]. The zero value is valid: an unnamed
// queue without metrics, on the system clock, with [DefaultLimiter].
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
	// [DefaultLimiter], on Clock. The queue does not share its limiter's
	// state with any other queue unless the caller passes the same one.
	RateLimiter RateLimiter[T]

	// Clock is the time source for delays, rate limits and metrics.
	// Default nil: the system clock. The type lives in an internal
	// package so that this module's tests can inject a fake clock; users
	// outside the module leave it nil.
	Clock clock.Clock
}

// entry states.
const (
	stateReady      uint8 = iota // in the ready ring, not processing
	stateProcessing              // handed out by Get, no Add since
	stateDirty                   // processing, and Add was called since Get
)

// entry is the queue's record of an item that is ready or processing.
// An item with no entry is idle. Entries are recycled through a free list.
type entry[T comparable] struct {
	item  T
	state uint8
	// next links the free list; with metrics on, prev and next also link
	// the list of processing entries, oldest first.
	prev, next *entry[T]
	// Set only when metrics are on.
	readyAt, startedAt time.Time
}

// maxFree bounds the free lists, so that a queue that once held many items
// does not keep all their records forever.
const maxFree = 4096

// Queue is a work queue of comparable items with deduplication, delayed
// adds and rate-limited retries. It implements [RateLimitingInterface]
// and therefore [DelayingInterface] and [Interface]; see Interface for
// the guarantees it makes.
//
// A Queue is safe for concurrent use by any number of producers and
// workers. Create one with [New]; the zero value is not usable. After
// ShutDown it holds no goroutine and no armed timer.
//
// In steady state (once its internal buffers have grown to the working
// set) Add, Get, Done and AddAfter do not allocate.
type Queue[T comparable] struct {
	mu       sync.Mutex
	ready    sync.Cond // signalled when an item becomes ready or on shutdown
	idle     sync.Cond // broadcast when the last processing item is Done
	items    map[T]*entry[T]
	ring     ring[*entry[T]]
	free     *entry[T]
	nfree    int
	nproc    int // items processing
	waiting  int // goroutines blocked in Get
	shutting bool
	draining int // goroutines blocked in ShutDownWithDrain

	delay   delays[T]      // AddAfter state; see delaying.go
	limiter RateLimiter[T] // see ratelimiting.go
	clock   clock.Clock
	metrics *queueMetrics[T] // nil when Options.Metrics is nil
}

// New returns an empty, running queue configured by opts.
func New[T comparable](opts Options[T]) *Queue[T] {
	q := &Queue[T]{
		items: make(map[T]*entry[T]),
		clock: clock.OrReal(opts.Clock),
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

// Add marks item as needing processing. If item is ready already, the
// call does nothing; if it is processing, it becomes ready again when the
// worker calls Done. After ShutDown, Add does nothing.
func (q *Queue[T]) Add(item T) {
	q.mu.Lock()
	if !q.shutting {
		q.addLocked(item)
	}
	q.mu.Unlock()
}

// addLocked implements Add. q.mu must be held and the queue running.
func (q *Queue[T]) addLocked(item T) {
	e, ok := q.items[item]
	if ok {
		if e.state == stateProcessing {
			e.state = stateDirty
			if q.metrics != nil {
				q.metrics.added()
			}
		}
		return
	}
	e = q.newEntry(item)
	q.items[item] = e
	if q.metrics != nil {
		q.metrics.added()
	}
	q.pushReady(e)
}

// pushReady appends e to the ready ring and wakes one waiting worker.
// q.mu must be held.
func (q *Queue[T]) pushReady(e *entry[T]) {
	e.state = stateReady
	q.ring.push(e)
	if q.metrics != nil {
		q.metrics.readied(e)
	}
	if q.waiting > 0 {
		q.ready.Signal()
	}
}

// Get blocks until an item is ready or the queue is shut down. It
// returns the oldest ready item, now processing, and true; or the zero
// value and false once the queue is shut down and no item is ready. The
// caller must call Done(item) when it has finished with the item.
func (q *Queue[T]) Get() (item T, ok bool) {
	q.mu.Lock()
	for q.ring.len() == 0 && !q.shutting {
		q.waiting++
		q.ready.Wait()
		q.waiting--
	}
	if q.ring.len() == 0 {
		q.mu.Unlock()
		return item, false
	}
	e := q.ring.pop()
	e.state = stateProcessing
	q.nproc++
	if q.metrics != nil {
		q.metrics.started(e)
	}
	item = e.item
	q.mu.Unlock()
	return item, true
}

// Done marks item as no longer processing. If Add was called for item
// while it was processing, item becomes ready again (at the back of the
// line). Done for an item that is not processing does nothing.
func (q *Queue[T]) Done(item T) {
	q.mu.Lock()
	e, ok := q.items[item]
	if !ok || e.state == stateReady {
		q.mu.Unlock()
		return
	}
	q.nproc--
	if q.metrics != nil {
		q.metrics.finished(e)
	}
	if e.state == stateDirty {
		q.pushReady(e)
	} else {
		delete(q.items, item)
		q.freeEntry(e)
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
	n := q.ring.len()
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

func (q *Queue[T]) newEntry(item T) *entry[T] {
	e := q.free
	if e == nil {
		return &entry[T]{item: item}
	}
	q.free = e.next
	q.nfree--
	e.next = nil
	e.item = item
	return e
}

func (q *Queue[T]) freeEntry(e *entry[T]) {
	var zero T
	e.item = zero
	e.prev = nil
	if q.nfree >= maxFree {
		e.next = nil
		return
	}
	e.next = q.free
	q.free = e
	q.nfree++
}
