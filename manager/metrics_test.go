package manager

import (
	"context"
	"errors"
	"runtime"
	"slices"
	"sort"
	"strings"
	"testing"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/workqueue"
)

// family is the shape of a metric family as Prometheus sees it.
type family struct {
	typ     dto.MetricType
	labels  []string // sorted
	buckets []float64
}

// shapes gathers reg and returns the shape of every family in it, from
// its first series.
func shapes(t *testing.T, reg prometheus.Gatherer) map[string]family {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]family{}
	for _, mf := range mfs {
		f := family{typ: mf.GetType()}
		if len(mf.GetMetric()) > 0 {
			m := mf.GetMetric()[0]
			for _, l := range m.GetLabel() {
				f.labels = append(f.labels, l.GetName())
			}
			sort.Strings(f.labels)
			for _, b := range m.GetHistogram().GetBucket() {
				f.buckets = append(f.buckets, b.GetUpperBound())
			}
		}
		out[mf.GetName()] = f
	}
	return out
}

// value returns the value of the series of name whose labels include
// those given as "k=v" pairs; ok is false if there is none.
func value(t *testing.T, reg prometheus.Gatherer, name string, labels ...string) (v float64, ok bool) {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
	series:
		for _, m := range mf.GetMetric() {
			have := map[string]string{}
			for _, l := range m.GetLabel() {
				have[l.GetName()] = l.GetValue()
			}
			for _, kv := range labels {
				k, v, _ := strings.Cut(kv, "=")
				if got, ok := have[k]; !ok || got != v {
					continue series
				}
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue(), true
			case m.Gauge != nil:
				return m.Gauge.GetValue(), true
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount()), true
			}
		}
	}
	return 0, false
}

// powers returns n powers of ten from first.
func powers(first float64, n int) []float64 {
	return prometheus.ExponentialBuckets(first, 10, n)
}

// TestFamilyShapes: the families controller-runtime exposes have its
// names, types, labels and buckets (as its source defines them) once a
// controller, a queue, a request, a Lease and a webhook have been seen.
func TestFamilyShapes(t *testing.T) {
	m, err := newMetrics(nil)
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveStart("c", 2)
	m.ObserveReconcile("c", "success", false, time.Millisecond)
	q := m.queues.QueueMetrics("c")
	q.DepthByPriority.WithPriority(workqueue.PriorityNormal).Set(0)
	q.QueueLatency.Observe(1)
	q.WorkDuration.Observe(1)
	m.ObserveRequest(context.Background(), rest.RequestInfo{Method: "GET", Host: "h:6443", Resource: "pods", Code: 200})
	m.leading("lease", false)
	m.RegisterWebhook("/validate")
	m.StartWebhook("/validate")
	m.ObserveWebhook("/validate", 200, time.Millisecond)

	var (
		C, G, H = dto.MetricType_COUNTER, dto.MetricType_GAUGE, dto.MetricType_HISTOGRAM
		ctrl    = []string{"controller"}
		queue   = []string{"controller", "name"}
	)
	want := map[string]family{
		"controller_runtime_reconcile_total":                 {C, []string{"controller", "result"}, nil},
		"controller_runtime_reconcile_errors_total":          {C, ctrl, nil},
		"controller_runtime_terminal_reconcile_errors_total": {C, ctrl, nil},
		"controller_runtime_reconcile_panics_total":          {C, ctrl, nil},
		"controller_runtime_reconcile_timeouts_total":        {C, ctrl, nil},
		"controller_runtime_reconcile_time_seconds": {H, ctrl, []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3,
			0.35, 0.4, 0.45, 0.5, 0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20,
			25, 30, 40, 50, 60}},
		"controller_runtime_max_concurrent_reconciles":  {G, ctrl, nil},
		"controller_runtime_active_workers":             {G, ctrl, nil},
		"workqueue_depth":                               {G, []string{"controller", "name", "priority"}, nil},
		"workqueue_adds_total":                          {C, queue, nil},
		"workqueue_queue_duration_seconds":              {H, queue, powers(1e-8, 12)},
		"workqueue_work_duration_seconds":               {H, queue, powers(1e-8, 12)},
		"workqueue_unfinished_work_seconds":             {G, queue, nil},
		"workqueue_longest_running_processor_seconds":   {G, queue, nil},
		"workqueue_retries_total":                       {C, queue, nil},
		"rest_client_requests_total":                    {C, []string{"code", "host", "method"}, nil},
		"leader_election_master_status":                 {G, []string{"name"}, nil},
		"controller_runtime_webhook_latency_seconds":    {H, []string{"webhook"}, powers(1e-8, 12)},
		"controller_runtime_webhook_requests_total":     {C, []string{"code", "webhook"}, nil},
		"controller_runtime_webhook_requests_in_flight": {G, []string{"webhook"}, nil},
		"loom_rest_requests_total":                      {C, []string{"code", "method", "resource"}, nil},
		"loom_rest_request_duration_seconds":            {H, []string{"method", "resource"}, prometheus.ExponentialBuckets(0.001, 2, 16)},
	}
	got := shapes(t, m.reg)
	for name, w := range want {
		g, ok := got[name]
		if !ok {
			t.Errorf("%s missing", name)
			continue
		}
		if g.typ != w.typ || !slices.Equal(g.labels, w.labels) || !bucketsEqual(g.buckets, w.buckets) {
			t.Errorf("%s = %v %v %v, want %v %v %v", name, g.typ, g.labels, g.buckets, w.typ, w.labels, w.buckets)
		}
	}
	// The default registry has the Go runtime and process collectors (the
	// latter reads /proc).
	wantCollected := []string{"go_goroutines"}
	if runtime.GOOS == "linux" {
		wantCollected = append(wantCollected, "process_cpu_seconds_total")
	}
	for _, name := range wantCollected {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from the default registry", name)
		}
	}
}

