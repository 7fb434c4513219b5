package prommetrics

import (
	"errors"
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loom-k8s/loom/workqueue"
)

// Options configures a [Provider]. The zero value is valid.
type Options struct {
	// Registerer is where the metrics are registered. Default nil:
	// prometheus.DefaultRegisterer.
	Registerer prometheus.Registerer
	// Namespace prefixes every metric name, as in
	// "<Namespace>_workqueue_depth". Default "": no prefix.
	Namespace string
}

// Provider is a [workqueue.MetricsProvider] backed by Prometheus vectors
// labelled by queue name. It is safe for concurrent use; create one with
// [New], the zero value is not usable. Queues with the same name share
// their series.
type Provider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
}

var _ workqueue.MetricsProvider = (*Provider)(nil)

// buckets are exponential from 10µs to about 100s, like client-go's.
var buckets = prometheus.ExponentialBuckets(10e-6, 10, 8)

// New creates the metric vectors and registers them. If a vector of the
// same name and shape is already registered (by another Provider on the
// same registry), New uses that one. Other registration failures are
// returned, wrapped, with the Prometheus error available to errors.As.
func New(opts Options) (*Provider, error) {
	reg := opts.Registerer
	if reg == nil {
		reg = prometheus.DefaultRegisterer
	}
	ns := opts.Namespace
	label := []string{"name"}
	p := &Provider{}
	var err error
	if p.depth, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "depth",
		Help: "Current number of ready items in the workqueue.",
	}, label)); err != nil {
		return nil, err
	}
	if p.adds, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by the workqueue.",
	}, label)); err != nil {
		return nil, err
	}
	if p.latency, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "queue_duration_seconds",
		Help: "How long in seconds an item stays ready in the workqueue before being handed out.", Buckets: buckets,
	}, label)); err != nil {
		return nil, err
	}
	if p.workDuration, err = register(reg, prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "work_duration_seconds",
		Help: "How long in seconds processing an item from the workqueue takes.", Buckets: buckets,
	}, label)); err != nil {
		return nil, err
	}
	if p.unfinished, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "unfinished_work_seconds",
		Help: "Total seconds that the items processing now have been processing; large values suggest stuck workers.",
	}, label)); err != nil {
		return nil, err
	}
	if p.longest, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "longest_running_processor_seconds",
		Help: "How many seconds the longest running item has been processing.",
	}, label)); err != nil {
		return nil, err
	}
	if p.retries, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "retries_total",
		Help: "Total number of rate-limited retries handled by the workqueue.",
	}, label)); err != nil {
		return nil, err
	}
	return p, nil
}

// register registers c, or returns the collector already registered in
// its place.
func register[C prometheus.Collector](reg prometheus.Registerer, c C) (C, error) {
	err := reg.Register(c)
	if err == nil {
		return c, nil
	}
	var are prometheus.AlreadyRegisteredError
	if errors.As(err, &are) {
		if existing, ok := are.ExistingCollector.(C); ok {
			return existing, nil
		}
	}
	var zero C
	return zero, fmt.Errorf("prommetrics: register workqueue metric: %w", err)
}

// QueueMetrics returns the series of the queue named name.
func (p *Provider) QueueMetrics(name string) workqueue.Metrics {
	return workqueue.Metrics{
		Depth:                   p.depth.WithLabelValues(name),
		Adds:                    p.adds.WithLabelValues(name),
		QueueLatency:            p.latency.WithLabelValues(name),
		WorkDuration:            p.workDuration.WithLabelValues(name),
		UnfinishedWork:          p.unfinished.WithLabelValues(name),
		LongestRunningProcessor: p.longest.WithLabelValues(name),
		Retries:                 p.retries.WithLabelValues(name),
	}
}
