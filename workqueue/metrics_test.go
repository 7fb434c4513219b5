package workqueue_test

import (
	"strconv"
	"sync"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// recorder is a MetricsProvider that keeps the last value of each gauge,
// the count of each counter and every observation.
type recorder struct {
	mu       sync.Mutex
	name     string
	gauges   map[string]float64
	counters map[string]int
	observed map[string][]float64
}

type instrument struct {
	r    *recorder
	name string
}

func (i instrument) Set(v float64) {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	i.r.gauges[i.name] = v
}

func (i instrument) Inc() {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	i.r.counters[i.name]++
}

func (i instrument) Observe(v float64) {
	i.r.mu.Lock()
	defer i.r.mu.Unlock()
	i.r.observed[i.name] = append(i.r.observed[i.name], v)
}

func (r *recorder) QueueMetrics(name string) workqueue.Metrics {
	r.name = name
	r.gauges, r.counters, r.observed = map[string]float64{}, map[string]int{}, map[string][]float64{}
	return workqueue.Metrics{
		Depth:                   instrument{r, "depth"},
		Adds:                    instrument{r, "adds"},
		QueueLatency:            instrument{r, "latency"},
		WorkDuration:            instrument{r, "work"},
		UnfinishedWork:          instrument{r, "unfinished"},
		LongestRunningProcessor: instrument{r, "longest"},
		Retries:                 instrument{r, "retries"},
		DepthByPriority:         byPriority{r},
	}
}

// byPriority names the depth gauge of priority p "depth/p".
type byPriority struct{ r *recorder }

func (b byPriority) WithPriority(p int) workqueue.Gauge {
	return instrument{b.r, "depth/" + strconv.Itoa(p)}
}

// TestMetrics runs in a synctest bubble, where time moves only when the
// test steps it, so durations are exact.
func TestMetrics(t *testing.T) {
	synctest.Test(t, checkMetrics)
}

func checkMetrics(t *testing.T) {
	rec := &recorder{}
	q := workqueue.New(workqueue.Options[string]{Name: "pods", Metrics: rec})
	defer q.ShutDown()
	if rec.name != "pods" {
		t.Fatalf("provider got name %q", rec.name)
	}
	check := func(step string, gauges map[string]float64, counters map[string]int, observed map[string][]float64) {
		t.Helper()
		rec.mu.Lock()
		defer rec.mu.Unlock()
		for k, want := range gauges {
			if got := rec.gauges[k]; got != want {
				t.Errorf("%s: gauge %s = %v, want %v", step, k, got, want)
			}
		}
		for k, want := range counters {
			if got := rec.counters[k]; got != want {
				t.Errorf("%s: counter %s = %v, want %v", step, k, got, want)
			}
		}
		for k, want := range observed {
			if got := rec.observed[k]; !equal(got, want) {
				t.Errorf("%s: observed %s = %v, want %v", step, k, got, want)
			}
		}
	}

	q.Add("a")
	q.Add("b")
	q.Add("a") // collapses: not counted
	check("adds", map[string]float64{"depth": 2}, map[string]int{"adds": 2}, nil)

	step(2 * time.Second)
	q.Get() // a, ready for 2s
	check("get", map[string]float64{"depth": 1}, nil, map[string][]float64{"latency": {2}})

	step(time.Second)
	q.Get() // b, ready for 3s
	check("get b", map[string]float64{"depth": 0}, nil, map[string][]float64{"latency": {2, 3}})

	// The periodic update (default every 500ms) at 4s: a has been
	// processing 2s, b 1s.
	step(time.Second)
	check("tick", map[string]float64{"unfinished": 3, "longest": 2}, nil, nil)

	q.Add("a") // while processing: counted, becomes ready at Done
	q.Done("a")
	check("done a", map[string]float64{"depth": 1}, map[string]int{"adds": 3}, map[string][]float64{"work": {2}})

	step(500 * time.Millisecond)
	check("tick after done", map[string]float64{"unfinished": 1.5, "longest": 1.5}, nil, nil)

	q.AddRateLimited("c")
	check("retry", nil, map[string]int{"retries": 1}, nil)
}

func equal(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

// TestDepthByPriority: the depth of each priority follows adds, raises,
// Gets and delayed adds, and the total depth is their sum.
func TestDepthByPriority(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		rec := &recorder{}
		q := workqueue.New(workqueue.Options[string]{Name: "q", Metrics: rec})
		defer q.ShutDown()
		check := func(step string, want map[string]float64) {
			t.Helper()
			rec.mu.Lock()
			defer rec.mu.Unlock()
			for k, w := range want {
				if got := rec.gauges[k]; got != w {
					t.Errorf("%s: gauge %s = %v, want %v", step, k, got, w)
				}
			}
		}
		q.AddWithPriority("a", workqueue.PriorityLow)
		q.AddWithPriority("b", workqueue.PriorityLow)
		q.Add("c")
		check("adds", map[string]float64{"depth": 3, "depth/-100": 2, "depth/0": 1})
		q.AddWithPriority("b", 0) // raise: not an add
		check("raise", map[string]float64{"depth": 3, "depth/-100": 1, "depth/0": 2})
		q.Get() // c
		q.Get() // b
		check("gets", map[string]float64{"depth": 1, "depth/-100": 1, "depth/0": 0})
		q.AddAfterWithPriority("d", time.Second, 3)
		check("waiting", map[string]float64{"depth": 1, "depth/3": 0})
		time.Sleep(time.Second)
		synctest.Wait()
		check("delayed", map[string]float64{"depth": 2, "depth/3": 1})
		q.Get() // d
		q.Get() // a
		check("empty", map[string]float64{"depth": 0, "depth/-100": 0, "depth/0": 0, "depth/3": 0})
		rec.mu.Lock()
		adds := rec.counters["adds"]
		rec.mu.Unlock()
		if adds != 4 {
			t.Errorf("adds = %d, want 4", adds)
		}
	})
}
