package workqueue

import (
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// waitEntry is an item waiting for its AddAfter time, in the delay heap.
type waitEntry[T comparable] struct {
	item  T
	when  time.Time
	seq   uint64 // AddAfter order, to break ties between equal times
	prio  int    // the highest priority it was added with
	index int    // position in the heap
}

// delays holds the items waiting for an AddAfter time: a binary min-heap
// ordered by (when, seq), an index by item, and one timer armed for the
// earliest time. All of it is guarded by the owning Queue's mutex.
type delays[T comparable] struct {
	heap    []*waitEntry[T]
	byItem  map[T]*waitEntry[T]
	free    []*waitEntry[T]
	peak    int // the most items waiting since the heap was last released
	seq     uint64
	timer   clock.Timer // created on first use
	armed   bool
	armedAt time.Time // deadline the timer is armed for, when armed
	due     []T       // scratch for fire, reused
}

func (d *delays[T]) init() {
	d.byItem = make(map[T]*waitEntry[T])
}

// AddAfter adds item, at [PriorityNormal], once d has elapsed. A d of
// zero or less adds it now. If item is already waiting for an earlier
// time, the call does nothing; if it is waiting for a later time, it now
// waits for the earlier one. Waiting items are not counted by Len and are
// dropped by ShutDown. After ShutDown, AddAfter does nothing.
//
// All waiting items share one timer, armed for the earliest time; no
// goroutine runs per item. AddAfter(item, d) is
// AddAfterWithPriority(item, d, PriorityNormal).
func (q *Queue[T]) AddAfter(item T, d time.Duration) {
	q.AddAfterWithPriority(item, d, PriorityNormal)
}

// AddAfterWithPriority is [Queue.AddAfter] at priority prio: once d has
// elapsed, item is added as by AddWithPriority. An item waiting already
// keeps the earlier of the two times and the higher of the two
// priorities; a d of zero or less adds item now, at the higher of prio
// and the priority it was waiting with, if it was.
func (q *Queue[T]) AddAfterWithPriority(item T, d time.Duration, prio int) {
	if d <= 0 {
		q.mu.Lock()
		if !q.shutting {
			if w, ok := q.delay.byItem[item]; ok {
				// Its time has come early; the later time no longer applies.
				prio = max(prio, w.prio)
				q.delay.remove(w)
			}
			q.addLocked(item, prio)
		}
		q.mu.Unlock()
		return
	}
	now := q.clock.Now()
	when := now.Add(d)
	q.mu.Lock()
	defer q.mu.Unlock()
	if q.shutting {
		return
	}
	if q.metrics != nil {
		q.metrics.retried()
	}
	dl := &q.delay
	w, ok := dl.byItem[item]
	if ok {
		w.prio = max(w.prio, prio)
		if !when.Before(w.when) {
			return
		}
		w.when = when
		dl.up(w.index)
	} else {
		w = dl.push(item, when, prio)
	}
	if dl.heap[0] == w && (!dl.armed || when.Before(dl.armedAt)) {
		q.armDelayTimer(d, when)
	}
}

// armDelayTimer arms the shared timer to fire after d, at deadline at.
// q.mu must be held.
func (q *Queue[T]) armDelayTimer(d time.Duration, at time.Time) {
	dl := &q.delay
	if dl.timer == nil {
		dl.timer = q.clock.AfterFunc(d, q.fireDelays)
	} else {
		dl.timer.Reset(d)
	}
	dl.armed, dl.armedAt = true, at
}

// fireDelays runs when the timer fires: it makes every item whose time
// has come ready, then re-arms the timer for the next one.
func (q *Queue[T]) fireDelays() {
	now := q.clock.Now()
	q.mu.Lock()
	defer q.mu.Unlock()
	dl := &q.delay
	if q.shutting {
		return
	}
	dl.armed = false
	for len(dl.heap) > 0 && !dl.heap[0].when.After(now) {
		w := dl.heap[0]
		item, prio := w.item, w.prio
		dl.remove(w)
		q.addLocked(item, prio)
	}
	if len(dl.heap) > 0 {
		at := dl.heap[0].when
		q.armDelayTimer(at.Sub(now), at)
	}
}

// stop drops every waiting item and stops the timer. The owning queue's
// mutex must be held.
func (d *delays[T]) stop() {
	if d.timer != nil {
		d.timer.Stop()
	}
	d.armed = false
	clear(d.heap) // drop the references; the entries are not recycled
	d.heap = d.heap[:0]
	clear(d.byItem)
}

func (d *delays[T]) push(item T, when time.Time, prio int) *waitEntry[T] {
	var w *waitEntry[T]
	if n := len(d.free); n > 0 {
		w = d.free[n-1]
		d.free[n-1] = nil
		d.free = d.free[:n-1]
	} else {
		w = new(waitEntry[T])
	}
	d.seq++
	w.item, w.when, w.seq, w.prio, w.index = item, when, d.seq, prio, len(d.heap)
	d.heap = append(d.heap, w)
	d.peak = max(d.peak, len(d.heap))
	d.byItem[item] = w
	d.up(w.index)
	return w
}

// remove takes w out of the heap and the index and recycles it.
func (d *delays[T]) remove(w *waitEntry[T]) {
	i, last := w.index, len(d.heap)-1
	if i != last {
		d.swap(i, last)
	}
	d.heap[last] = nil
	d.heap = d.heap[:last]
	if i != last {
		if !d.down(i) {
			d.up(i)
		}
	}
	delete(d.byItem, w.item)
	var zero T
	w.item = zero
	if len(d.free) < releaseAbove {
		d.free = append(d.free, w)
	}
	if last == 0 && d.peak > releaseAbove {
		d.heap, d.byItem, d.free, d.peak = nil, make(map[T]*waitEntry[T]), nil, 0
	}
}

func (d *delays[T]) less(i, j int) bool {
	a, b := d.heap[i], d.heap[j]
	if a.when.Equal(b.when) {
		return a.seq < b.seq
	}
	return a.when.Before(b.when)
}

func (d *delays[T]) swap(i, j int) {
	d.heap[i], d.heap[j] = d.heap[j], d.heap[i]
	d.heap[i].index = i
	d.heap[j].index = j
}

func (d *delays[T]) up(i int) {
	for i > 0 {
		p := (i - 1) / 2
		if !d.less(i, p) {
			return
		}
		d.swap(i, p)
		i = p
	}
}

// down sifts element i down and reports whether it moved.
func (d *delays[T]) down(i int) bool {
	start, n := i, len(d.heap)
	for {
		l := 2*i + 1
		if l >= n {
			break
		}
		m := l
		if r := l + 1; r < n && d.less(r, l) {
			m = r
		}
		if !d.less(m, i) {
			break
		}
		d.swap(i, m)
		i = m
	}
	return i > start
}
