package workqueue_test

import (
	"os"
	"runtime"
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/queuetest"
)

var epoch = time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC)

// newQueue returns a queue on the real clock, shut down when t ends.
func newQueue(t *testing.T) *workqueue.Queue[string] {
	t.Helper()
	q := workqueue.New(workqueue.Options[string]{})
	t.Cleanup(q.ShutDown)
	return q
}

// getReady is q.Get for a test that drives q from one goroutine, where
// Get must find an item ready: when none is, it fails t rather than
// block until the test times out.
func getReady(t *testing.T, q *workqueue.Queue[string]) (string, bool) {
	t.Helper()
	if q.Len() == 0 {
		t.Fatal("no item is ready: Get would block")
	}
	return q.Get()
}

// TestConformance runs the conformance kit, one subtest per case, with
// the AddAfter cases driven by a fake clock: RunDelaying starts subtests,
// which a synctest bubble does not allow.
func TestConformance(t *testing.T) {
	queuetest.RunPriority(t, func() (workqueue.PriorityInterface[string], func(time.Duration)) {
		clk := clock.NewFake(epoch)
		return workqueue.NewWithClock(workqueue.Options[string]{}, clk), clk.Step
	})
}

// TestConformanceInBubble runs the same cases against queues on the real
// clock in a testing/synctest bubble, as a user of the package can, and as
// the queuetest examples show.
func TestConformanceInBubble(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		err := queuetest.CheckPriority(func() (workqueue.PriorityInterface[string], func(time.Duration)) {
			return workqueue.New(workqueue.Options[string]{}), step
		})
		if err != nil {
			t.Error(err)
		}
	})
}

func TestShutDownWithDrainWaitsForDone(t *testing.T) {
	q := newQueue(t)
	q.Add("a")
	q.Add("b")
	if _, ok := getReady(t, q); !ok {
		t.Fatal("Get failed")
	}
	drained := make(chan struct{})
	go func() {
		q.ShutDownWithDrain()
		close(drained)
	}()
	deadline := time.Now().Add(30 * time.Second)
	for !q.ShuttingDown() {
		// ShuttingDown turns true under the same lock hold in which the
		// drain starts waiting.
		if time.Now().After(deadline) {
			t.Fatal("ShuttingDown still false 30s after ShutDownWithDrain was called")
		}
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
	select {
	case <-drained:
	case <-time.After(30 * time.Second):
		t.Fatal("ShutDownWithDrain had not returned 30s after the last item was done")
	}
	if _, ok := q.Get(); ok {
		t.Fatal("Get after drain returned an item")
	}
}

// TestSteadyStateAllocations checks the zero-allocation claim of the docs
// for Add, Get, Done and AddAfter once buffers have grown. It runs in a
// synctest bubble, so the delays pass at once on the real clock.
func TestSteadyStateAllocations(t *testing.T) {
	if testing.CoverMode() != "" {
		t.Skip("coverage instrumentation allocates")
	}
	synctest.Test(t, steadyStateAllocations)
}

func steadyStateAllocations(t *testing.T) {
	q := newQueue(t)
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
		step(7 * time.Second)
		for range keys {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	cycle() // grow the buffers
	if a := testing.AllocsPerRun(20, cycle); a != 0 {
		t.Errorf("allocations per cycle of %d items = %v, want 0", len(keys), a)
	}

	// The same with priorities: a low backlog, raised in part, normal
	// and high items, re-adds while processing at other priorities, and
	// delayed adds at low priority.
	prios := [...]int{workqueue.PriorityLow, workqueue.PriorityNormal, 5}
	cycle = func() {
		for i, k := range keys {
			q.AddWithPriority(k, prios[i%len(prios)])
		}
		for i, k := range keys {
			if i%4 == 0 {
				q.AddWithPriority(k, 10) // raise
			}
		}
		for i := range keys {
			k, _ := q.Get()
			q.AddWithPriority(k, prios[i%len(prios)]) // re-add while processing
			q.Done(k)
		}
		for range keys {
			k, _ := q.Get()
			q.Done(k)
		}
		for i, k := range keys {
			q.AddAfterWithPriority(k, time.Duration(1+i%7)*time.Second, workqueue.PriorityLow)
		}
		step(7 * time.Second)
		for range keys {
			k, _ := q.Get()
			q.Done(k)
		}
	}
	cycle()
	if a := testing.AllocsPerRun(20, cycle); a != 0 {
		t.Errorf("allocations per cycle of %d items with priorities = %v, want 0", len(keys), a)
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
	rounds := 0
	res, err := queuetest.Stress(func() workqueue.Interface[string] {
		// Every other queue records metrics, so that their bookkeeping
		// (the list of processing entries) runs under the race detector
		// too, with a short update period so that the periodic update
		// does run during the round.
		rounds++
		if rounds%2 == 0 {
			return workqueue.New(workqueue.Options[string]{Metrics: &recorder{}, MetricsUpdatePeriod: time.Millisecond})
		}
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
	q := newQueue(t)
	for round := range 3 {
		const n = 10_000
		for i := range n {
			q.Add(strconv.Itoa(i))
		}
		for i := range n {
			item, ok := getReady(t, q)
			if !ok || item != strconv.Itoa(i) {
				t.Fatalf("round %d: Get = %q, %v; want %d", round, item, ok, i)
			}
			if i%2 == 0 {
				q.Add(item) // re-queued after Done
			}
			q.Done(item)
		}
		for i := 0; i < n; i += 2 {
			item, _ := getReady(t, q)
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
	q := newQueue(t)
	const n = 3000
	for i := range n {
		q.Add(strconv.Itoa(i))
	}
	for range n {
		item, _ := getReady(t, q)
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
		item, ok := getReady(t, q)
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
