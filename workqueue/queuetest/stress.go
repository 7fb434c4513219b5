package queuetest

import (
	"errors"
	"fmt"
	"math/rand/v2"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// StressOptions configures [Stress]. The zero value is valid.
type StressOptions struct {
	// Sequences is the number of producer sequences to run, over all
	// rounds. A sequence is one goroutine's burst of 1 to 4 random
	// operations. Worker sequences (one Get, 0 to 3 random operations,
	// Done) come on top and are counted in the result. Default 10,000.
	Sequences int
	// Seed seeds the random choices. Goroutine scheduling adds its own
	// randomness, so two runs with one seed differ. Default 1.
	Seed uint64
}

// StressResult describes what [Stress] ran.
type StressResult struct {
	// Rounds is the number of fresh queues used.
	Rounds int
	// ProducerSequences and WorkerSequences count the operation
	// sequences run; their sum is the total.
	ProducerSequences, WorkerSequences int64
	// Operations counts queue method calls.
	Operations int64
	// Violations counts broken invariants; the returned error lists the
	// first ones, and the first of every other kind met.
	Violations int64
}

// Sequences returns the total number of operation sequences run.
func (r StressResult) Sequences() int64 { return r.ProducerSequences + r.WorkerSequences }

// maxReported bounds the violations listed in the error.
const maxReported = 20

// Stress runs random operation sequences from many goroutines against
// fresh queues made by newQueue, and checks after every step that:
//
//   - no item is processing in two workers at once ("concurrent processing");
//   - a Get never hands out an item more often than it was added ("duplicate");
//   - Len never exceeds the number of distinct items ("dedup");
//   - every Add made before shutdown is followed by a Get that sees it:
//     when the workers have exited, each worker has processed every item
//     at the latest version its producers set before adding it ("lost item");
//   - ShutDownWithDrain returns only after every item that was processing
//     when it was called is Done ("drain"), and returns at all.
//
// Each round draws its shape at random: 2 to 64 items (few items make
// collisions likely) in three rounds out of four, up to 4096 in the
// others, 1 to 8 producers, 1 to 16 workers, and ShutDown or
// ShutDownWithDrain at the end. Workers re-add items while processing
// them, including the item they hold. If the queue also implements
// [workqueue.DelayingInterface], producers sometimes use AddAfter with
// sub-millisecond delays on its real clock, and if it implements
// [workqueue.RateLimitingInterface], AddRateLimited, Forget and
// NumRequeues; those adds are counted for the duplicate check but not for
// the lost-item check, since ShutDown may rightly drop them. If it
// implements [workqueue.PriorityAdder], half the adds of producers and
// workers go through AddWithPriority, with priorities from
// PriorityLow to 7.
func Stress(newQueue NewQueue, opts StressOptions) (StressResult, error) {
	if opts.Sequences <= 0 {
		opts.Sequences = 10_000
	}
	if opts.Seed == 0 {
		opts.Seed = 1
	}
	rng := rand.New(rand.NewPCG(opts.Seed, 0x9e3779b97f4a7c15))
	var res StressResult
	var rep reporter
	names := make([]string, 4096)
	for i := range names {
		names[i] = "item-" + strconv.Itoa(i)
	}
	remaining := opts.Sequences
	for remaining > 0 {
		n := min(remaining, 500+rng.IntN(2000))
		remaining -= n
		nkeys := 2 + rng.IntN(63)
		if rng.IntN(4) == 0 {
			// Now and then many items, so that queues which keep state
			// per finished item (caches, free lists) reach their limits.
			nkeys = 64 + rng.IntN(len(names)-63)
		}
		r := &round{
			q:         newQueue(),
			keys:      names[:nkeys],
			producers: 1 + rng.IntN(8),
			workers:   1 + rng.IntN(16),
			drain:     rng.IntN(2) == 0,
			sequences: n,
			seed:      rng.Uint64(),
			rep:       &rep,
		}
		r.run()
		res.Rounds++
		res.ProducerSequences += int64(n)
		res.WorkerSequences += r.workerSeqs.Load()
		res.Operations += r.ops.Load()
	}
	res.Violations = rep.n.Load()
	return res, rep.err()
}

// reporter gathers violations: the first maxReported, and beyond them the
// first of each kind not listed yet, so that the error names every rule
// that was broken whatever order the goroutines met them in.
type reporter struct {
	n     atomic.Int64
	mu    sync.Mutex
	errs  []error
	kinds map[string]bool // the kinds listed: a format's text before its first colon
}

func (r *reporter) report(format string, args ...any) {
	kind, _, _ := strings.Cut(format, ":")
	n := r.n.Add(1)
	r.mu.Lock()
	defer r.mu.Unlock()
	if n > maxReported && r.kinds[kind] {
		return
	}
	if r.kinds == nil {
		r.kinds = map[string]bool{}
	}
	r.kinds[kind] = true
	r.errs = append(r.errs, fmt.Errorf(format, args...))
}

func (r *reporter) err() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	if n := r.n.Load(); n > int64(len(r.errs)) {
		r.errs = append(r.errs, fmt.Errorf("and %d more violations", n-int64(len(r.errs))))
	}
	return errors.Join(r.errs...)
}

