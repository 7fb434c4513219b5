package clock

import (
	"time"
)

// Clock tells the time and arms timers. Implementations are safe for
// concurrent use.
type Clock interface {
	// Now returns the current time.
	Now() time.Time
	// NewTimer returns a timer that sends the time on its channel once d
	// has elapsed, as time.NewTimer does.
	NewTimer(d time.Duration) Timer
	// AfterFunc returns a timer that calls f once d has elapsed, as
	// time.AfterFunc does. The returned timer's C method returns nil.
	AfterFunc(d time.Duration, f func()) Timer
}

// Timer is a single pending event armed by a [Clock]. Its methods follow
// the semantics of [time.Timer] since Go 1.23: Stop and Reset do not
// leave a stale value in the channel.
type Timer interface {
	// C returns the channel on which the timer delivers the time, or nil
	// for a timer made by AfterFunc.
	C() <-chan time.Time
	// Stop prevents the timer from firing. It reports whether the call
	// stopped the timer, false if it had already fired or been stopped.
	Stop() bool
	// Reset re-arms the timer to fire after d. It reports whether the
	// timer was active.
	Reset(d time.Duration) bool
}

// Real is the [Clock] of the standard library's time package. The zero
// value is ready to use.
type Real struct{}

var _ Clock = Real{}

// Now returns time.Now().
func (Real) Now() time.Time { return time.Now() }

// NewTimer wraps time.NewTimer.
func (Real) NewTimer(d time.Duration) Timer { return realTimer{time.NewTimer(d)} }

// AfterFunc wraps time.AfterFunc.
func (Real) AfterFunc(d time.Duration, f func()) Timer {
	return realTimer{time.AfterFunc(d, f)}
}

type realTimer struct{ t *time.Timer }

func (r realTimer) C() <-chan time.Time        { return r.t.C }
func (r realTimer) Stop() bool                 { return r.t.Stop() }
func (r realTimer) Reset(d time.Duration) bool { return r.t.Reset(d) }

// OrReal returns c, or [Real] when c is nil. Constructors use it to give
// a nil Clock option its documented default.
func OrReal(c Clock) Clock {
	if c == nil {
		return Real{}
	}
	return c
}