// bucketsEqual compares bucket bounds up to rounding.
func bucketsEqual(a, b []float64) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if d := a[i] - b[i]; d > 1e-9*b[i] || d < -1e-9*b[i] {
			return false
		}
	}
	return true
}

// TestReconcileOutcomes: each of Loom's reconcile outcomes lands on the
// controller-runtime series that count the same event.
func TestReconcileOutcomes(t *testing.T) {
	tests := []struct {
		outcome  string
		timedOut bool
		// want: series -> value after one reconcile
		result                             string
		errors, terminal, panics, timeouts float64
	}{
		{outcome: "success", result: "success"},
		{outcome: "requeue_after", result: "requeue_after"},
		{outcome: "error", result: "error", errors: 1},
		{outcome: "terminal_error", result: "error", errors: 1, terminal: 1},
		{outcome: "panic", result: "error", errors: 1, panics: 1},
		{outcome: "error", timedOut: true, result: "error", errors: 1, timeouts: 1},
		{outcome: "success", timedOut: true, result: "success", timeouts: 1},
	}
	for _, tt := range tests {
		t.Run(tt.outcome, func(t *testing.T) {
			m, err := newMetrics(prometheus.NewRegistry())
			if err != nil {
				t.Fatal(err)
			}
			m.ObserveStart("c", 1)
			m.ObserveReconcile("c", tt.outcome, tt.timedOut, 30*time.Millisecond)
			for _, r := range []string{"success", "error", "requeue", "requeue_after"} {
				want := 0.0
				if r == tt.result {
					want = 1
				}
				if got, ok := value(t, m.reg, "controller_runtime_reconcile_total", "controller=c", "result="+r); !ok || got != want {
					t.Errorf("reconcile_total{result=%s} = %v (present %v), want %v", r, got, ok, want)
				}
			}
			for name, want := range map[string]float64{
				"controller_runtime_reconcile_errors_total":          tt.errors,
				"controller_runtime_terminal_reconcile_errors_total": tt.terminal,
				"controller_runtime_reconcile_panics_total":          tt.panics,
				"controller_runtime_reconcile_timeouts_total":        tt.timeouts,
				"controller_runtime_reconcile_time_seconds":          1, // observations
			} {
				if got, ok := value(t, m.reg, name, "controller=c"); !ok || got != want {
					t.Errorf("%s = %v (present %v), want %v", name, got, ok, want)
				}
			}
		})
	}
}

// TestWorkers: max_concurrent_reconciles is the worker count from the
// start; active_workers follows the workers taking and finishing keys.
func TestWorkers(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	m.ObserveStart("c", 4)
	steps := []struct {
		delta  int
		active float64
	}{{0, 0}, {1, 1}, {1, 2}, {-1, 1}, {-1, 0}}
	for _, s := range steps {
		if s.delta != 0 {
			m.ObserveActive("c", s.delta)
		}
		if got, ok := value(t, m.reg, "controller_runtime_active_workers", "controller=c"); !ok || got != s.active {
			t.Errorf("after %+d: active_workers = %v (present %v), want %v", s.delta, got, ok, s.active)
		}
	}
	if got, _ := value(t, m.reg, "controller_runtime_max_concurrent_reconciles", "controller=c"); got != 4 {
		t.Errorf("max_concurrent_reconciles = %v, want 4", got)
	}
}

// TestRESTRequests: rest_client_requests_total counts attempts by code
// ("<error>" when no response came), method and host.
func TestRESTRequests(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	attempts := []rest.RequestInfo{
		{Method: "GET", Host: "a:6443", Resource: "pods", Code: 200},
		{Method: "GET", Host: "a:6443", Resource: "pods", Code: 200},
		{Method: "POST", Host: "a:6443", Resource: "pods", Code: 429, Retrying: true},
		{Method: "POST", Host: "a:6443", Resource: "pods", Code: 201, Attempt: 1},
		{Method: "GET", Host: "b", Resource: "pods", Err: errors.New("refused")},
	}
	for _, a := range attempts {
		m.ObserveRequest(context.Background(), a)
	}
	tests := []struct {
		code, method, host string
		want               float64
	}{
		{"200", "GET", "a:6443", 2},
		{"429", "POST", "a:6443", 1},
		{"201", "POST", "a:6443", 1},
		{"<error>", "GET", "b", 1},
	}
	for _, tt := range tests {
		if got, ok := value(t, m.reg, "rest_client_requests_total", "code="+tt.code, "method="+tt.method, "host="+tt.host); !ok || got != tt.want {
			t.Errorf("rest_client_requests_total{%s %s %s} = %v (present %v), want %v", tt.code, tt.method, tt.host, got, ok, tt.want)
		}
	}
	if got, _ := value(t, m.reg, "loom_rest_requests_total", "code=0", "method=GET", "resource=pods"); got != 1 {
		t.Errorf("loom_rest_requests_total{code=0} = %v, want 1", got)
	}
}

