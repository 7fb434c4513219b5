package workqueue

import (
	"strconv"
	"testing"
)

// TestRaiseCompacts raises most of a large low-priority backlog, one item
// at a time, and checks that the stale references left behind are
// compacted away rather than kept until the backlog drains, and that the
// order survives.
func TestRaiseCompacts(t *testing.T) {
	q := New(Options[string]{})
	defer q.ShutDown()
	const n = 1000
	for i := range n {
		q.AddWithPriority(strconv.Itoa(i), PriorityLow)
	}
	for i := range n {
		if i%10 != 0 {
			q.AddWithPriority(strconv.Itoa(i), PriorityNormal)
		}
	}
	q.mu.Lock()
	k, _ := q.levelIndex(PriorityLow)
	low := q.levels[k]
	q.mu.Unlock()
	if low.live != n/10 || low.ring.len() > 2*n/10+compactAbove+1 {
		t.Fatalf("low level: %d live, ring of %d; want %d live and stale references compacted", low.live, low.ring.len(), n/10)
	}
	for i := range n {
		if i%10 != 0 {
			if item, _ := q.Get(); item != strconv.Itoa(i) {
				t.Fatalf("Get = %s, want %d", item, i)
			}
		}
	}
	for i := 0; i < n; i += 10 {
		if item, _ := q.Get(); item != strconv.Itoa(i) {
			t.Fatalf("Get = %s, want %d", item, i)
		}
	}
	if l := q.Len(); l != 0 {
		t.Fatalf("Len = %d", l)
	}
}

// TestLevelsReused: a queue that sees many priorities over time, few at
// once, keeps few levels.
func TestLevelsReused(t *testing.T) {
	q := New(Options[string]{})
	defer q.ShutDown()
	for p := range 1000 {
		q.AddWithPriority("a", p%2*PriorityLow)
		q.AddWithPriority("b", p)
		for range 2 {
			item, _ := q.Get()
			q.Done(item)
		}
	}
	q.mu.Lock()
	n := len(q.levels)
	q.mu.Unlock()
	if n > keepLevels {
		t.Fatalf("%d levels after 1000 priorities used two at a time, want at most %d", n, keepLevels)
	}
}

// TestStaleReferenceToReusedEntry: a raised item leaves a stale
// reference; once the item is finished and its entry freed or reused by
// another item, that reference must not hand anything out.
func TestStaleReferenceToReusedEntry(t *testing.T) {
	q := New(Options[string]{})
	defer q.ShutDown()
	// More items than the idle list keeps, so that entries are freed.
	for i := range 2 * maxIdle {
		q.AddWithPriority(strconv.Itoa(i), PriorityLow)
	}
	q.AddWithPriority("0", PriorityNormal) // stale reference at the head of the low ring
	item, _ := q.Get()
	q.Done(item)
	q.AddWithPriority("x", PriorityLow)
	got := map[string]bool{}
	for q.Len() > 0 {
		item, _ := q.Get()
		if got[item] || item == "" {
			t.Fatalf("Get handed out %q twice or empty", item)
		}
		got[item] = true
		q.Done(item)
	}
	if len(got) != 2*maxIdle {
		t.Fatalf("%d items handed out, want %d", len(got), 2*maxIdle)
	}
}
