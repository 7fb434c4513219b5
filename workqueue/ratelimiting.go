package workqueue

// AddRateLimited adds item after the delay that the queue's
// [RateLimiter] returns for it (a positive delay counts a retry in the
// metrics, as every delayed add does). Call
// it when processing item failed. After ShutDown it does nothing and
// does not consult the limiter.
func (q *Queue[T]) AddRateLimited(item T) {
	if q.ShuttingDown() {
		return
	}
	q.AddAfter(item, q.limiter.When(item))
}

// Forget tells the queue's rate limiter that item succeeded, so that its
// next failure starts again from the first delay. It does not remove item
// from the queue. Call it when processing item succeeded.
func (q *Queue[T]) Forget(item T) { q.limiter.Forget(item) }

// NumRequeues returns the number of failures the queue's rate limiter
// counts for item; see the limiter's documentation for what it counts.
func (q *Queue[T]) NumRequeues(item T) int { return q.limiter.NumRequeues(item) }

var _ RateLimitingInterface[string] = (*Queue[string])(nil)