// TestWebhookSeries: a registered webhook has its 200 and 500 series at
// zero and no request in flight; requests move the in-flight gauge up
// and back, and are counted by code and timed.
func TestWebhookSeries(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	const w = "/validate-foo"
	m.RegisterWebhook(w)
	type want struct{ ok200, ok500, inFlight, latency float64 }
	check := func(step string, x want) {
		t.Helper()
		for _, c := range []struct {
			name   string
			labels []string
			want   float64
		}{
			{"controller_runtime_webhook_requests_total", []string{"code=200"}, x.ok200},
			{"controller_runtime_webhook_requests_total", []string{"code=500"}, x.ok500},
			{"controller_runtime_webhook_requests_in_flight", nil, x.inFlight},
			{"controller_runtime_webhook_latency_seconds", nil, x.latency},
		} {
			got, ok := value(t, m.reg, c.name, append([]string{"webhook=" + w}, c.labels...)...)
			if c.name == "controller_runtime_webhook_latency_seconds" && c.want == 0 && !ok {
				continue // a histogram series appears with its first observation
			}
			if !ok || got != c.want {
				t.Errorf("%s: %s%v = %v (present %v), want %v", step, c.name, c.labels, got, ok, c.want)
			}
		}
	}
	check("registered", want{})
	m.StartWebhook(w)
	m.StartWebhook(w)
	check("two in flight", want{inFlight: 2})
	m.ObserveWebhook(w, 200, time.Millisecond)
	check("one answered", want{ok200: 1, inFlight: 1, latency: 1})
	m.ObserveWebhook(w, 500, time.Millisecond)
	check("both answered", want{ok200: 1, ok500: 1, latency: 2})

	// Panics are counted by kind, without labels, from zero.
	steps := []struct {
		conversion          bool
		admission, converts float64
	}{{false, 1, 0}, {true, 1, 1}, {false, 2, 1}}
	for _, name := range []string{"controller_runtime_webhook_panics_total", "controller_runtime_conversion_webhook_panics_total"} {
		if got, ok := value(t, m.reg, name); !ok || got != 0 {
			t.Errorf("%s = %v (present %v), want 0", name, got, ok)
		}
	}
	for i, s := range steps {
		m.ObservePanic(w, s.conversion)
		a, _ := value(t, m.reg, "controller_runtime_webhook_panics_total")
		c, _ := value(t, m.reg, "controller_runtime_conversion_webhook_panics_total")
		if a != s.admission || c != s.converts {
			t.Errorf("step %d: panics admission %v conversion %v, want %v %v", i, a, c, s.admission, s.converts)
		}
	}
}

// TestLeaderStatus: leader_election_master_status follows leadership of
// each Lease.
func TestLeaderStatus(t *testing.T) {
	m, err := newMetrics(prometheus.NewRegistry())
	if err != nil {
		t.Fatal(err)
	}
	steps := []struct {
		lease string
		leads bool
		want  map[string]float64
	}{
		{"a", false, map[string]float64{"a": 0}},
		{"a", true, map[string]float64{"a": 1}},
		{"b", false, map[string]float64{"a": 1, "b": 0}},
		{"a", false, map[string]float64{"a": 0, "b": 0}},
	}
	for i, s := range steps {
		m.leading(s.lease, s.leads)
		for lease, want := range s.want {
			if got, ok := value(t, m.reg, "leader_election_master_status", "name="+lease); !ok || got != want {
				t.Errorf("step %d: leader_election_master_status{name=%s} = %v (present %v), want %v", i, lease, got, ok, want)
			}
		}
	}
}

// TestUserRegistry: a registry given in Options gets the manager's
// families and stays the user's to extend.
func TestUserRegistry(t *testing.T) {
	reg := prometheus.NewRegistry()
	m, err := newMetrics(reg)
	if err != nil {
		t.Fatal(err)
	}
	mine := prometheus.NewCounter(prometheus.CounterOpts{Name: "my_total", Help: "mine"})
	if err := reg.Register(mine); err != nil {
		t.Fatal(err)
	}
	m.ObserveStart("c", 1)
	got := shapes(t, reg)
	for _, name := range []string{"my_total", "controller_runtime_reconcile_total", "controller_runtime_max_concurrent_reconciles"} {
		if _, ok := got[name]; !ok {
			t.Errorf("%s missing from the user's registry", name)
		}
	}
	// Registering the manager's metrics twice in one registry fails.
	if _, err := newMetrics(reg); err == nil {
		t.Error("second newMetrics on the same registry succeeded")
	}
}
