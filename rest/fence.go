package rest

import (
	"context"
	"errors"
	"fmt"
	"net/http"
	"time"
)

// A Fence guards the writes made on behalf of an exclusive right that can
// be lost, such as a leader's Lease: once the right is lost, or might be,
// no such write may reach the server. [WithFence] puts a Fence in a
// context; the client then asks it before every write sent with that
// context, or with any context derived from it (context.WithoutCancel
// included), and refuses the write if the fence says no.
//
// The fence is checked in this process, so it has one limit: a write
// that passed the last check just before the connection, and was then
// held up (a paused process, a starved CPU) for longer than the time the
// right outlives the fence, can still land late. The leaderelection
// package's Elector gives its writes RenewDeadline, and others wait
// LeaseDuration, so that margin is LeaseDuration-RenewDeadline (5 s by
// default).
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

// lastCheck is the innermost of the client's transports: it refuses a
// request whose context has ended (for a fenced write, because the
// fence's time ran out) after the auth transport's token refreshes and
// the rate limiter's waits, just before the request goes to the
// connection. It narrows the window in which a process that stalls
// between the fence's check and the socket can still land a write.
type lastCheck struct{ next http.RoundTripper }

func (l lastCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	if ctx := req.Context(); ctx.Err() != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("rest: %s %s: %w", req.Method, req.URL.Path, context.Cause(ctx))
	}
	return l.next.RoundTrip(req)
}
