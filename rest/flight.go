package rest

import (
	"context"
	"sync"
)

// flight runs one call of a function at a time and gives its result to
// every caller that asked while it ran (a single flight). A caller stops
// waiting as soon as its own context ends. The call runs on for the others;
// when every caller has stopped waiting, its context is cancelled, and the
// next caller starts a new call. The call's context carries the values of
// the context of the caller that started it. The zero value is ready to
// use.
type flight[T any] struct {
	mu  sync.Mutex
	cur *flightCall[T]
}

type flightCall[T any] struct {
	done    chan struct{}
	val     T
	err     error
	waiters int // guarded by flight.mu
	cancel  context.CancelFunc
}

// do returns the result of fn, run now or already running. If ctx ends
// first, it returns ctx's error.
func (f *flight[T]) do(ctx context.Context, fn func(context.Context) (T, error)) (T, error) {
	f.mu.Lock()
	c := f.cur
	if c == nil {
		runCtx, cancel := context.WithCancel(context.WithoutCancel(ctx))
		c = &flightCall[T]{done: make(chan struct{}), cancel: cancel}
		f.cur = c
		go func() {
			v, err := fn(runCtx)
			cancel()
			f.mu.Lock()
			c.val, c.err = v, err
			if f.cur == c {
				f.cur = nil
			}
			f.mu.Unlock()
			close(c.done)
		}()
	}
	c.waiters++
	f.mu.Unlock()

	select {
	case <-c.done:
		return c.val, c.err
	case <-ctx.Done():
		f.mu.Lock()
		c.waiters--
		if c.waiters == 0 {
			c.cancel()
			if f.cur == c {
				f.cur = nil
			}
		}
		f.mu.Unlock()
		var zero T
		return zero, ctx.Err()
	}
}
