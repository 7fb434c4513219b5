package workqueue_test

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// limiterStep is one call on a limiter: let time pass, then call When
// (want is the delay), Forget (forget) or only check NumRequeues.
type limiterStep struct {
	step     time.Duration
	item     string
	forget   bool
	want     time.Duration
	requeues int
}

// runLimiter runs steps on l. It must run in a synctest bubble, where
// time.Sleep moves the time exactly by its argument.
func runLimiter(t *testing.T, l workqueue.RateLimiter[string], steps []limiterStep) {
	t.Helper()
	for i, s := range steps {
		time.Sleep(s.step)
		if s.forget {
			l.Forget(s.item)
		} else if got := l.When(s.item); got != s.want {
			t.Fatalf("step %d: When(%q) = %v, want %v", i, s.item, got, s.want)
		}
		if got := l.NumRequeues(s.item); got != s.requeues {
			t.Fatalf("step %d: NumRequeues(%q) = %d, want %d", i, s.item, got, s.requeues)
		}
	}
}

func TestLimiters(t *testing.T) {
	ms := time.Millisecond
	tests := []struct {
		name  string
		new   func() workqueue.RateLimiter[string]
		steps []limiterStep
	}{
		{
			name: "exponential defaults double from 5ms",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{})
			},
			steps: []limiterStep{
				{item: "a", want: 5 * ms, requeues: 1},
				{step: 5 * ms, item: "a", want: 10 * ms, requeues: 2},
				{step: 10 * ms, item: "a", want: 20 * ms, requeues: 3},
				{item: "b", want: 5 * ms, requeues: 1}, // per item
				{step: 20 * ms, item: "a", want: 40 * ms, requeues: 4},
				{item: "a", forget: true, requeues: 0},
				{item: "a", want: 5 * ms, requeues: 1},
			},
		},
		{
			name: "exponential: failures during a running delay are not counted",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{Base: 100 * ms})
			},
			steps: []limiterStep{
				{item: "a", want: 100 * ms, requeues: 1},
				{step: 30 * ms, item: "a", want: 70 * ms, requeues: 1},
				{step: 69 * ms, item: "a", want: 1 * ms, requeues: 1},
				{step: 1 * ms, item: "a", want: 200 * ms, requeues: 2},
				{step: 199 * ms, item: "a", want: 1 * ms, requeues: 2},
				{step: 500 * ms, item: "a", want: 400 * ms, requeues: 3},
			},
		},
		{
			name: "exponential caps at max without overflow",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{Base: time.Second, Max: 3 * time.Second})
			},
			steps: func() []limiterStep {
				s := []limiterStep{
					{item: "a", want: time.Second, requeues: 1},
					{step: time.Second, item: "a", want: 2 * time.Second, requeues: 2},
				}
				for i := 3; i <= 100; i++ {
					s = append(s, limiterStep{step: 3 * time.Second, item: "a", want: 3 * time.Second, requeues: i})
				}
				return s
			}(),
		},
		{
			name: "fast then slow",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewFastSlowLimiter[string](workqueue.FastSlowOptions{Fast: ms, Slow: time.Second, FastAttempts: 2})
			},
			steps: []limiterStep{
				{item: "a", want: ms, requeues: 1},
				{step: ms, item: "a", want: ms, requeues: 2},
				{step: ms, item: "a", want: time.Second, requeues: 3},
				{step: 10 * ms, item: "a", want: 990 * ms, requeues: 3}, // not counted
				{step: 990 * ms, item: "a", want: time.Second, requeues: 4},
				{item: "a", forget: true},
				{item: "a", want: ms, requeues: 1},
			},
		},
		{
			name: "fast-slow defaults",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewFastSlowLimiter[string](workqueue.FastSlowOptions{})
			},
			steps: []limiterStep{
				{item: "a", want: 5 * ms, requeues: 1},
				{step: 5 * ms, item: "a", want: 5 * ms, requeues: 2},
				{step: 5 * ms, item: "a", want: 5 * ms, requeues: 3},
				{step: 5 * ms, item: "a", want: 5 * ms, requeues: 4},
				{step: 5 * ms, item: "a", want: 5 * ms, requeues: 5},
				{step: 5 * ms, item: "a", want: 10 * time.Second, requeues: 6},
			},
		},
		{
			name: "bucket: burst, then one token per 1/qps",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewBucketLimiter[string](workqueue.BucketOptions{QPS: 10, Burst: 2})
			},
			steps: []limiterStep{
				{item: "a", want: 0},
				{item: "b", want: 0},
				{item: "c", want: 100 * ms},
				{item: "a", want: 200 * ms},
				{step: 200 * ms, item: "d", want: 100 * ms},
				{step: time.Hour, item: "e", want: 0}, // refilled up to the burst only
				{item: "f", want: 0},
				{item: "g", want: 100 * ms},
				{item: "g", forget: true},
			},
		},
		{
			name: "max-of takes the longest delay and the largest count",
			new: func() workqueue.RateLimiter[string] {
				return workqueue.NewMaxOfLimiter(
					workqueue.RateLimiter[string](workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{Base: ms})),
					workqueue.NewFastSlowLimiter[string](workqueue.FastSlowOptions{Fast: 3 * ms, Slow: 100 * ms, FastAttempts: 1}),
				)
			},
			steps: []limiterStep{
				{item: "a", want: 3 * ms, requeues: 1},
				{step: 3 * ms, item: "a", want: 100 * ms, requeues: 2},
				{step: 100 * ms, item: "a", want: 100 * ms, requeues: 3},
				{item: "a", forget: true},
				{item: "a", want: 3 * ms, requeues: 1},
			},
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			// The limiter is made in the bubble, so it reads the bubble's
			// time from the start.
			synctest.Test(t, func(t *testing.T) { runLimiter(t, tt.new(), tt.steps) })
		})
	}
}

