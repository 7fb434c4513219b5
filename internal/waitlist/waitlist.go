// Package waitlist is where the Pops of a queue wait for an item: the
// waiting room shared by cache's DeltaFIFO and the queues of
// cache/stores.
package waitlist

import (
	"context"
	"sync"
)

// List is where the Pops of a queue wait for an item. Its channel has one
// slot, and holds a token when a Pop may go on. Whoever queues an item
// while Pops wait leaves a token; a Pop that takes an item and leaves
// more behind passes a token on, so that every item wakes a Pop in turn.
// Unlike a channel closed and made anew on each wake-up, it makes no
// garbage. A Pop that finds a token and no item waits again. The queue's
// mutex guards the count of waiters.
type List struct {
	waiters int
	wake    chan struct{}
}

// New returns an empty List.
func New() List { return List{wake: make(chan struct{}, 1)} }

// Notify lets a waiting Pop go on, if there is one. The caller holds the
// queue's mutex.
func (w *List) Notify() {
	if w.waiters > 0 {
		select {
		case w.wake <- struct{}{}:
		default: // a token is there already
		}
	}
}

// Wait unlocks mu, waits for a token, done or ctx, and locks mu again.
// It returns ctx's error when ctx ended the wait.
func (w *List) Wait(ctx context.Context, mu *sync.Mutex, done <-chan struct{}) error {
	w.waiters++
	mu.Unlock()
	var err error
	select {
	case <-w.wake:
	case <-done:
	case <-ctx.Done():
		err = ctx.Err()
	}
	mu.Lock()
	w.waiters--
	return err
}
