package workqueue_test

import (
	"fmt"
	"os"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/queuetest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

func newFakeQueue(t *testing.T) (*workqueue.Queue[string], *clock.Fake) {
	t.Helper()
	clk := clock.NewFake(epoch)
	q := workqueue.New(workqueue.Options[string]{Clock: clk})
	t.Cleanup(q.ShutDown)
	return q, clk
}

func TestConformance(t *testing.T) {
	queuetest.RunDelaying(t, func() (workqueue.DelayingInterface[string], func(time.Duration)) {
		clk := clock.NewFake(epoch)
		return workqueue.New(workqueue.Options[string]{Clock: clk}), clk.Step
	})
}

// TestScript runs small scripts, one operation per line:
//
//	add X | after X DUR | ratelimited X | forget X | step DUR
//	get X          (an item must be ready and be X; it becomes processing)
//	done X
//	len N | requeues X N
//	shutdown | closed (Get reports shutdown)
func TestScript(t *testing.T) {
	tests := []struct {
		name, script string
	}{
		{"fifo", `
			add a
			add b
			add c
			get a
			get b
			get c
			len 0`},
		{"dedup while ready", `
			add a
			add a
			add b
			add a
			len 2
			get a
			get b
			len 0`},
		{"add while processing re-queues after done", `
			add a
			get a
			add a
			add a
			len 0
			done a
			len 1
			get a
			done a
			len 0`},
		{"re-queued item goes to the back", `
			add a
			add b
			get a
			add a
			done a
			add c
			get b
			get a
			get c`},
		{"a second done is harmless", `
			add a
			get a
			done a
			done a
			len 0
			add a
			len 1
			get a
			done a
			done a
			add b
			get b`},
		{"delay fires at its time, not before", `
			after a 10s
			step 9s
			len 0
			step 1s
			get a`},
		{"earlier time wins", `
			after a 10s
			after a 1s
			after a 20s
			step 1s
			get a
			done a
			step 1h
			len 0`},
		{"delays come out in time order, ties in call order", `
			after c 3s
			after a 1s
			after b 3s
			after d 2s
			step 5s
			get a
			get d
			get c
			get b`},
		{"non-positive delay adds now and cancels the wait", `
			after a 1h
			after a 0s
			get a
			done a
			step 1h
			len 0`},
		{"rate limited retries back off exponentially", `
			ratelimited a
			requeues a 1
			step 4ms
			len 0
			step 1ms
			get a
			ratelimited a
			done a
			requeues a 2
			step 9ms
			len 0
			step 1ms
			get a
			forget a
			requeues a 0
			done a`},
		{"failures during a running backoff are not counted", `
			ratelimited a
			ratelimited a
			ratelimited a
			requeues a 1
			step 5ms
			get a
			ratelimited a
			requeues a 2
			done a`},
		{"shutdown drops delays and ignores adds", `
			add a
			after b 1s
			shutdown
			add c
			after d 0s
			ratelimited e
			step 1s
			get a
			closed`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			q, clk := newFakeQueue(t)
			for n, line := range strings.Split(strings.TrimSpace(tt.script), "\n") {
				f := strings.Fields(line)
				fail := func(format string, args ...any) {
					t.Helper()
					t.Fatalf("line %d %q: %s", n+1, strings.TrimSpace(line), fmt.Sprintf(format, args...))
				}
				dur := func(s string) time.Duration {
					d, err := time.ParseDuration(s)
					if err != nil {
						fail("%v", err)
					}
					return d
				}
				num := func(s string) int {
					v, err := strconv.Atoi(s)
					if err != nil {
						fail("%v", err)
					}
					return v
				}
				switch f[0] {
				case "add":
					q.Add(f[1])
				case "after":
					q.AddAfter(f[1], dur(f[2]))
				case "ratelimited":
					q.AddRateLimited(f[1])
				case "forget":
					q.Forget(f[1])
				case "step":
					clk.Step(dur(f[1]))
				case "get":
					if q.Len() == 0 {
						fail("no item ready")
					}
					if item, ok := q.Get(); !ok || item != f[1] {
						fail("Get = %q, %v", item, ok)
					}
				case "done":
					q.Done(f[1])
				case "len":
					if got := q.Len(); got != num(f[1]) {
						fail("Len = %d", got)
					}
				case "requeues":
					if got := q.NumRequeues(f[1]); got != num(f[2]) {
						fail("NumRequeues = %d", got)
					}
				case "shutdown":
					q.ShutDown()
				case "closed":
					if item, ok := q.Get(); ok {
						fail("Get = %q, true; want shutdown", item)
					}
				default:
					fail("unknown command")
				}
			}
		})
	}
}

