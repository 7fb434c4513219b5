// Package workqueue is the queue between detecting that an object changed
// and reconciling it: a FIFO of keys that deduplicates, delays and
// rate-limits retries, and never lets two workers process one key at once.
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
//   - Fair: ready items are handed out in the order they became ready.
//   - Delays share one timer: AddAfter keeps a heap of waiting items and
//     arms a single timer for the earliest, with no goroutine per item. An
//     item waiting for an earlier time keeps it.
//   - Shutdown: ShutDown wakes blocked workers; ShutDownWithDrain also
//     waits until every processing item is Done.
//
// # Interfaces
//
// [Queue] is the one implementation. Code that only needs part of it
// accepts one of the small interfaces: [Adder] (event handlers),
// [Consumer] (workers), [Lifecycle], or the layered [Interface],
// [DelayingInterface] and [RateLimitingInterface]. Package queuetest
// checks any implementation of Interface against the guarantees above.
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
// Set [Options].Metrics to a [MetricsProvider] to record depth, adds,
// queue latency, work duration, unfinished work, the longest running
// processor and retries, per queue name. Package prommetrics provides a
// Prometheus provider; without one, the queue records nothing and pays
// nothing.
//
// # Performance
//
// One mutex guards a map from item to an index into a slice of entries
// and a ring buffer of ready indices, so a Get needs no map lookup, a
// large backlog holds no per-item heap objects for the garbage collector
// to trace, and in steady state Add, Get, Done and AddAfter allocate
// nothing. A queue that empties after a burst of more than 2048 items
// releases its buffers. bench/ compares it with client-go's workqueue
// (docs/performance.md says how to run it).
package workqueue
