package prommetrics_test

import (
	"errors"
	"testing"

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
