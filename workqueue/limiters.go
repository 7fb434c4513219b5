package workqueue

import (
	"math"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// RateLimiter decides how long an item that failed waits before it is
// retried. Implementations must be safe for concurrent use.
type RateLimiter[T comparable] interface {
	// When records a failure of item and returns how long to wait before
	// retrying it.
	When(item T) time.Duration
	// Forget drops what the limiter knows about item, typically because
	// it was processed successfully.
	Forget(item T)
	// NumRequeues returns the number of failures counted for item.
	NumRequeues(item T) int
}

// Defaults of the limiters' options, and so of [DefaultLimiter].
const (
	// DefaultBaseDelay is the default [ExponentialOptions].Base.
	DefaultBaseDelay = 5 * time.Millisecond
	// DefaultMaxDelay is the default [ExponentialOptions].Max.
	DefaultMaxDelay = 1000 * time.Second
	// DefaultQPS is the default [BucketOptions].QPS.
	DefaultQPS = 10
	// DefaultBurst is the default [BucketOptions].Burst.
	DefaultBurst = 100
)

// DefaultLimiter returns the limiter a [Queue] uses when its options name
// none: the larger of a per-item exponential backoff from 5ms to 1000s
// ([ExponentialLimiter] with zero options) and an overall token bucket of
// 10 retries per second with a burst of 100 ([BucketLimiter] with zero
// options). Each call returns a limiter with its own state.
func DefaultLimiter[T comparable]() RateLimiter[T] { return defaultLimiter[T](clock.Real{}) }

// defaultLimiter is DefaultLimiter on the clock c.
func defaultLimiter[T comparable](c clock.Clock) RateLimiter[T] {
	return NewMaxOfLimiter(
		newExponentialLimiter[T](ExponentialOptions{}, c),
		newBucketLimiter[T](BucketOptions{}, c),
	)
}

// failures tracks per-item failures so that only failures separated by
// the backoff they caused are counted. A failure reported while the
// previous delay has not yet run out (the item was re-added by an
// unrelated event and failed again) returns the rest of that delay and
// does not grow it. Backoff therefore grows with time spent failing, not
// with the rate of events that re-trigger a failing item.
type failures[T comparable] struct {
	mu    sync.Mutex
	clock clock.Clock
	items map[T]*failure
	peak  int // the most items counted since the map was last released
}

type failure struct {
	count int
	until time.Time // end of the delay returned for the last counted failure
}

func newFailures[T comparable](c clock.Clock) failures[T] {
	return failures[T]{clock: c, items: make(map[T]*failure)}
}

// when counts a failure of item unless its previous delay is still
// running, and returns the delay: delay(count) for a counted failure, the
// remaining time otherwise.
func (f *failures[T]) when(item T, delay func(count int) time.Duration) time.Duration {
	now := f.clock.Now()
	f.mu.Lock()
	defer f.mu.Unlock()
	st, ok := f.items[item]
	if !ok {
		st = &failure{}
		f.items[item] = st
		f.peak = max(f.peak, len(f.items))
	} else if now.Before(st.until) {
		return st.until.Sub(now)
	}
	st.count++
	d := delay(st.count)
	st.until = now.Add(d)
	return d
}

func (f *failures[T]) forget(item T) {
	f.mu.Lock()
	delete(f.items, item)
	if len(f.items) == 0 && f.peak > releaseAbove {
		// Go maps keep their size: release it.
		f.items, f.peak = make(map[T]*failure), 0
	}
	f.mu.Unlock()
}

func (f *failures[T]) num(item T) int {
	f.mu.Lock()
	defer f.mu.Unlock()
	if st, ok := f.items[item]; ok {
		return st.count
	}
	return 0
}

// ExponentialOptions configures an [ExponentialLimiter]. The zero value
// is valid.
type ExponentialOptions struct {
	// Base is the delay after the first failure. Default 5ms.
	Base time.Duration
	// Max caps the delay. Default 1000s.
	Max time.Duration
}

// ExponentialLimiter is a per-item exponential backoff: the n-th counted
// failure of an item waits Base·2ⁿ⁻¹, at most Max.
//
// A failure reported while the item's previous delay is still running is
// not counted: When returns the rest of that delay, and NumRequeues does
// not change. Spurious re-adds (an item re-triggered by watch events while
// it backs off, failing each time) therefore cannot inflate its backoff
// (kubernetes/kubernetes#132805). Safe for concurrent use; create with
// [NewExponentialLimiter], the zero value is not usable.
type ExponentialLimiter[T comparable] struct {
	base, max time.Duration
	f         failures[T]
}

// NewExponentialLimiter returns an ExponentialLimiter configured by opts.
func NewExponentialLimiter[T comparable](opts ExponentialOptions) *ExponentialLimiter[T] {
	return newExponentialLimiter[T](opts, clock.Real{})
}

// newExponentialLimiter is NewExponentialLimiter on the clock c.
func newExponentialLimiter[T comparable](opts ExponentialOptions, c clock.Clock) *ExponentialLimiter[T] {
	l := &ExponentialLimiter[T]{base: opts.Base, max: opts.Max, f: newFailures[T](c)}
	if l.base <= 0 {
		l.base = DefaultBaseDelay
	}
	if l.max <= 0 {
		l.max = DefaultMaxDelay
	}
	return l
}

// When counts a failure of item (see [ExponentialLimiter]) and returns the
// delay before its retry.
func (l *ExponentialLimiter[T]) When(item T) time.Duration { return l.f.when(item, l.delay) }

func (l *ExponentialLimiter[T]) delay(count int) time.Duration {
	shift := count - 1
	if shift >= 62 || l.base > time.Duration(math.MaxInt64>>shift) {
		return l.max
	}
	return min(l.base<<shift, l.max)
}

// Forget resets item's failure count.
func (l *ExponentialLimiter[T]) Forget(item T) { l.f.forget(item) }

// NumRequeues returns the number of counted failures of item since it was
// last forgotten.
func (l *ExponentialLimiter[T]) NumRequeues(item T) int { return l.f.num(item) }

// FastSlowOptions configures a [FastSlowLimiter]. The zero value is valid.
type FastSlowOptions struct {
	// Fast is the delay of the first FastAttempts failures. Default 5ms.
	Fast time.Duration
	// Slow is the delay of every later failure. Default 10s.
	Slow time.Duration
	// FastAttempts is the number of failures retried after Fast.
	// Default 5.
	FastAttempts int
}

// FastSlowLimiter retries an item quickly a few times, then slowly. It
// counts failures as [ExponentialLimiter] does, so a failure during a
// running delay neither counts nor moves the item to the slow phase. Safe
// for concurrent use; create with [NewFastSlowLimiter], the zero value is
// not usable.
type FastSlowLimiter[T comparable] struct {
	fast, slow time.Duration
	attempts   int
	f          failures[T]
}

// NewFastSlowLimiter returns a FastSlowLimiter configured by opts.
func NewFastSlowLimiter[T comparable](opts FastSlowOptions) *FastSlowLimiter[T] {
	l := &FastSlowLimiter[T]{fast: opts.Fast, slow: opts.Slow, attempts: opts.FastAttempts, f: newFailures[T](clock.Real{})}
	if l.fast <= 0 {
		l.fast = 5 * time.Millisecond
	}
	if l.slow <= 0 {
		l.slow = 10 * time.Second
	}
	if l.attempts <= 0 {
		l.attempts = 5
	}
	return l
}

// When counts a failure of item and returns Fast for the first
// FastAttempts failures, Slow after.
func (l *FastSlowLimiter[T]) When(item T) time.Duration {
	return l.f.when(item, func(count int) time.Duration {
		if count <= l.attempts {
			return l.fast
		}
		return l.slow
	})
}

// Forget resets item's failure count.
func (l *FastSlowLimiter[T]) Forget(item T) { l.f.forget(item) }

// NumRequeues returns the number of counted failures of item.
func (l *FastSlowLimiter[T]) NumRequeues(item T) int { return l.f.num(item) }

// BucketOptions configures a [BucketLimiter]. The zero value is valid.
type BucketOptions struct {
	// QPS is the sustained number of retries per second, over all items.
	// Default 10.
	QPS float64
	// Burst is the number of retries allowed at once after a quiet
	// period. Default 100.
	Burst int
}

// BucketLimiter is a token bucket shared by all items: it caps the overall
// retry rate, whatever the item. Each When takes a token, possibly one
// that will only exist in the future, and returns how long until it does.
// It keeps no per-item state, so Forget does nothing and NumRequeues is
// always 0. Safe for concurrent use; create with [NewBucketLimiter], the
// zero value is not usable.
type BucketLimiter[T comparable] struct {
	mu     sync.Mutex
	clock  clock.Clock
	qps    float64
	burst  float64
	tokens float64   // may be negative: tokens promised to earlier callers
	last   time.Time // time tokens was computed at
}

// NewBucketLimiter returns a full BucketLimiter configured by opts.
func NewBucketLimiter[T comparable](opts BucketOptions) *BucketLimiter[T] {
	return newBucketLimiter[T](opts, clock.Real{})
}

// newBucketLimiter is NewBucketLimiter on the clock c.
func newBucketLimiter[T comparable](opts BucketOptions, c clock.Clock) *BucketLimiter[T] {
	l := &BucketLimiter[T]{clock: c, qps: opts.QPS, burst: float64(opts.Burst)}
	if l.qps <= 0 {
		l.qps = DefaultQPS
	}
	if l.burst <= 0 {
		l.burst = DefaultBurst
	}
	l.tokens = l.burst
	l.last = l.clock.Now()
	return l
}

// When takes a token and returns the time until it is available.
func (l *BucketLimiter[T]) When(T) time.Duration {
	now := l.clock.Now()
	l.mu.Lock()
	defer l.mu.Unlock()
	if elapsed := now.Sub(l.last); elapsed > 0 {
		l.tokens = min(l.burst, l.tokens+elapsed.Seconds()*l.qps)
		l.last = now
	}
	l.tokens--
	if l.tokens >= 0 {
		return 0
	}
	return time.Duration(math.Ceil(-l.tokens / l.qps * float64(time.Second)))
}

// Forget does nothing: the bucket has no per-item state.
func (l *BucketLimiter[T]) Forget(T) {}

// NumRequeues returns 0: the bucket has no per-item state.
func (l *BucketLimiter[T]) NumRequeues(T) int { return 0 }

// MaxOfLimiter combines limiters: it returns the longest of their delays
// and the largest of their counts. Safe for concurrent use if its
// limiters are; create with [NewMaxOfLimiter]. The zero value combines no
// limiter and always returns 0.
type MaxOfLimiter[T comparable] struct {
	limiters []RateLimiter[T]
}

// NewMaxOfLimiter returns a MaxOfLimiter over limiters. With no limiter,
// every delay is 0.
func NewMaxOfLimiter[T comparable](limiters ...RateLimiter[T]) *MaxOfLimiter[T] {
	return &MaxOfLimiter[T]{limiters: append([]RateLimiter[T](nil), limiters...)}
}

// When asks every limiter (so each records the failure) and returns the
// longest delay.
func (l *MaxOfLimiter[T]) When(item T) time.Duration {
	var d time.Duration
	for _, r := range l.limiters {
		d = max(d, r.When(item))
	}
	return d
}

// Forget forgets item in every limiter.
func (l *MaxOfLimiter[T]) Forget(item T) {
	for _, r := range l.limiters {
		r.Forget(item)
	}
}

// NumRequeues returns the largest count among the limiters.
func (l *MaxOfLimiter[T]) NumRequeues(item T) int {
	n := 0
	for _, r := range l.limiters {
		n = max(n, r.NumRequeues(item))
	}
	return n
}
