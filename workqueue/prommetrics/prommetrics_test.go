package prommetrics_test

import (
	"errors"
	"maps"
	"math"
	"slices"
	"strconv"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/prommetrics"
)

// value returns the value of the series of metric name labelled
// name=queue in reg, and whether it exists.
func value(t *testing.T, reg prometheus.Gatherer, metric, queue string) (float64, bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != metric {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "name") != queue {
				continue
			}
			switch {
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

func labelValue(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

func TestProvider(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.New(workqueue.Options[string]{Name: "pods", Metrics: p})
	defer q.ShutDown()
	q.Add("a")
	q.Add("b")
	item, _ := q.Get()
	q.Done(item)
	q.AddRateLimited("c")

	tests := []struct {
		metric string
		want   float64
	}{
		{"workqueue_depth", 1},
		{"workqueue_adds_total", 2},
		{"workqueue_queue_duration_seconds", 1}, // observations
		{"workqueue_work_duration_seconds", 1},  // observations
		{"workqueue_retries_total", 1},
		{"workqueue_unfinished_work_seconds", 0},
		{"workqueue_longest_running_processor_seconds", 0},
	}
	for _, tt := range tests {
		got, ok := value(t, reg, tt.metric, "pods")
		if !ok || got != tt.want {
			t.Errorf("%s{name=pods} = %v (present %v), want %v", tt.metric, got, ok, tt.want)
		}
	}
}

func TestNewSharesRegisteredVectors(t *testing.T) {
	reg := prometheus.NewRegistry()
	p1, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	p2, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err != nil {
		t.Fatalf("second New on the same registry: %v", err)
	}
	p1.QueueMetrics("a").Adds.Inc()
	p2.QueueMetrics("a").Adds.Inc()
	if got, _ := value(t, reg, "workqueue_adds_total", "a"); got != 2 {
		t.Fatalf("adds = %v, want 2 (shared series)", got)
	}
}

func TestNewReportsConflicts(t *testing.T) {
	reg := prometheus.NewRegistry()
	// Same name, different shape: a gauge without the name label.
	reg.MustRegister(prometheus.NewGauge(prometheus.GaugeOpts{Name: "workqueue_depth", Help: "x"}))
	_, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err == nil {
		t.Fatal("New succeeded despite a conflicting metric")
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		t.Fatalf("conflict reported as AlreadyRegistered: %v", err)
	}
}

// TestControllerLabels: with ControllerLabels, every series has the
// controller label (the queue's name) and depth a priority label (here
// "0", the priority of Add); without, only the name label.
func TestControllerLabels(t *testing.T) {
	tests := []struct {
		controllerLabels bool
		want             map[string][]string // metric -> label names
	}{
		{false, map[string][]string{
			"workqueue_depth":      {"name"},
			"workqueue_adds_total": {"name"},
		}},
		{true, map[string][]string{
			"workqueue_depth":                  {"controller", "name", "priority"},
			"workqueue_adds_total":             {"controller", "name"},
			"workqueue_queue_duration_seconds": {"controller", "name"},
			"workqueue_retries_total":          {"controller", "name"},
		}},
	}
	for _, tt := range tests {
		reg := prometheus.NewRegistry()
		p, err := prommetrics.New(prommetrics.Options{Registerer: reg, ControllerLabels: tt.controllerLabels})
		if err != nil {
			t.Fatal(err)
		}
		q := workqueue.New(workqueue.Options[string]{Name: "widgets", Metrics: p})
		q.Add("a")
		item, _ := q.Get()
		q.Done(item)
		q.AddAfter("b", time.Hour)
		q.ShutDown()
		mfs, err := reg.Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, mf := range mfs {
			want, ok := tt.want[mf.GetName()]
			if !ok {
				continue
			}
			delete(tt.want, mf.GetName())
			m := mf.GetMetric()[0]
			var got []string
			for _, l := range m.GetLabel() {
				got = append(got, l.GetName())
				if v := l.GetValue(); (l.GetName() == "priority" && v != "0") || (l.GetName() != "priority" && v != "widgets") {
					t.Errorf("ControllerLabels %v: %s label %s = %q", tt.controllerLabels, mf.GetName(), l.GetName(), v)
				}
			}
			if !slices.Equal(got, want) {
				t.Errorf("ControllerLabels %v: %s labels %v, want %v", tt.controllerLabels, mf.GetName(), got, want)
			}
		}
		for name := range tt.want {
			t.Errorf("ControllerLabels %v: %s missing", tt.controllerLabels, name)
		}
	}
}

// TestRetriesCountDelayedAdds: retries_total counts every add with a
// positive delay (AddAfter, and AddRateLimited through it), not immediate
// adds, nor adds after ShutDown.
func TestRetriesCountDelayedAdds(t *testing.T) {
	tests := []struct {
		name string
		add  func(q *workqueue.Queue[string])
		want float64
	}{
		{"Add", func(q *workqueue.Queue[string]) { q.Add("a") }, 0},
		{"AddAfter 0", func(q *workqueue.Queue[string]) { q.AddAfter("a", 0) }, 0},
		{"AddAfter 1h", func(q *workqueue.Queue[string]) { q.AddAfter("a", time.Hour) }, 1},
		{"AddRateLimited", func(q *workqueue.Queue[string]) { q.AddRateLimited("a") }, 1},
		{"AddAfter after ShutDown", func(q *workqueue.Queue[string]) { q.ShutDown(); q.AddAfter("a", time.Hour) }, 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			reg := prometheus.NewRegistry()
			p, err := prommetrics.New(prommetrics.Options{Registerer: reg})
			if err != nil {
				t.Fatal(err)
			}
			q := workqueue.New(workqueue.Options[string]{Name: "q", Metrics: p})
			defer q.ShutDown()
			tt.add(q)
			if got, _ := value(t, reg, "workqueue_retries_total", "q"); got != tt.want {
				t.Errorf("retries = %v, want %v", got, tt.want)
			}
		})
	}
}

// TestBuckets: the duration histograms have controller-runtime's bounds,
// powers of ten from 10ns to 1000s.
func TestBuckets(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err != nil {
		t.Fatal(err)
	}
	p.QueueMetrics("q").QueueLatency.Observe(1)
	p.QueueMetrics("q").WorkDuration.Observe(1)
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	seen := 0
	for _, mf := range mfs {
		if mf.GetType() != dto.MetricType_HISTOGRAM {
			continue
		}
		seen++
		var got []float64
		for _, b := range mf.GetMetric()[0].GetHistogram().GetBucket() {
			got = append(got, b.GetUpperBound())
		}
		if len(got) != 12 {
			t.Fatalf("%s: %d buckets %v, want 12", mf.GetName(), len(got), got)
		}
		for i, b := range got {
			if want := math.Pow(10, float64(i-8)); math.Abs(b-want) > 1e-9*want {
				t.Errorf("%s bucket %d = %v, want %v", mf.GetName(), i, b, want)
			}
		}
	}
	if seen != 2 {
		t.Errorf("%d histograms, want 2", seen)
	}
}

// depthByPriority returns the workqueue_depth series of queue name by
// priority label.
func depthByPriority(t *testing.T, reg prometheus.Gatherer, queue string) map[string]float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, mf := range mfs {
		if mf.GetName() != "workqueue_depth" {
			continue
		}
		for _, m := range mf.GetMetric() {
			if labelValue(m, "name") == queue {
				got[labelValue(m, "priority")] = m.GetGauge().GetValue()
			}
		}
	}
	return got
}

// TestDepthByPriority: with ControllerLabels, each priority of ready items
// has its own depth series, which queues of one name add up.
func TestDepthByPriority(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := prommetrics.New(prommetrics.Options{Registerer: reg, ControllerLabels: true})
	if err != nil {
		t.Fatal(err)
	}
	q1 := workqueue.New(workqueue.Options[string]{Name: "widgets", Metrics: p})
	defer q1.ShutDown()
	q2 := workqueue.New(workqueue.Options[string]{Name: "widgets", Metrics: p})
	defer q2.ShutDown()
	q1.AddWithPriority("a", workqueue.PriorityLow)
	q1.AddWithPriority("b", workqueue.PriorityLow)
	q1.Add("c")
	q2.AddWithPriority("a", workqueue.PriorityLow)
	q2.AddWithPriority("x", 7)
	q1.AddWithPriority("b", 7) // raised
	want := map[string]float64{"-100": 2, "0": 1, "7": 2}
	if got := depthByPriority(t, reg, "widgets"); !maps.Equal(got, want) {
		t.Errorf("depth = %v, want %v", got, want)
	}
	for range 2 {
		item, _ := q1.Get()
		q1.Done(item)
	}
	want = map[string]float64{"-100": 2, "0": 0, "7": 1}
	if got := depthByPriority(t, reg, "widgets"); !maps.Equal(got, want) {
		t.Errorf("after two Gets: depth = %v, want %v", got, want)
	}
}

// TestDepthCardinalityLimit: beyond 25 priorities, a queue's depth goes
// to one overflow series, and the series still add up to the depth.
func TestDepthCardinalityLimit(t *testing.T) {
	reg := prometheus.NewRegistry()
	p, err := prommetrics.New(prommetrics.Options{Registerer: reg, ControllerLabels: true})
	if err != nil {
		t.Fatal(err)
	}
	q := workqueue.New(workqueue.Options[string]{Name: "q", Metrics: p})
	defer q.ShutDown()
	const n = 30
	for i := range n {
		q.AddWithPriority(strconv.Itoa(i), i)
	}
	got := depthByPriority(t, reg, "q")
	if len(got) != 26 || got["exceeded_cardinality_limit"] != n-25 {
		t.Errorf("depth = %v, want 25 priorities of their own and %d items in the overflow series", got, n-25)
	}
	total := 0.0
	for _, v := range got {
		total += v
	}
	if total != n {
		t.Errorf("depth series sum to %v, want %d", total, n)
	}
	for range n {
		item, _ := q.Get()
		q.Done(item)
	}
	for label, v := range depthByPriority(t, reg, "q") {
		if v != 0 {
			t.Errorf("depth{priority=%q} = %v after draining", label, v)
		}
	}
	// New priorities now take the places of empty ones in the queue; a
	// priority seen before keeps its series.
	q.AddWithPriority("a", 1000)
	q.AddWithPriority("b", 1001)
	q.AddWithPriority("c", 0)
	got = depthByPriority(t, reg, "q")
	if got["exceeded_cardinality_limit"] != 2 || got["0"] != 1 {
		t.Errorf("depth after new priorities = %v, want 2 in the overflow series and 1 at priority 0", got)
	}
}
