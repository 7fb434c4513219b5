package queuetest

import (
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// NewPriorityQueue returns a fresh, empty, running queue with priorities
// and a function that advances the queue's clock by d, as for
// [NewDelayingQueue].
type NewPriorityQueue func() (q workqueue.PriorityInterface[string], advance func(d time.Duration))

type priorityCase struct {
	name string
	run  func(q workqueue.PriorityInterface[string], advance func(time.Duration)) error
}

// RunPriority runs the core, AddAfter and priority conformance cases
// against queues made by newQueue, one subtest per case. Subtests cannot
// run in a testing/synctest bubble; there, use [CheckPriority].
func RunPriority(t *testing.T, newQueue NewPriorityQueue) {
	t.Helper()
	RunDelaying(t, func() (workqueue.DelayingInterface[string], func(time.Duration)) { return newQueue() })
	for _, c := range priorityCases {
		t.Run(c.name, func(t *testing.T) {
			q, advance := newQueue()
			defer q.ShutDown()
			if err := c.run(q, advance); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckPriority is the error-returning form of RunPriority.
func CheckPriority(newQueue NewPriorityQueue) error {
	errs := []error{CheckDelaying(func() (workqueue.DelayingInterface[string], func(time.Duration)) { return newQueue() })}
	for _, c := range priorityCases {
		q, advance := newQueue()
		if err := c.run(q, advance); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
		q.ShutDown()
	}
	return errors.Join(errs...)
}

func addp(q workqueue.PriorityAdder[string], prio int, items ...string) func() error {
	return func() error {
		for _, it := range items {
			q.AddWithPriority(it, prio)
		}
		return nil
	}
}

// getAll gets and finishes every item in want, in order.
func getAll(q workqueue.Interface[string], want ...string) func() error {
	return func() error {
		for _, w := range want {
			if err := expectGet(q, w); err != nil {
				return err
			}
			q.Done(w)
		}
		return expectLen(q, 0)
	}
}

var priorityCases = []priorityCase{
	{"higher priority first, fifo within a priority", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(addp(q, workqueue.PriorityLow, "l1", "l2"), add(q, "n1"), addp(q, 10, "h1"),
			addp(q, workqueue.PriorityLow, "l3"), add(q, "n2"), addp(q, 10, "h2"), length(q, 7),
			getAll(q, "h1", "h2", "n1", "n2", "l1", "l2", "l3"))
	}},
	{"one priority throughout is fifo", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(addp(q, workqueue.PriorityLow, "c", "a", "b"), getAll(q, "c", "a", "b"))
	}},
	{"adds of a ready item collapse at any priority", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(addp(q, workqueue.PriorityLow, "a", "b"), add(q, "a"), addp(q, 3, "a"), addp(q, workqueue.PriorityLow, "b"),
			length(q, 2), getAll(q, "a", "b"))
	}},
	{"a higher priority raises a ready item to the back of its line", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(addp(q, workqueue.PriorityLow, "x", "y", "z"), add(q, "n"), add(q, "y"),
			getAll(q, "n", "y", "x", "z"))
	}},
	{"a lower priority never lowers a ready item", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(add(q, "a", "b"), addp(q, workqueue.PriorityLow, "c"), addp(q, workqueue.PriorityLow, "a"),
			getAll(q, "a", "b", "c"))
	}},
	{"an add while processing re-queues at its own priority", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(addp(q, 5, "p"), get(q, "p"), addp(q, workqueue.PriorityLow, "p"), addp(q, 1, "p"),
			addp(q, workqueue.PriorityLow, "p"), add(q, "q"), addp(q, 2, "r"), length(q, 2), done(q, "p"),
			length(q, 3), getAll(q, "r", "p", "q"))
	}},
	{"a processing item is not handed out again before Done at any priority", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		return seq(add(q, "a"), get(q, "a"), addp(q, 100, "a"), length(q, 0), addp(q, workqueue.PriorityLow, "b"),
			get(q, "b"), length(q, 0), done(q, "a"), getAll(q, "a"))
	}},
	{"a delayed item keeps its priority", func(q workqueue.PriorityInterface[string], advance func(time.Duration)) error {
		q.AddWithPriority("backlog", workqueue.PriorityLow)
		q.AddAfterWithPriority("d", time.Second, workqueue.PriorityNormal)
		q.AddAfterWithPriority("low", time.Second, workqueue.PriorityLow)
		advance(time.Second)
		return seq(length(q, 3), getAll(q, "d", "backlog", "low"))
	}},
	{"the highest priority of delayed adds wins", func(q workqueue.PriorityInterface[string], advance func(time.Duration)) error {
		q.AddWithPriority("n", workqueue.PriorityNormal)
		q.AddAfterWithPriority("e", time.Second, workqueue.PriorityLow)
		q.AddAfterWithPriority("e", time.Hour, 7)
		q.AddAfterWithPriority("f", time.Second, 7)
		q.AddAfterWithPriority("f", time.Second/2, workqueue.PriorityLow)
		advance(time.Second) // f is ready first, at half a second
		return seq(length(q, 3), getAll(q, "f", "e", "n"))
	}},
	{"a delayed add raises a ready item when its time comes", func(q workqueue.PriorityInterface[string], advance func(time.Duration)) error {
		q.AddWithPriority("a", workqueue.PriorityLow)
		q.AddWithPriority("b", workqueue.PriorityLow)
		q.AddAfterWithPriority("b", time.Second, workqueue.PriorityNormal)
		if err := seq(length(q, 2), get(q, "a"), done(q, "a")); err != nil {
			return err
		}
		q.AddWithPriority("c", workqueue.PriorityLow)
		advance(time.Second)
		return seq(length(q, 2), getAll(q, "b", "c"))
	}},
	{"rate-limited adds keep their priority", func(q workqueue.PriorityInterface[string], advance func(time.Duration)) error {
		q.AddWithPriority("old", workqueue.PriorityLow)
		q.AddRateLimitedWithPriority("f", workqueue.PriorityNormal)
		q.AddRateLimitedWithPriority("g", workqueue.PriorityLow)
		advance(time.Hour) // longer than any first delay of a sane limiter
		q.Forget("f")
		q.Forget("g")
		return seq(length(q, 3), getAll(q, "f", "old", "g"))
	}},
	{"ShutDown keeps ready items of every priority", func(q workqueue.PriorityInterface[string], _ func(time.Duration)) error {
		q.AddWithPriority("l", workqueue.PriorityLow)
		q.AddWithPriority("h", 1)
		q.ShutDown()
		q.AddWithPriority("x", 100)
		if err := seq(length(q, 2), get(q, "h"), get(q, "l")); err != nil {
			return err
		}
		if item, ok := q.Get(); ok {
			return fmt.Errorf("Get after the backlog = %q, true; want shutdown", item)
		}
		return nil
	}},
}
