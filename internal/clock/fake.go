package clock

import (
	"slices"
	"sync"
	"time"
)

// Fake is a [Clock] whose time moves only when told to. It is safe for
// concurrent use. Create one with [NewFake]; the zero value is not usable.
//
// Timers armed on a Fake fire during [Fake.Step] or [Fake.Set], never on
// their own. A channel timer delivers into a one-slot buffer, as a real
// timer does. An AfterFunc callback runs synchronously in the goroutine
// that moved the time, without the Fake's lock held, so the callback may
// use the Fake (for example to re-arm itself).
type Fake struct {
	mu      sync.Mutex
	now     time.Time
	seq     uint64
	pending []*fakeTimer // armed timers, unordered
}

var _ Clock = (*Fake)(nil)

// NewFake returns a Fake clock that reads t until moved.
func NewFake(t time.Time) *Fake { return &Fake{now: t} }

// Now returns the fake time.
func (f *Fake) Now() time.Time {
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.now
}

// NewTimer arms a channel timer that fires once the fake time reaches
// Now()+d. A d of zero or less fires at the next Step or Set, even by zero.
func (f *Fake) NewTimer(d time.Duration) Timer {
	t := &fakeTimer{clock: f, ch: make(chan time.Time, 1)}
	t.Reset(d)
	return t
}

// AfterFunc arms a timer that calls fn once the fake time reaches
// Now()+d.
func (f *Fake) AfterFunc(d time.Duration, fn func()) Timer {
	t := &fakeTimer{clock: f, fn: fn}
	t.Reset(d)
	return t
}

// Step moves the time forward by d (which must not be negative) and fires
// every timer that falls due, in deadline order.
func (f *Fake) Step(d time.Duration) {
	if d < 0 {
		panic("clock: Fake.Step with a negative duration")
	}
	f.mu.Lock()
	target := f.now.Add(d)
	f.mu.Unlock()
	f.advance(target)
}

// Set moves the time to t, which must not be before the current fake
// time, and fires every timer that falls due, in deadline order.
func (f *Fake) Set(t time.Time) {
	f.mu.Lock()
	before := t.Before(f.now)
	f.mu.Unlock()
	if before {
		panic("clock: Fake.Set would move time backwards")
	}
	f.advance(t)
}

// Waiters returns the number of armed timers. Tests use it to know that
// code under test has armed the timer it is expected to wait on.
func (f *Fake) Waiters() int {
	f.mu.Lock()
	defer f.mu.Unlock()
	return len(f.pending)
}

// advance fires due timers one at a time so that a callback which arms a
// new, already-due timer sees it fire within the same call.
func (f *Fake) advance(target time.Time) {
	for {
		f.mu.Lock()
		i := f.nextDue(target)
		if i < 0 {
			f.now = target
			f.mu.Unlock()
			return
		}
		t := f.pending[i]
		f.pending = slices.Delete(f.pending, i, i+1)
		t.armed = false
		if t.when.After(f.now) {
			f.now = t.when
		}
		now := f.now
		f.mu.Unlock()
		if t.fn != nil {
			t.fn()
		} else {
			select {
			case t.ch <- now:
			default:
			}
		}
	}
}

// nextDue returns the index of the earliest armed timer due at or before
// target (ties broken by arming order), or -1. f.mu must be held.
func (f *Fake) nextDue(target time.Time) int {
	best := -1
	for i, t := range f.pending {
		if t.when.After(target) {
			continue
		}
		if best < 0 || t.when.Before(f.pending[best].when) ||
			(t.when.Equal(f.pending[best].when) && t.seq < f.pending[best].seq) {
			best = i
		}
	}
	return best
}

type fakeTimer struct {
	clock *Fake
	ch    chan time.Time
	fn    func()
	// Guarded by clock.mu.
	when  time.Time
	seq   uint64
	armed bool
}

func (t *fakeTimer) C() <-chan time.Time { return t.ch }

func (t *fakeTimer) Stop() bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	if t.ch != nil {
		// Go 1.23 semantics: no stale value survives a Stop.
		select {
		case <-t.ch:
		default:
		}
	}
	return t.disarm()
}

func (t *fakeTimer) Reset(d time.Duration) bool {
	f := t.clock
	f.mu.Lock()
	defer f.mu.Unlock()
	was := t.disarm()
	if t.ch != nil {
		// Go 1.23 semantics: no stale value survives a Reset.
		select {
		case <-t.ch:
		default:
		}
	}
	f.seq++
	t.when, t.seq, t.armed = f.now.Add(d), f.seq, true
	f.pending = append(f.pending, t)
	return was
}

// disarm removes t from the pending list. f.mu must be held.
func (t *fakeTimer) disarm() bool {
	if !t.armed {
		return false
	}
	f := t.clock
	if i := slices.Index(f.pending, t); i >= 0 {
		f.pending = slices.Delete(f.pending, i, i+1)
	}
	t.armed = false
	return true
}