// TestDefaultLimiter observes the queue's default limiter through the
// queue: the first 100 failures of distinct items wait 5ms (exponential
// base, within the bucket's burst); the 101st waits for a bucket token,
// 100ms at 10 qps; a second failure of one item after its delay waits 10ms.
func TestDefaultLimiter(t *testing.T) {
	synctest.Test(t, checkDefaultLimiter)
}

func checkDefaultLimiter(t *testing.T) {
	q := newQueue(t)
	for i := range 101 {
		q.AddRateLimited(strconv.Itoa(i))
	}
	step(5*time.Millisecond - 1)
	if n := q.Len(); n != 0 {
		t.Fatalf("Len before 5ms = %d, want 0", n)
	}
	step(1)
	if n := q.Len(); n != 100 {
		t.Fatalf("Len at 5ms = %d, want 100", n)
	}
	step(95*time.Millisecond - 1)
	if n := q.Len(); n != 100 {
		t.Fatalf("Len before 100ms = %d, want 100", n)
	}
	step(1)
	if n := q.Len(); n != 101 {
		t.Fatalf("Len at 100ms = %d, want 101", n)
	}
	if n := q.NumRequeues("0"); n != 1 {
		t.Fatalf("NumRequeues = %d, want 1", n)
	}
	// Let the bucket refill, then fail item 0 again after its delay.
	step(10 * time.Second)
	q.AddRateLimited("x")
	step(5 * time.Millisecond)
	item, _ := q.Get()
	if item != "0" {
		t.Fatalf("Get = %q, want 0", item)
	}
	q.AddRateLimited("0")
	q.Done("0")
	if n := q.NumRequeues("0"); n != 2 {
		t.Fatalf("NumRequeues = %d, want 2", n)
	}
	if d := workqueue.DefaultLimiter[string]().When("a"); d != workqueue.DefaultBaseDelay {
		t.Fatalf("DefaultLimiter().When = %v, want %v", d, workqueue.DefaultBaseDelay)
	}
}
