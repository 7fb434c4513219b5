package workqueue

import (
	"strconv"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// TestReleaseAfterBurst checks that after a burst of waiting items and of
// counted failures, larger than what is kept for steady state, the
// delays' heap, index and free list, and the failures' map, are released
// once empty, and that both still work afterwards.
func TestReleaseAfterBurst(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		q := New(Options[string]{})
		defer q.ShutDown()
		f := newFailures[string](clock.Real{})
		delay := func(int) time.Duration { return time.Second }
		for round := range 2 {
			const n = 4 * releaseAbove
			for i := range n {
				q.AddAfter(strconv.Itoa(i), time.Second)
				f.when(strconv.Itoa(i), delay)
			}
			time.Sleep(2 * time.Second)
			synctest.Wait()
			if l := q.Len(); l != n {
				t.Fatalf("round %d: Len = %d after the wait, want %d", round, l, n)
			}
			for range n {
				item, _ := q.Get()
				q.Done(item)
				f.forget(item)
			}
			q.mu.Lock()
			heap, free, peak, index := q.delay.heap, q.delay.free, q.delay.peak, len(q.delay.byItem)
			q.mu.Unlock()
			if heap != nil || free != nil || peak != 0 || index != 0 {
				t.Errorf("round %d: delays kept heap cap %d, free list %d, peak %d, index %d after the burst", round, cap(heap), len(free), peak, index)
			}
			f.mu.Lock()
			fpeak, fitems := f.peak, len(f.items)
			f.mu.Unlock()
			if fpeak != 0 || fitems != 0 {
				t.Errorf("round %d: failures kept peak %d, %d items after the burst", round, fpeak, fitems)
			}
		}
		// A small number stays put: steady state does not allocate anew.
		q.AddAfter("a", time.Second)
		q.AddAfter("b", 2*time.Second)
		time.Sleep(1500 * time.Millisecond)
		synctest.Wait()
		item, _ := q.Get()
		q.Done(item)
		q.mu.Lock()
		kept := q.delay.heap != nil && q.delay.peak == 2
		q.mu.Unlock()
		if item != "a" || !kept {
			t.Errorf("Get = %q, heap kept %t; want a, true", item, kept)
		}
	})
}

// TestReleaseSlabAfterBurst checks that a queue that drains a burst of
// more than twice the idle entries it keeps releases its slab and map,
// and that one that held fewer keeps them (steady state does not
// allocate anew).
func TestReleaseSlabAfterBurst(t *testing.T) {
	for _, tc := range []struct {
		n        int
		released bool
	}{
		{n: 3000, released: true}, // kept with the old threshold of 4,096
		{n: maxIdle, released: false},
		{n: 256, released: false},
	} {
		q := New(Options[string]{})
		for i := range tc.n {
			q.Add(strconv.Itoa(i))
		}
		for range tc.n {
			item, _ := q.Get()
			q.Done(item)
		}
		q.mu.Lock()
		slab, items := cap(q.slab), len(q.items)
		q.mu.Unlock()
		if released := slab == 0 && items == 0; released != tc.released {
			t.Errorf("burst of %d: slab cap %d, %d items kept; want released %v", tc.n, slab, items, tc.released)
		}
		// The queue still works.
		q.Add("x")
		if item, ok := q.Get(); !ok || item != "x" {
			t.Errorf("burst of %d: Get = %q, %v after it", tc.n, item, ok)
		}
		q.Done("x")
		q.ShutDown()
	}
}
