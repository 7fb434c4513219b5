package rest

import (
	"context"
	"errors"
	"fmt"
	"io"
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
// The fence is checked three times: when the write is made, just before
// the request is handed to the connection, and, for a write with a body,
// just before the body's last byte is: the server cannot act on a request
// whose body it has not received whole, and a write refused at that point
// is aborted. Each check compares the time now with the time the fence
// allowed, so a process that was paused, or whose timers have not yet
// run, is still refused.
//
// The fence is checked in this process, so it has one limit: a write
// that passed the last check, and was then held up (a paused process, a
// starved CPU) in the few instructions between that check and the
// socket, for longer than the time the right outlives the fence, can
// still land late. The leaderelection package's Elector gives its writes
// RenewDeadline, and others wait LeaseDuration, so that margin is
// LeaseDuration-RenewDeadline (5 s by default).
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
	ctx, cancel := context.WithTimeoutCause(ctx, remaining, errRanPast)
	ctx = context.WithValue(ctx, fenceDeadlineKey{}, time.Now().Add(remaining))
	return ctx, func() { cancel(); done() }, nil
}

// errRanPast is the cause of a write that the fence's time ran out on.
var errRanPast = fmt.Errorf("%w: the write ran past the time the fence allowed", ErrFenced)

// fenceDeadlineKey is the context key of the time a fenced write must
// have reached the server by.
type fenceDeadlineKey struct{}

// ended returns why a request sent with ctx must not go on, or nil: ctx
// has ended, or the time the fence allowed has passed by the clock,
// whether or not ctx's timer has fired yet (after a pause, a goroutine
// can run before the timer does).
func ended(ctx context.Context) error {
	if ctx.Err() != nil {
		return context.Cause(ctx)
	}
	if d, ok := ctx.Value(fenceDeadlineKey{}).(time.Time); ok && !time.Now().Before(d) {
		return errRanPast
	}
	return nil
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
// connection; and it holds back the last byte of a fenced write's body
// until the transport asks for it, and checks again then. It narrows the
// window in which a process that stalls between the fence's check and
// the socket can still land a write to the sending of the last frame.
type lastCheck struct{ next http.RoundTripper }

func (l lastCheck) RoundTrip(req *http.Request) (*http.Response, error) {
	ctx := req.Context()
	if err := ended(ctx); err != nil {
		if req.Body != nil {
			req.Body.Close()
		}
		return nil, fmt.Errorf("rest: %s %s: %w", req.Method, req.URL.Path, err)
	}
	if _, fenced := ctx.Value(fenceDeadlineKey{}).(time.Time); fenced && req.Body != nil && req.Body != http.NoBody {
		r := req.Clone(ctx)
		r.Body = &heldBody{rc: req.Body, ctx: ctx, size: req.ContentLength}
		if getBody := req.GetBody; getBody != nil {
			// A transport that resends the request (an HTTP/2 connection
			// that went away before the server read it) holds back its
			// last byte too.
			r.GetBody = func() (io.ReadCloser, error) {
				rc, err := getBody()
				if err != nil {
					return nil, err
				}
				return &heldBody{rc: rc, ctx: ctx, size: req.ContentLength}, nil
			}
		}
		req = r
	}
	return l.next.RoundTrip(req)
}

// heldBody reads a fenced write's body one byte behind: it gives the
// transport the body's last byte, and then io.EOF, only while ended(ctx)
// is nil, so that the check is made as the transport is about to send the
// end of the request. It returns ended(ctx)'s error instead, which aborts
// the request before the server has all of it.
type heldBody struct {
	rc         io.ReadCloser
	ctx        context.Context
	size       int64  // the body's length if known (the request's ContentLength), else 0 or -1
	buf        []byte // read from rc and not yet returned: buf[start:end]
	start, end int
	eof        bool // rc has returned io.EOF
}

// maxHeld is the size of heldBody's buffer for a body that is longer, or
// of unknown length.
const maxHeld = 4096

func (h *heldBody) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	if h.buf == nil {
		n := maxHeld
		if h.size > 0 && h.size < maxHeld {
			n = max(int(h.size)+1, 2) // room to see io.EOF with the last byte
		}
		h.buf = make([]byte, n)
	}
	// Keep at least two bytes in hand until rc ends, so that what is
	// returned is never the last byte.
	for !h.eof && h.end-h.start < 2 {
		if h.start > 0 {
			h.end = copy(h.buf, h.buf[h.start:h.end])
			h.start = 0
		}
		n, err := h.rc.Read(h.buf[h.end:])
		h.end += n
		if err == io.EOF {
			h.eof = true
		} else if err != nil {
			return 0, err
		}
	}
	avail := h.buf[h.start:h.end]
	if h.eof {
		if err := ended(h.ctx); err != nil {
			return 0, err
		}
		if len(avail) == 0 {
			return 0, io.EOF
		}
	} else {
		avail = avail[:len(avail)-1]
	}
	n := copy(p, avail)
	h.start += n
	return n, nil
}

func (h *heldBody) Close() error { return h.rc.Close() }