// keyState is what the checker knows about one item.
type keyState struct {
	processing atomic.Int32 // 1 while a worker holds it
	version    atomic.Int64 // bumped by a producer before each Add
	seen       atomic.Int64 // highest version a worker read after Get
	adds       atomic.Int64 // Add and AddAfter calls started
	gets       atomic.Int64 // Gets that returned it
	epoch      atomic.Int64 // odd while a worker holds it: bumped after claiming and before Done
}

type round struct {
	q                  workqueue.Interface[string]
	keys               []string
	producers, workers int
	drain              bool
	sequences          int
	seed               uint64
	rep                *reporter

	state      []keyState
	addsClosed atomic.Bool  // set when producers are done: no more adds
	addsActive atomic.Int64 // adds in flight, for the close handshake
	workerSeqs atomic.Int64
	ops        atomic.Int64
}

// tryAdd adds key i unless adds are closed. Adds are closed before the
// queue is shut down, so every add the checker counts for the lost-item
// rule happens before shutdown.
func (r *round) tryAdd(i int) {
	r.addsActive.Add(1)
	defer r.addsActive.Add(-1)
	if r.addsClosed.Load() {
		return
	}
	st := &r.state[i]
	st.version.Add(1)
	st.adds.Add(1)
	r.q.Add(r.keys[i])
	r.ops.Add(1)
}

// tryAddWithPriority is tryAdd through AddWithPriority.
func (r *round) tryAddWithPriority(pq workqueue.PriorityAdder[string], i, prio int) {
	r.addsActive.Add(1)
	defer r.addsActive.Add(-1)
	if r.addsClosed.Load() {
		return
	}
	st := &r.state[i]
	st.version.Add(1)
	st.adds.Add(1)
	pq.AddWithPriority(r.keys[i], prio)
	r.ops.Add(1)
}

// priorities are those Stress adds with, for a queue that has them.
var priorities = [...]int{workqueue.PriorityLow, workqueue.PriorityNormal, 1, 7}

func (r *round) tryAddAfter(dq workqueue.DelayingInterface[string], i int, d time.Duration) {
	r.addsActive.Add(1)
	defer r.addsActive.Add(-1)
	if r.addsClosed.Load() {
		return
	}
	r.state[i].adds.Add(1)
	dq.AddAfter(r.keys[i], d)
	r.ops.Add(1)
}

// tryAddRateLimited is a failed item's retry: Forget or AddRateLimited,
// at random. It counts for the duplicate check only, like tryAddAfter.
func (r *round) tryAddRateLimited(rq workqueue.RateLimitingInterface[string], i int) {
	r.addsActive.Add(1)
	defer r.addsActive.Add(-1)
	if r.addsClosed.Load() {
		return
	}
	if i%3 == 0 {
		rq.Forget(r.keys[i])
		_ = rq.NumRequeues(r.keys[i])
		r.ops.Add(2)
		return
	}
	r.state[i].adds.Add(1)
	rq.AddRateLimited(r.keys[i])
	r.ops.Add(1)
}

func (r *round) checkLen() {
	if n := r.q.Len(); n > len(r.keys) {
		r.rep.report("dedup: Len = %d with only %d distinct items", n, len(r.keys))
	}
	r.ops.Add(1)
}

