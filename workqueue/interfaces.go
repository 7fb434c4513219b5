package workqueue

import "time"

// Adder is the producer side of a queue: event handlers need only this.
type Adder[T comparable] interface {
	// Add marks item as needing processing. It never blocks on workers.
	Add(item T)
}

// Consumer is the worker side of a queue.
type Consumer[T comparable] interface {
	// Get blocks until an item is ready, hands it to the caller and marks
	// it as processing. ok is false once the queue is shut down and holds
	// no ready item; the worker should then return.
	Get() (item T, ok bool)
	// Done tells the queue that the caller has finished processing item,
	// which it obtained from Get.
	Done(item T)
}

// Lifecycle is the shutdown side of a queue.
type Lifecycle interface {
	// ShutDown makes the queue ignore new items and wakes every blocked
	// Get. Ready items are still handed out until none remain.
	ShutDown()
	// ShutDownWithDrain shuts the queue down like ShutDown, then waits
	// until no item is processing.
	ShutDownWithDrain()
	// ShuttingDown reports whether ShutDown or ShutDownWithDrain was called.
	ShuttingDown() bool
}

// Interface is the contract of a work queue: what [Queue] implements and
// what the conformance kit in package queuetest checks. Implementations
// must be safe for concurrent use and must guarantee that:
//
//   - an item is never handed to two workers at once (between Get and
//     Done it is processing; no other Get returns it);
//   - Adds of an item that is waiting collapse into one;
//   - an Add of an item that is processing makes it ready again once
//     Done is called for it;
//   - items are otherwise handed out in the order they became ready
//     (for a queue with priorities, those of one priority: see
//     [PriorityInterface]).
type Interface[T comparable] interface {
	Adder[T]
	Consumer[T]
	Lifecycle
	// Len returns the number of ready items, not counting those processing.
	Len() int
}

// DelayingInterface is a work queue that can also add an item later.
type DelayingInterface[T comparable] interface {
	Interface[T]
	// AddAfter adds item once d has elapsed; a d of zero or less adds it
	// now. If item is already waiting for an earlier time, that time wins.
	AddAfter(item T, d time.Duration)
}

// RateLimitingInterface is a delaying work queue that asks a
// [RateLimiter] how long to delay each retry.
type RateLimitingInterface[T comparable] interface {
	DelayingInterface[T]
	// AddRateLimited adds item after the delay its rate limiter chooses.
	AddRateLimited(item T)
	// Forget tells the rate limiter that item succeeded, so its next
	// failure starts from the initial delay. It does not remove item
	// from the queue.
	Forget(item T)
	// NumRequeues returns how many failures the rate limiter counts for item.
	NumRequeues(item T) int
}

// PriorityAdder is the producer side of a queue with priorities: event
// handlers that tell news from a backlog need only this.
type PriorityAdder[T comparable] interface {
	Adder[T]
	// AddWithPriority marks item as needing processing at priority prio
	// (higher first; Add is AddWithPriority at [PriorityNormal]). An item
	// that is ready already is raised to prio if prio is higher, and
	// never lowered.
	AddWithPriority(item T, prio int)
}

// PriorityInterface is a rate-limiting work queue whose items have
// priorities. On top of the guarantees of [Interface], implementations
// must guarantee that:
//
//   - Get hands out a ready item of the highest priority any ready item
//     has, and among those the one that has been ready at that priority
//     the longest (an item raised to a priority joins the back of its
//     line);
//   - an item keeps the highest priority it was added with until Get
//     hands it out; an item added while it is processing becomes ready
//     after Done at the highest priority it was added with since Get;
//   - an item added with a delay becomes ready at the priority it was
//     added with (the highest, if it was added several times before its
//     time came).
//
// With every item at one priority, it is a FIFO queue like Interface.
type PriorityInterface[T comparable] interface {
	RateLimitingInterface[T]
	PriorityAdder[T]
	// AddAfterWithPriority is AddAfter at priority prio.
	AddAfterWithPriority(item T, d time.Duration, prio int)
	// AddRateLimitedWithPriority is AddRateLimited at priority prio.
	AddRateLimitedWithPriority(item T, prio int)
}
