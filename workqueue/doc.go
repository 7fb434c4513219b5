// Package workqueue is the queue between detecting that an object changed
// and reconciling it: a queue of keys, by priority then first in first
// out, that deduplicates, delays and rate-limits retries, and never lets
// two workers process one key at once.
//
// # Getting started
//
// Event handlers Add keys; workers loop on Get and Done:
//
//	q := workqueue.New(workqueue.Options[string]{Name: "pods"})
//	defer q.ShutDown()
//	go func() {
//		for {
//			key, ok := q.Get()
//			if !ok {
//				return // shut down and empty
//			}
//			if err := reconcile(key); err != nil {
//				q.AddRateLimited(key) // retry later, with backoff
//			} else {
//				q.Forget(key) // reset the backoff
//			}
//			q.Done(key)
//		}
//	}()
//
// # Guarantees
//
//   - Stingy: an item is never handed to two workers at once, and Adds of
//     an item that is already ready collapse into one.
//   - Level-based: an Add of an item that is processing is not lost; the
//     item becomes ready again when its worker calls Done.
//   - Fair: ready items are handed out in the order they became ready,
//     within a priority (see below).
//   - Delays share one timer: AddAfter keeps a heap of waiting items and
//     arms a single timer for the earliest, with no goroutine per item. An
//     item waiting for an earlier time keeps it.
//   - Shutdown: ShutDown wakes blocked workers; ShutDownWithDrain also
//     waits until every processing item is Done.
//
// # Priorities
//
// Every item is added with a priority, an int: Add, AddAfter and
// AddRateLimited use [PriorityNormal] (0), and AddWithPriority,
// AddAfterWithPriority and AddRateLimitedWithPriority take one. Get hands
// out the ready items of the highest priority first, and those of one
// priority in the order they became ready, so a queue whose items all
// have one priority is the FIFO it was before priorities. Adding an item
// that is ready already with a higher priority raises it (to the back of
// the line of its new priority); a lower one never lowers it. An item
// added while processing comes back after Done at the highest priority
// it was added with since Get; a delayed item becomes ready at the
// highest priority it was delayed with.
//
// [PriorityLow] (-100) is for work nobody is waiting for: package
// controller queues the objects of an informer's initial list and of
// resyncs at it, so that a change made while a controller works through
// such a backlog is reconciled as soon as a worker is free.
//
//	q.AddWithPriority("default/web-0", workqueue.PriorityLow) // backlog
//	q.Add("default/web-1")                                    // a change: handed out first
//
// # Interfaces
//
// [Queue] is the one implementation. Code that only needs part of it
// accepts one of the small interfaces: [Adder] and [PriorityAdder] (event
// handlers), [Consumer] (workers), [Lifecycle], or the layered
// [Interface], [DelayingInterface], [RateLimitingInterface] and
// [PriorityInterface]. Package queuetest checks any implementation of
// Interface, or of PriorityInterface, against the guarantees above.
//
// # Rate limiting
//
// A [RateLimiter] maps a failing item to a delay. [ExponentialLimiter] and
// [FastSlowLimiter] back off per item; [BucketLimiter] caps the overall
// retry rate; [MaxOfLimiter] combines them. [DefaultLimiter] is the
// combination users of Kubernetes controllers expect: per-item 5ms→1000s
// exponential, and 10 retries/s with a burst of 100 overall.
//
// Unlike client-go's limiters, the per-item limiters count a failure only
// once the delay caused by the previous one has run out, so an item that
// watch events keep re-triggering while it backs off does not have its
// backoff inflated by each event.
//
// # Testing code that waits
//
// A queue and its limiters take no clock: they read the time and arm
// their timers through the time package. To test code that uses AddAfter,
// AddRateLimited or a limiter without waiting for the real delays, run
// the test in a bubble of the testing/synctest package (Go 1.25 and
// later). In a bubble the time package is fake: time stands still while
// any goroutine in the bubble can run, and jumps to the next timer as
// soon as all of them are blocked, so delays pass at once and exactly.
//
//   - Create the queue, and any limiter, inside the bubble, so that its
//     timers and times belong to the bubble, and shut the queue down
//     before the bubble ends (defer q.ShutDown()).
//   - Move time forward with time.Sleep, then call synctest.Wait so that
//     the queue has made ready every item that fell due. Or call Get: while
//     it blocks, time jumps to the next delay that runs out.
//
// The FakeTime example is such a test.
//
// # Metrics
//
// Set [Options].Metrics to a [MetricsProvider] to record depth (in all,
// and by priority), adds, queue latency, work duration, unfinished work,
// the longest running processor and retries, per queue name. Package prommetrics provides a
// Prometheus provider; without one, the queue records nothing and pays
// nothing.
//
// # Performance
//
// One mutex guards a map from item to an index into a slice of entries
// and, per priority, a ring buffer of ready indices, so a Get needs no
// map lookup, a large backlog holds no per-item heap objects for the
// garbage collector to trace, and in steady state Add, Get, Done and
// AddAfter, and their priority forms, allocate nothing. Raising an item
// costs no search: it leaves a stale index behind, which Get skips. A queue that empties after a burst of more than 2048 items
// releases its buffers. bench/ compares it with client-go's workqueue
// (docs/performance.md says how to run it).
package workqueue