func (r *round) run() {
	r.state = make([]keyState, len(r.keys))
	index := make(map[string]int, len(r.keys))
	for i, k := range r.keys {
		index[k] = i
	}
	dq, delaying := r.q.(workqueue.DelayingInterface[string])
	rq, limiting := r.q.(workqueue.RateLimitingInterface[string])
	pq, prioritized := r.q.(workqueue.PriorityAdder[string])
	// add adds key i, with a random priority half the time if the queue
	// has priorities.
	add := func(rng *rand.Rand, i int) {
		if prioritized && rng.IntN(2) == 0 {
			r.tryAddWithPriority(pq, i, priorities[rng.IntN(len(priorities))])
			return
		}
		r.tryAdd(i)
	}

	var workers sync.WaitGroup
	for w := range r.workers {
		workers.Add(1)
		go func() {
			defer workers.Done()
			rng := rand.New(rand.NewPCG(r.seed, uint64(1000+w)))
			for {
				item, ok := r.q.Get()
				r.ops.Add(1)
				if !ok {
					return
				}
				i, known := index[item]
				if !known {
					r.rep.report("unknown item %q handed out", item)
					continue
				}
				st := &r.state[i]
				if !st.processing.CompareAndSwap(0, 1) {
					r.rep.report("concurrent processing: %q handed to a second worker before Done", item)
					r.q.Done(item) // leave the other worker's claim alone, but do not hang a drain
					continue
				}
				st.epoch.Add(1) // odd: held
				if g, a := st.gets.Add(1), st.adds.Load(); g > a {
					r.rep.report("duplicate: %q handed out %d times after %d adds", item, g, a)
				}
				// Reconcile the level: read the latest version.
				v := st.version.Load()
				for {
					s := st.seen.Load()
					if v <= s || st.seen.CompareAndSwap(s, v) {
						break
					}
				}
				for range rng.IntN(4) {
					switch rng.IntN(4) {
					case 0:
						add(rng, i) // the item being processed
					case 1, 2:
						add(rng, rng.IntN(len(r.keys)))
					default:
						r.checkLen()
					}
				}
				if rng.IntN(8) == 0 {
					runtime.Gosched()
				}
				st.epoch.Add(1) // even: about to call Done
				st.processing.Store(0)
				r.q.Done(item)
				r.ops.Add(1)
				r.workerSeqs.Add(1)
			}
		}()
	}

	var producers sync.WaitGroup
	per := r.sequences / r.producers
	for p := range r.producers {
		n := per
		if p == 0 {
			n += r.sequences % r.producers
		}
		producers.Add(1)
		go func() {
			defer producers.Done()
			rng := rand.New(rand.NewPCG(r.seed, uint64(p)))
			for range n {
				for range 1 + rng.IntN(4) {
					switch c := rng.IntN(16); {
					case c < 12:
						add(rng, rng.IntN(len(r.keys)))
					case c < 14 && delaying:
						r.tryAddAfter(dq, rng.IntN(len(r.keys)), time.Duration(rng.IntN(200))*time.Microsecond)
					case c == 14 && limiting:
						r.tryAddRateLimited(rq, rng.IntN(len(r.keys)))
					default:
						r.checkLen()
					}
				}
				if rng.IntN(16) == 0 {
					runtime.Gosched()
				}
			}
		}()
	}
	producers.Wait()

	// Close adds and wait for those in flight, so every counted Add
	// happens before the shutdown.
	r.addsClosed.Store(true)
	for r.addsActive.Load() != 0 {
		runtime.Gosched()
	}

	if r.drain {
		// Items processing now must be Done before the drain returns. A
		// worker that holds an item has made its epoch odd and makes it
		// even only just before calling Done.
		type held struct {
			i     int
			epoch int64
		}
		var before []held
		for i := range r.state {
			if e := r.state[i].epoch.Load(); e%2 == 1 {
				before = append(before, held{i, e})
			}
		}
		drained := make(chan struct{})
		go func() {
			r.q.ShutDownWithDrain()
			close(drained)
		}()
		select {
		case <-drained:
		case <-time.After(livenessTimeout):
			r.rep.report("drain: ShutDownWithDrain did not return")
			return
		}
		for _, h := range before {
			if r.state[h.i].epoch.Load() == h.epoch {
				r.rep.report("drain: ShutDownWithDrain returned while %q was still processing", r.keys[h.i])
			}
		}
	} else {
		r.q.ShutDown()
	}
	r.ops.Add(1)

	exited := make(chan struct{})
	go func() {
		workers.Wait()
		close(exited)
	}()
	select {
	case <-exited:
	case <-time.After(livenessTimeout):
		r.rep.report("shutdown: workers blocked in Get after ShutDown")
		return
	}
	for i := range r.state {
		st := &r.state[i]
		if v, s := st.version.Load(), st.seen.Load(); s != v {
			r.rep.report("lost item: %q added at version %d but last processed at version %d", r.keys[i], v, s)
		}
	}
	if n := r.q.Len(); n != 0 {
		r.rep.report("lost item: %d items still ready after the workers exited", n)
	}
}