func TestShutDownWithDrainWaitsForDone(t *testing.T) {
	q, _ := newFakeQueue(t)
	q.Add("a")
	q.Add("b")
	if _, ok := q.Get(); !ok {
		t.Fatal("Get failed")
	}
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	for !q.ShuttingDown() {
		// ShuttingDown turns true under the same lock hold in which the
		// drain starts waiting.
		runtime.Gosched()
	}
	// b is ready, not processing: the drain waits only for a, and a
	// worker may still take b.
	item, ok := q.Get()
	if !ok || item != "b" {
		t.Fatalf("Get during drain = %q, %v; want b", item, ok)
	}
	q.Done("a")
	select {
	case <-drained:
		t.Fatal("drain returned while b was processing")
	default:
	}
	q.Done("b")
	<-drained
	if _, ok := q.Get(); ok {
		t.Fatal("Get after drain returned an item")
	}
}

// TestSteadyStateAllocations checks the zero-allocation claim of the docs
// for Add, Get, Done and AddAfter once buffers have grown.
func TestSteadyStateAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	q, clk := newFakeQueue(t)
	keys := make([]string, 256)
	for i := range keys {
		keys[i] = "key-" + strconv.Itoa(i)
	}
	cycle := func() {
		for _, k := range keys {
			q.Add(k)
		}
		for range keys {
			k, _ := q.Get()
			q.Add(k) // re-add while processing
			q.Done(k)
		}
		for range keys {
			k, _ := q.Get()
			q.Done(k)
		}
		for i, k := range keys {
			q.AddAfter(k, time.Duration(1+i%7)*time.Second)
		}
		clk.Step(7 * time.Second)
		for range keys {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	cycle() // grow the buffers
	if a := testing.AllocsPerRun(20, cycle); a != 0 {
		t.Errorf("allocations per cycle of %d items = %v, want 0", len(keys), a)
	}
}

// TestProperty is the randomized property test of the invariants (see
// queuetest.Stress) against Queue, including AddAfter on the real clock.
// It runs 10⁶ producer sequences (plus the worker sequences they cause),
// or 5·10⁴ with -short.
func TestProperty(t *testing.T) {
	n := 1_000_000
	if testing.Short() {
		n = 50_000
	}
	if s := os.Getenv("LOOM_STRESS_SEQUENCES"); s != "" {
		v, err := strconv.Atoi(s)
		if err != nil {
			t.Fatalf("LOOM_STRESS_SEQUENCES: %v", err)
		}
		n = v
	}
	start := time.Now()
	seed := uint64(start.UnixNano())
	res, err := queuetest.Stress(func() workqueue.Interface[string] {
		return workqueue.New(workqueue.Options[string]{})
	}, queuetest.StressOptions{Sequences: n, Seed: seed})
	t.Logf("seed %d: %d rounds, %d sequences (%d producer, %d worker), %d operations, %d violations in %v",
		seed, res.Rounds, res.Sequences(), res.ProducerSequences, res.WorkerSequences, res.Operations, res.Violations,
		time.Since(start).Round(time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
}

// TestShrinkAfterBurst drains a backlog larger than the buffers a queue
// keeps, so that the queue releases them, and checks that it still works.
func TestShrinkAfterBurst(t *testing.T) {
	q, _ := newFakeQueue(t)
	for round := range 3 {
		const n = 10_000
		for i := range n {
			q.Add(strconv.Itoa(i))
		}
		for i := range n {
			item, ok := q.Get()
			if !ok || item != strconv.Itoa(i) {
				t.Fatalf("round %d: Get = %q, %v; want %d", round, item, ok, i)
			}
			if i%2 == 0 {
				q.Add(item) // re-queued after Done
			}
			q.Done(item)
		}
		for i := 0; i < n; i += 2 {
			item, _ := q.Get()
			if item != strconv.Itoa(i) {
				t.Fatalf("round %d: re-queued Get = %q, want %d", round, item, i)
			}
			q.Done(item)
		}
		if l := q.Len(); l != 0 {
			t.Fatalf("round %d: Len = %d", round, l)
		}
	}
}

// TestManyFinishedItems finishes more items than the queue keeps entries
// for, then re-adds them in another order: the order and the counts must
// not depend on which entries were kept.
func TestManyFinishedItems(t *testing.T) {
	q, _ := newFakeQueue(t)
	const n = 3000
	for i := range n {
		q.Add(strconv.Itoa(i))
	}
	for range n {
		item, _ := q.Get()
		q.Done(item)
	}
	for i := n - 1; i >= 0; i-- {
		q.Add(strconv.Itoa(i))
		q.Add(strconv.Itoa(i))
	}
	if l := q.Len(); l != n {
		t.Fatalf("Len = %d, want %d", l, n)
	}
	for i := n - 1; i >= 0; i-- {
		item, ok := q.Get()
		if !ok || item != strconv.Itoa(i) {
			t.Fatalf("Get = %q, %v; want %d", item, ok, i)
		}
		q.Done(item)
		q.Done(item) // harmless
	}
	if l := q.Len(); l != 0 {
		t.Fatalf("Len = %d after draining", l)
	}
}
