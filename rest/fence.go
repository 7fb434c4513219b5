package rest

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// A Fence guards the writes made on behalf of an exclusive right that can
// be lost, such as a leader's Lease: once the right is lost, or might be,
// no such write may reach the server. [WithFence] puts a Fence in a
// context; the client then asks it before every write sent with that
// context, or with any context derived from it (context.WithoutCancel
// included), and refuses the write if the fence says no.
//
// The leaderelection package's Elector is a Fence.
type Fence interface {
	// Enter is called before a write is sent. It returns how much longer
	// writes may be in flight (the write is cancelled when that runs out),
	// and done, to call when the write has finished; or an error, which
	// refuses the write, when the right is lost.
	Enter() (remaining time.Duration, done func(), err error)
}

// ErrFenced is returned (wrapped, with the fence's reason) for a write that
// a [Fence] refused, or that ran past the time the fence allowed.
var ErrFenced = errors.New("write fenced")

type fenceKey struct{}

// WithFence returns a copy of ctx whose writes (POST, PUT, PATCH and
// DELETE requests) go through f: see [Fence]. Reads are not fenced.
func WithFence(ctx context.Context, f Fence) context.Context {
	return context.WithValue(ctx, fenceKey{}, f)
}

// FenceFrom returns the Fence that ctx carries, if any.
func FenceFrom(ctx context.Context) (Fence, bool) {
	f, ok := ctx.Value(fenceKey{}).(Fence)
	return f, ok
}

// enterFence asks ctx's fence, if any, to let a write through. It returns
// the context to send it with (ending when the fence's time runs out) and
// a function to call when the write is done.
func enterFence(ctx context.Context, method, path string) (context.Context, func(), error) {
	f, ok := FenceFrom(ctx)
	if !ok || idempotentRead(method) {
		return ctx, func() {}, nil
	}
	remaining, done, err := f.Enter()
	if err != nil {
		return nil, nil, fmt.Errorf("rest: %s %s: %w: %w", method, path, ErrFenced, err)
	}
	if remaining <= 0 {
		done()
		return nil, nil, fmt.Errorf("rest: %s %s: %w: the fence's time has run out", method, path, ErrFenced)
	}
	cause := fmt.Errorf("%w: the write ran past the time the fence allowed", ErrFenced)
	ctx, cancel := context.WithTimeoutCause(ctx, remaining, cause)
	return ctx, func() { cancel(); done() }, nil
}

// idempotentRead reports whether method only reads.
func idempotentRead(method string) bool {
	switch method {
	case "GET", "HEAD", "OPTIONS":
		return true
	}
	return false
}
