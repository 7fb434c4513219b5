package workqueue

import "slices"

// Priorities of the items a controller queues. Any int is a valid
// priority; higher priorities are handed out first.
const (
	// PriorityNormal is the priority of Add, AddAfter and AddRateLimited:
	// changes that something is waiting for.
	PriorityNormal = 0
	// PriorityLow is for work nobody is waiting for, such as the objects
	// of an informer's initial list or of a periodic resync: a controller
	// that starts with a backlog of them still reconciles a change made
	// meanwhile as soon as a worker is free.
	PriorityLow = -100
)

// level holds the ready entries of one priority, in the order they
// became ready. Raising the priority of a ready entry moves it to another
// level without searching its ring: the reference it leaves behind is
// stale, recognised on pop because the entry's seq (or prio, or state) no
// longer matches, and skipped. A level whose last live entry leaves
// drops its stale references at once; one with more stale references
// than live ones compacts its ring.
type level struct {
	prio   int
	ring   ring[int32] // slab indices, live and stale
	popped uint32      // pops so far: the seq of the ring's oldest reference
	live   int         // references in ring that are not stale
	gauge  Gauge       // depth of this priority, nil unless metrics have one
}

// compactAbove is the number of stale references a level tolerates
// before it compacts its ring, provided they outnumber the live ones.
const compactAbove = 64

// AddWithPriority marks item as needing processing at priority prio:
// Get hands out the ready items of the highest priority first, and those
// of one priority in the order they became ready. If item is ready
// already, a higher prio raises it (it goes to the back of the line of
// its new priority) and a lower or equal one does nothing; if it is
// processing, it becomes ready again when the worker calls Done, at the
// highest priority it was added with since Get. After ShutDown it does
// nothing.
func (q *Queue[T]) AddWithPriority(item T, prio int) {
	q.mu.Lock()
	if !q.shutting {
		q.addLocked(item, prio)
	}
	q.mu.Unlock()
}

// levelIndex returns the index in q.levels of the level of priority
// prio, or where to insert it, and whether it exists.
func (q *Queue[T]) levelIndex(prio int) (int, bool) {
	ls := q.levels
	lo, hi := 0, len(ls)
	for lo < hi {
		m := int(uint(lo+hi) >> 1)
		if ls[m].prio > prio {
			lo = m + 1
		} else {
			hi = m
		}
	}
	return lo, lo < len(ls) && ls[lo].prio == prio
}

// keepLevels is the number of levels a queue keeps, empty or not, before
// it reuses an empty one for a new priority. Levels are kept so that a
// queue whose items alternate between a few priorities neither allocates
// rings nor asks for depth gauges anew; beyond keepLevels, a new priority
// takes the place of an empty level if there is one, so that a queue has
// at most keepLevels levels or one more than the number of priorities
// with ready items, whichever is more.
const keepLevels = 8

// level returns the level of priority prio, creating it if need be: once
// the queue has keepLevels levels, in the place of an empty one if there
// is one (keeping its ring's buffer). It may move the other levels, so
// it invalidates pointers to them. q.mu must be held.
func (q *Queue[T]) level(prio int) *level {
	k, ok := q.levelIndex(prio)
	if ok {
		return &q.levels[k]
	}
	var l level
	if len(q.levels) >= keepLevels {
		for j := range q.levels {
			if q.levels[j].live == 0 {
				l = q.levels[j]
				q.levels = slices.Delete(q.levels, j, j+1)
				if j < k {
					k--
				}
				break
			}
		}
	}
	l.prio, l.popped, l.gauge = prio, 0, nil
	if q.metrics != nil {
		l.gauge = q.metrics.levelGauge(prio)
	}
	q.levels = slices.Insert(q.levels, k, l)
	return &q.levels[k]
}

// push appends entry i to the ring of priority prio, marking it ready,
// and returns its level. q.mu must be held.
func (q *Queue[T]) push(i int32, prio int) *level {
	l := q.level(prio)
	e := &q.slab[i]
	e.state, e.prio, e.seq = stateReady, prio, l.popped+uint32(l.ring.len())
	l.ring.push(i)
	l.live++
	q.nready++
	return l
}

// pop removes the oldest entry of the highest priority level that has
// one, skipping stale references, and returns it with its level. At
// least one entry must be ready. q.mu must be held.
func (q *Queue[T]) pop() (int32, *level) {
	l := &q.levels[0]
	for k := 1; l.live == 0; k++ {
		l = &q.levels[k]
	}
	for {
		seq := l.popped
		i := l.ring.pop()
		l.popped++
		if e := &q.slab[i]; e.seq == seq && e.state == stateReady && e.prio == l.prio {
			q.leave(l)
			return i, l
		}
	}
}

// leave records that a live entry left level l, and drops l's stale
// references if no live one remains. q.mu must be held.
func (q *Queue[T]) leave(l *level) {
	l.live--
	q.nready--
	if l.live == 0 {
		l.ring.head, l.ring.n = 0, 0
	}
}

// raise moves ready entry i to the back of the ring of priority prio,
// higher than its own. q.mu must be held.
func (q *Queue[T]) raise(i int32, prio int) {
	k, _ := q.levelIndex(q.slab[i].prio)
	from := &q.levels[k]
	q.leave(from)
	if dead := from.ring.len() - from.live; dead > compactAbove && dead > from.live {
		q.compact(from)
	}
	if q.metrics != nil {
		q.metrics.levelDepth(from)
	}
	// The entry keeps the time it became ready: its wait is measured from
	// then, and no worker needs waking (it was ready already).
	l := q.push(i, prio)
	if q.metrics != nil {
		q.metrics.levelDepth(l)
	}
}

// compact drops the stale references of l's ring, keeping the order of
// the live ones and renumbering their seq. q.mu must be held.
func (q *Queue[T]) compact(l *level) {
	r := &l.ring
	mask := len(r.buf) - 1
	w := 0
	for k := range r.n {
		i := r.buf[(r.head+k)&mask]
		e := &q.slab[i]
		if e.seq != l.popped+uint32(k) || e.state != stateReady || e.prio != l.prio {
			continue
		}
		e.seq = l.popped + uint32(w)
		r.buf[(r.head+w)&mask] = i
		w++
	}
	r.n = w
}
