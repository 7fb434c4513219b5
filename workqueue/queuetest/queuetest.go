package queuetest

import (
	"errors"
	"fmt"
	"runtime"
	"testing"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// livenessTimeout bounds how long a case waits for a call that must
// return (a blocked Get after ShutDown, a drain after the last Done). It
// turns a hang into a reported violation; it is not a performance bound.
const livenessTimeout = 30 * time.Second

// drainGrace is how long a case gives ShutDownWithDrain to return
// early, before it calls Done: a drain that does not wait returns within
// microseconds of ShuttingDown turning true, but its goroutine may not
// have run yet when the case looks. A correct queue passes whatever the
// timing; the grace only makes the wrong one's early return seen.
const drainGrace = 200 * time.Millisecond

// NewQueue returns a fresh, empty, running queue.
type NewQueue func() workqueue.Interface[string]

type queueCase struct {
	name string
	run  func(q workqueue.Interface[string]) error
}

// Run runs the conformance cases against queues made by newQueue, one
// subtest per case. Each queue is shut down when its case ends.
func Run(t *testing.T, newQueue NewQueue) {
	t.Helper()
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			q := newQueue()
			defer q.ShutDown()
			if err := c.run(q); err != nil {
				t.Error(err)
			}
		})
	}
}

// Check runs the conformance cases against queues made by newQueue and
// returns all violations joined, or nil.
func Check(newQueue NewQueue) error {
	var errs []error
	for _, c := range cases {
		q := newQueue()
		if err := c.run(q); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
		q.ShutDown()
	}
	return errors.Join(errs...)
}

// expectGet calls Get, which must return want. The cases are
// deterministic, so an item must be ready when expectGet is called; if
// none is, it reports that instead of blocking.
func expectGet(q workqueue.Interface[string], want string) error {
	if q.Len() == 0 {
		return fmt.Errorf("no item ready, want %q", want)
	}
	type res struct {
		item string
		ok   bool
	}
	ch := make(chan res, 1)
	go func() {
		item, ok := q.Get()
		ch <- res{item, ok}
	}()
	select {
	case r := <-ch:
		if !r.ok {
			return fmt.Errorf("Get reported shutdown, want %q", want)
		}
		if r.item != want {
			return fmt.Errorf("Get = %q, want %q", r.item, want)
		}
		return nil
	case <-time.After(livenessTimeout):
		return fmt.Errorf("Get blocked, want %q", want)
	}
}

func expectLen(q workqueue.Interface[string], want int) error {
	if n := q.Len(); n != want {
		return fmt.Errorf("Len = %d, want %d", n, want)
	}
	return nil
}

// seq runs steps in order and returns the first error.
func seq(steps ...func() error) error {
	for _, s := range steps {
		if err := s(); err != nil {
			return err
		}
	}
	return nil
}

func add(q workqueue.Adder[string], items ...string) func() error {
	return func() error {
		for _, it := range items {
			q.Add(it)
		}
		return nil
	}
}

func get(q workqueue.Interface[string], want string) func() error {
	return func() error { return expectGet(q, want) }
}

func done(q workqueue.Consumer[string], item string) func() error {
	return func() error { q.Done(item); return nil }
}

func length(q workqueue.Interface[string], want int) func() error {
	return func() error { return expectLen(q, want) }
}

var cases = []queueCase{
	{"fifo order", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a", "b", "c"), length(q, 3),
			get(q, "a"), get(q, "b"), get(q, "c"), length(q, 0))
	}},
	{"adds of a ready item collapse", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a", "b", "a", "a", "b"), length(q, 2),
			get(q, "a"), get(q, "b"), length(q, 0))
	}},
	{"a processing item is not handed out again before Done", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a"), get(q, "a"), add(q, "a", "a"), length(q, 0),
			add(q, "b"), get(q, "b"), length(q, 0))
	}},
	{"an add while processing re-queues after Done", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a"), get(q, "a"), add(q, "a"), done(q, "a"),
			length(q, 1), get(q, "a"), done(q, "a"), length(q, 0))
	}},
	{"a re-queued item goes to the back", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a", "b"), get(q, "a"), add(q, "a", "c"), done(q, "a"),
			get(q, "b"), get(q, "c"), get(q, "a"))
	}},
	{"done without add forgets the item", func(q workqueue.Interface[string]) error {
		return seq(add(q, "a"), get(q, "a"), done(q, "a"), length(q, 0),
			add(q, "a"), length(q, 1), get(q, "a"))
	}},
	{"done of an unknown item is harmless", func(q workqueue.Interface[string]) error {
		return seq(done(q, "x"), length(q, 0), add(q, "a"), get(q, "a"), done(q, "a"), length(q, 0))
	}},
	{"a blocked Get receives the next Add", func(q workqueue.Interface[string]) error {
		got := make(chan string, 1)
		go func() {
			item, _ := q.Get()
			got <- item
		}()
		q.Add("a")
		select {
		case item := <-got:
			if item != "a" {
				return fmt.Errorf("blocked Get = %q, want %q", item, "a")
			}
			return nil
		case <-time.After(livenessTimeout):
			return errors.New("blocked Get did not receive the Add")
		}
	}},
	{"ShutDown wakes blocked Gets", func(q workqueue.Interface[string]) error {
		const n = 3
		res := make(chan bool, n)
		for range n {
			go func() {
				_, ok := q.Get()
				res <- ok
			}()
		}
		q.ShutDown()
		for range n {
			select {
			case ok := <-res:
				if ok {
					return errors.New("Get on an empty shut-down queue returned an item")
				}
			case <-time.After(livenessTimeout):
				return errors.New("a blocked Get did not return after ShutDown")
			}
		}
		return nil
	}},
	{"after ShutDown adds are ignored and ready items still handed out", func(q workqueue.Interface[string]) error {
		if q.ShuttingDown() {
			return errors.New("ShuttingDown true before ShutDown")
		}
		q.Add("a")
		q.ShutDown()
		if !q.ShuttingDown() {
			return errors.New("ShuttingDown false after ShutDown")
		}
		q.Add("b")
		if err := seq(length(q, 1), get(q, "a")); err != nil {
			return err
		}
		if item, ok := q.Get(); ok {
			return fmt.Errorf("Get after the backlog = %q, true; want shutdown", item)
		}
		q.ShutDown() // twice is harmless
		return nil
	}},
	{"ShutDownWithDrain waits for Done", func(q workqueue.Interface[string]) error {
		q.Add("a")
		q.Add("b")
		if err := seq(get(q, "a"), get(q, "b")); err != nil {
			return err
		}
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		// Once ShuttingDown is true the drain is under way.
		for !q.ShuttingDown() {
			runtime.Gosched()
		}
		select {
		case <-drained:
			return errors.New("ShutDownWithDrain returned while a and b were processing")
		case <-time.After(drainGrace):
		}
		q.Done("a")
		select {
		case <-drained:
			return errors.New("ShutDownWithDrain returned while b was processing")
		case <-time.After(drainGrace):
		}
		q.Done("b")
		select {
		case <-drained:
			return nil
		case <-time.After(livenessTimeout):
			return errors.New("ShutDownWithDrain did not return after the last Done")
		}
	}},
	{"ShutDownWithDrain with nothing processing returns", func(q workqueue.Interface[string]) error {
		q.Add("a") // ready, not processing: the drain does not wait for it
		drained := make(chan struct{})
		go func() {
			q.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
			return nil
		case <-time.After(livenessTimeout):
			return errors.New("ShutDownWithDrain blocked with nothing processing")
		}
	}},
}
