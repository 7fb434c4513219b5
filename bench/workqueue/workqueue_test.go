// Package workqueue compares Loom's workqueue with client-go's on
// identical benchmark bodies; see docs/performance.md.
package workqueue

import (
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	cgworkqueue "k8s.io/client-go/util/workqueue"

	"github.com/loom-k8s/loom/workqueue"
)

// queue is what the benchmark bodies use, so that both implementations
// pay the same dispatch cost: each is reached through a one-line wrapper
// and this interface.
type queue interface {
	Add(item string)
	Get() (item string, ok bool)
	Done(item string)
	ShutDown()
	AddAfter(item string, d time.Duration)
}

type loomQueue struct{ q *workqueue.Queue[string] }

func (w loomQueue) Add(item string)                       { w.q.Add(item) }
func (w loomQueue) Get() (string, bool)                   { return w.q.Get() }
func (w loomQueue) Done(item string)                      { w.q.Done(item) }
func (w loomQueue) ShutDown()                             { w.q.ShutDown() }
func (w loomQueue) AddAfter(item string, d time.Duration) { w.q.AddAfter(item, d) }

// loomPriorityQueue is Loom's queue with priorities in use: every Add and
// AddAfter goes through its priority form, half of the keys (by their
// last byte) at workqueue.PriorityLow and the others at
// workqueue.PriorityNormal, so that Get takes from two levels. client-go's
// queue has no priorities; its figures are those of its plain queue.
type loomPriorityQueue struct{ q *workqueue.Queue[string] }

func priorityOf(item string) int {
	if item[len(item)-1]&1 == 0 {
		return workqueue.PriorityLow
	}
	return workqueue.PriorityNormal
}

func (w loomPriorityQueue) Add(item string)     { w.q.AddWithPriority(item, priorityOf(item)) }
func (w loomPriorityQueue) Get() (string, bool) { return w.q.Get() }
func (w loomPriorityQueue) Done(item string)    { w.q.Done(item) }
func (w loomPriorityQueue) ShutDown()           { w.q.ShutDown() }
func (w loomPriorityQueue) AddAfter(item string, d time.Duration) {
	w.q.AddAfterWithPriority(item, d, priorityOf(item))
}

// loomLowBacklogQueue is Loom's queue used as a controller that has
// just started uses it: the items added before the timed part of a
// benchmark (BenchmarkContended's backlog, its initial list) go in at
// workqueue.PriorityLow, those added while it runs (the changes) at
// workqueue.PriorityNormal, through AddWithPriority.
type loomLowBacklogQueue struct{ loomPriorityQueue }

func (w loomLowBacklogQueue) Add(item string) { w.q.AddWithPriority(item, workqueue.PriorityNormal) }
func (w loomLowBacklogQueue) AddBacklog(item string) {
	w.q.AddWithPriority(item, workqueue.PriorityLow)
}

// backlogAdder is a queue that adds a benchmark's backlog its own way.
type backlogAdder interface{ AddBacklog(item string) }

type clientGoQueue struct {
	q cgworkqueue.TypedDelayingInterface[string]
}

func (w clientGoQueue) Add(item string) { w.q.Add(item) }
func (w clientGoQueue) Get() (string, bool) {
	item, shutdown := w.q.Get()
	return item, !shutdown
}
func (w clientGoQueue) Done(item string)                      { w.q.Done(item) }
func (w clientGoQueue) ShutDown()                             { w.q.ShutDown() }
func (w clientGoQueue) AddAfter(item string, d time.Duration) { w.q.AddAfter(item, d) }

// impls are the queues under test, each with default options (no
// metrics, no name): Loom's without and with priorities, and client-go's,
// which has none.
var impls = []struct {
	name string
	new  func() queue
}{
	{"loom", func() queue { return loomQueue{workqueue.New(workqueue.Options[string]{})} }},
	{"loom-priority", func() queue { return loomPriorityQueue{workqueue.New(workqueue.Options[string]{})} }},
	{"client-go", func() queue { return clientGoQueue{cgworkqueue.NewTypedDelayingQueue[string]()} }},
}

var (
	keysOnce sync.Once
	keys     []string
)

// keySpace returns the keys of the contended benchmark: 1M by default,
// or LOOM_BENCH_KEYS.
func keySpace(b *testing.B) []string {
	keysOnce.Do(func() {
		n := 1_000_000
		if s := os.Getenv("LOOM_BENCH_KEYS"); s != "" {
			v, err := strconv.Atoi(s)
			if err != nil {
				panic(err)
			}
			n = v
		}
		keys = make([]string, n)
		for i := range keys {
			keys[i] = "namespace-" + strconv.Itoa(i%1000) + "/object-" + strconv.Itoa(i)
		}
	})
	return keys
}

