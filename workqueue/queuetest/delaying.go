package queuetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// NewDelayingQueue returns a fresh, empty, running delaying queue and a
// function that advances the queue's clock by d. advance must fire every
// delay that falls due before it returns, as a fake clock does.
type NewDelayingQueue func() (q workqueue.DelayingInterface[string], advance func(d time.Duration))

type delayingCase struct {
	name string
	run  func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error
}

// RunDelaying runs the core conformance cases and the AddAfter cases
// against queues made by newQueue, one subtest per case. Subtests cannot
// run in a testing/synctest bubble; there, use [CheckDelaying].
func RunDelaying(t *testing.T, newQueue NewDelayingQueue) {
	t.Helper()
	Run(t, func() workqueue.Interface[string] { q, _ := newQueue(); return q })
	for _, c := range delayingCases {
		t.Run(c.name, func(t *testing.T) {
			q, advance := newQueue()
			defer q.ShutDown()
			if err := c.run(q, advance); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckDelaying is the error-returning form of RunDelaying.
func CheckDelaying(newQueue NewDelayingQueue) error {
	errs := []error{Check(func() workqueue.Interface[string] { q, _ := newQueue(); return q })}
	for _, c := range delayingCases {
		q, advance := newQueue()
		if err := c.run(q, advance); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
		q.ShutDown()
	}
	return errors.Join(errs...)
}

var delayingCases = []delayingCase{
	{"AddAfter is not ready before its time", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("a", time.Second)
		advance(999 * time.Millisecond)
		if err := expectLen(q, 0); err != nil {
			return err
		}
		advance(time.Millisecond)
		return seq(length(q, 1), get(q, "a"))
	}},
	{"AddAfter with no delay adds now", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("a", 0)
		q.AddAfter("b", -time.Second)
		return seq(length(q, 2), get(q, "a"), get(q, "b"))
	}},
	{"delayed items become ready in time order", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("c", 3*time.Second)
		q.AddAfter("a", time.Second)
		q.AddAfter("b", 2*time.Second)
		advance(3 * time.Second)
		return seq(length(q, 3), get(q, "a"), get(q, "b"), get(q, "c"))
	}},
	{"an earlier time wins over a later AddAfter", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("a", time.Second)
		q.AddAfter("a", time.Hour)
		advance(time.Second)
		if err := seq(length(q, 1), get(q, "a"), done(q, "a")); err != nil {
			return err
		}
		advance(time.Hour)
		return expectLen(q, 0)
	}},
	{"a later time gives way to an earlier AddAfter", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("a", time.Hour)
		q.AddAfter("a", time.Second)
		advance(time.Second)
		if err := seq(length(q, 1), get(q, "a"), done(q, "a")); err != nil {
			return err
		}
		advance(time.Hour)
		return expectLen(q, 0)
	}},
	{"a delayed Add of a ready item collapses", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.Add("a")
		q.AddAfter("a", time.Second)
		advance(time.Second)
		return seq(length(q, 1), get(q, "a"), length(q, 0))
	}},
	{"a delayed Add of a processing item re-queues after Done", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.Add("a")
		if err := expectGet(q, "a"); err != nil {
			return err
		}
		q.AddAfter("a", time.Second)
		advance(time.Second)
		if err := expectLen(q, 0); err != nil {
			return err
		}
		q.Done("a")
		return seq(length(q, 1), get(q, "a"))
	}},
	{"ShutDown drops waiting items", func(q workqueue.DelayingInterface[string], advance func(time.Duration)) error {
		q.AddAfter("a", time.Second)
		q.ShutDown()
		advance(time.Second)
		if item, ok := q.Get(); ok {
			return fmt.Errorf("Get after ShutDown = %q, true; want shutdown", item)
		}
		q.AddAfter("b", 0)
		return expectLen(q, 0)
	}},
}
