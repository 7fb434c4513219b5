package workqueue

// AddRateLimited adds item, at [PriorityNormal], after the delay that
// the queue's [RateLimiter] returns for it (a positive delay counts a
// retry in the metrics, as every delayed add does). Call it when
// processing item failed. After ShutDown it does nothing and does not
// consult the limiter.
func (q *Queue[T]) AddRateLimited(item T) {
	q.AddRateLimitedWithPriority(item, PriorityNormal)
}

// AddRateLimitedWithPriority is [Queue.AddRateLimited] at priority prio:
// item is added as by AddAfterWithPriority, after the delay the rate
// limiter chooses. The priority does not change the delay.
func (q *Queue[T]) AddRateLimitedWithPriority(item T, prio int) {
	if q.ShuttingDown() {
		return
	}
	q.AddAfterWithPriority(item, q.limiter.When(item), prio)
}

// Forget tells the queue's rate limiter that item succeeded, so that its
// next failure starts again from the first delay. It does not remove item
// from the queue. Call it when processing item succeeded.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues returns the number of failures the queue's rate limiter
// counts for item; see the limiter's documentation for what it counts.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

var _ PriorityInterface[string] = (*Queue[string])(nil)