// BenchmarkAddGetDone: one goroutine, one op = Add, Get, Done of one item,
// keys cycling over 1000, queue reused (steady state).
func BenchmarkAddGetDone(b *testing.B) {
	ks := keySpace(b)[:1000]
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new()
			defer q.ShutDown()
			b.ReportAllocs()
			for i := 0; b.Loop(); i++ {
				q.Add(ks[i%len(ks)])
				item, _ := q.Get()
				q.Done(item)
			}
			b.StopTimer()
		})
	}
}

// BenchmarkAddGetDoneBatch: one goroutine, 100 Adds then 100 Get+Done, so
// that the queue has depth; one op = one item.
func BenchmarkAddGetDoneBatch(b *testing.B) {
	ks := keySpace(b)[:100]
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new()
			defer q.ShutDown()
			b.ReportAllocs()
			for i := 0; i < b.N; i += len(ks) {
				for _, k := range ks {
					q.Add(k)
				}
				for range ks {
					item, _ := q.Get()
					q.Done(item)
				}
			}
			b.StopTimer()
		})
	}
}

// BenchmarkContended is the contended shape of docs/performance.md: the
// queue starts with a backlog of every key (1M, or LOOM_BENCH_KEYS); then
// 16 producers add b.N keys in total, each walking its own slice of the
// key space, while 64 workers Get and Done. When the producers finish the
// queue is shut down and the workers drain it. One op = one producer Add;
// items/op is how many items the workers processed per op (the backlog
// plus the Adds that did not collapse into a waiting item), and ns/item is
// the elapsed time per processed item, the throughput figure to compare.
//
// It also runs "loom-lowbacklog", a controller's start: the backlog at
// workqueue.PriorityLow and the producers' adds at PriorityNormal.
func BenchmarkContended(b *testing.B) {
	const producers, workers = 16, 64
	ks := keySpace(b)
	all := append(slices.Clip(impls), struct {
		name string
		new  func() queue
	}{"loom-lowbacklog", func() queue {
		return loomLowBacklogQueue{loomPriorityQueue{workqueue.New(workqueue.Options[string]{})}}
	}})
	for _, impl := range all {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new()
			add := q.Add
			if ba, ok := q.(backlogAdder); ok {
				add = ba.AddBacklog
			}
			for _, k := range ks {
				add(k)
			}
			var processed atomic.Int64
			var wg sync.WaitGroup
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for range workers {
				wg.Add(1)
				go func() {
					defer wg.Done()
					n := int64(0)
					for {
						item, ok := q.Get()
						if !ok {
							break
						}
						q.Done(item)
						n++
					}
					processed.Add(n)
				}()
			}
			var pwg sync.WaitGroup
			for p := range producers {
				pwg.Add(1)
				go func() {
					defer pwg.Done()
					start := p * len(ks) / producers
					for i := p; i < b.N; i += producers {
						q.Add(ks[(start+i/producers)%len(ks)])
					}
				}()
			}
			pwg.Wait()
			q.ShutDown()
			wg.Wait()
			elapsed := time.Since(start)
			b.StopTimer()
			n := processed.Load()
			b.ReportMetric(float64(n)/float64(b.N), "items/op")
			b.ReportMetric(float64(elapsed.Nanoseconds())/float64(n), "ns/item")
		})
	}
}

// BenchmarkAddAfter: 100k items wait for delays of about an hour; each op
// moves one of them (cycling) to an earlier time, so the number waiting
// stays 100k and every op updates the delay structure.
func BenchmarkAddAfter(b *testing.B) {
	const pending = 100_000
	ks := keySpace(b)
	if len(ks) < pending {
		b.Skip("needs LOOM_BENCH_KEYS >= 100000")
	}
	ks = ks[:pending]
	for _, impl := range impls {
		b.Run(impl.name, func(b *testing.B) {
			q := impl.new()
			defer q.ShutDown()
			for _, k := range ks {
				q.AddAfter(k, 2*time.Hour)
			}
			b.ReportAllocs()
			b.ResetTimer()
			for i := 0; i < b.N; i++ {
				q.AddAfter(ks[i%pending], time.Hour-time.Duration(i))
			}
			b.StopTimer()
		})
	}
}

// BenchmarkContendedFloor is the map work that BenchmarkContended cannot
// avoid, with no queue and no goroutines: a queue that removes duplicates
// looks up every Add in a map of the keys it holds, and deletes every key
// it finishes. Over the 1M-key backlog each op deletes one key (a Done)
// and adds one that is not there (an Add that makes an item). Most of it
// is cache misses in a table too large for the caches, which both queues
// pay under their one lock.
func BenchmarkContendedFloor(b *testing.B) {
	ks := keySpace(b)
	m := make(map[string]int32, len(ks))
	for i, k := range ks {
		m[k] = int32(i)
	}
	half := len(ks) / 2
	for i := range half {
		delete(m, ks[i])
	}
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		delete(m, ks[(i+half)%len(ks)])
		k := ks[i%len(ks)]
		if _, ok := m[k]; !ok {
			m[k] = int32(i)
		}
	}
}
