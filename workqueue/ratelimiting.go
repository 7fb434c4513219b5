package workqueue

// AddRateLimited adds item after the delay that the queue's
// [RateLimiter] returns for it, and counts a retry in the metrics. Call
// it when processing item failed. After ShutDown it does nothing and
// does not consult the limiter.
func (q *Queue[T]) AddRateLimited(item T) {
	if q.ShuttingDown() {
		return
	}
	d := q.limiter.When(item)
	if q.metrics != nil {
		q.metrics.retried()
	}
	q.AddAfter(item, d)
}

// Forget tells the queue's rate limiter that item succeeded, so that its
// next failure starts again from the first delay. It does not remove item
// from the queue. Call it when processing item succeeded.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues returns the number of failures the queue's rate limiter
// counts for item; see the limiter's documentation for what it counts.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

var _ RateLimitingInterface[string] = (*Queue[string])(nil)
