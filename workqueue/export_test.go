package workqueue

import "github.com/loom-k8s/loom/internal/clock"

// NewWithClock is New on the clock c, for the tests that need to see the
// timers a queue arms, which a testing/synctest bubble does not show.
func NewWithClock[T comparable](opts Options[T], c clock.Clock) *Queue[T] {
	return newQueue(opts, c)
}
