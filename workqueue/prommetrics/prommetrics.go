package prommetrics

import (
	"errors"
	"fmt"
	"time"

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
	// ControllerLabels gives the metrics the labels of controller-runtime's
	// controller queues: "controller" on every metric, with the queue's
	// name as value (a controller's queue is named after it), and
	// "priority" on workqueue_depth, always empty (Loom's queues have no
	// priorities). Default false: the "name" label only, as in client-go.
	ControllerLabels bool
}

// Provider is a [workqueue.MetricsProvider] backed by Prometheus vectors
// labelled by queue name. It is safe for concurrent use; create one with
// [New], the zero value is not usable. Queues with the same name share
// their series.
type Provider struct {
	depth, unfinished, longest *prometheus.GaugeVec
	adds, retries              *prometheus.CounterVec
	latency, workDuration      *prometheus.HistogramVec
	controller                 bool // ControllerLabels
}

var _ workqueue.MetricsProvider = (*Provider)(nil)

// buckets are controller-runtime's: powers of ten from 10ns to 1000s.
var buckets = prometheus.ExponentialBuckets(10e-9, 10, 12)

// histogram returns the options of a duration histogram, with the
// native-histogram settings controller-runtime uses.
func histogram(ns, name, help string) prometheus.HistogramOpts {
	return prometheus.HistogramOpts{
		Namespace: ns, Subsystem: "workqueue", Name: name, Help: help, Buckets: buckets,
		NativeHistogramBucketFactor:     1.1,
		NativeHistogramMaxBucketNumber:  100,
		NativeHistogramMinResetDuration: time.Hour,
	}
}

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
	label, depthLabel := []string{"name"}, []string{"name"}
	if opts.ControllerLabels {
		label = []string{"name", "controller"}
		depthLabel = []string{"name", "controller", "priority"}
	}
	p := &Provider{controller: opts.ControllerLabels}
	var err error
	if p.depth, err = register(reg, prometheus.NewGaugeVec(prometheus.GaugeOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "depth",
		Help: "Current number of ready items in the workqueue.",
	}, depthLabel)); err != nil {
		return nil, err
	}
	if p.adds, err = register(reg, prometheus.NewCounterVec(prometheus.CounterOpts{
		Namespace: ns, Subsystem: "workqueue", Name: "adds_total",
		Help: "Total number of adds handled by the workqueue.",
	}, label)); err != nil {
		return nil, err
	}
	if p.latency, err = register(reg, prometheus.NewHistogramVec(histogram(ns, "queue_duration_seconds",
		"How long in seconds an item stays ready in the workqueue before being handed out."), label)); err != nil {
		return nil, err
	}
	if p.workDuration, err = register(reg, prometheus.NewHistogramVec(histogram(ns, "work_duration_seconds",
		"How long in seconds processing an item from the workqueue takes."), label)); err != nil {
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
		Help: "Total number of items added to the workqueue with a positive delay (rate-limited retries and delayed adds).",
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
	lv, depth := []string{name}, []string{name}
	if p.controller {
		lv, depth = []string{name, name}, []string{name, name, ""}
	}
	return workqueue.Metrics{
		Depth:                   p.depth.WithLabelValues(depth...),
		Adds:                    p.adds.WithLabelValues(lv...),
		QueueLatency:            p.latency.WithLabelValues(lv...),
		WorkDuration:            p.workDuration.WithLabelValues(lv...),
		UnfinishedWork:          p.unfinished.WithLabelValues(lv...),
		LongestRunningProcessor: p.longest.WithLabelValues(lv...),
		Retries:                 p.retries.WithLabelValues(lv...),
	}
}
