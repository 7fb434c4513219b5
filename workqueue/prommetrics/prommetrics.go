package prommetrics

import (
	"errors"
	"fmt"
	"strconv"
	"sync"
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
	// "priority" on workqueue_depth, which then has a series per priority
	// of ready items, such as "0" and "-100" (see [Provider]). Default
	// false: the "name" label only, as in client-go, with workqueue_depth
	// counting the ready items of every priority.
	ControllerLabels bool
}

// Provider is a [workqueue.MetricsProvider] backed by Prometheus vectors
// labelled by queue name. It is safe for concurrent use; create one with
// [New], the zero value is not usable. Queues with the same name share
// their series.
//
// With Options.ControllerLabels, the depth of a queue is split by
// priority: the "priority" label holds the priority in decimal. To bound
// the number of series, a queue's first 25 distinct priorities have their
// own series; the ready items of any other priority are counted in one
// series labelled "exceeded_cardinality_limit". These depth series add up
// what every queue of the name holds.
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

// QueueMetrics returns the series of the queue named name. With
// Options.ControllerLabels, Depth is nil and DepthByPriority set.
func (p *Provider) QueueMetrics(name string) workqueue.Metrics {
	lv := []string{name}
	var depth workqueue.Gauge
	var byPriority workqueue.PriorityGauge
	if p.controller {
		lv = []string{name, name}
		byPriority = &priorityDepth{vec: p.depth, name: name, seen: map[int]bool{}}
	} else {
		depth = p.depth.WithLabelValues(name)
	}
	return workqueue.Metrics{
		Depth:                   depth,
		DepthByPriority:         byPriority,
		Adds:                    p.adds.WithLabelValues(lv...),
		QueueLatency:            p.latency.WithLabelValues(lv...),
		WorkDuration:            p.workDuration.WithLabelValues(lv...),
		UnfinishedWork:          p.unfinished.WithLabelValues(lv...),
		LongestRunningProcessor: p.longest.WithLabelValues(lv...),
		Retries:                 p.retries.WithLabelValues(lv...),
	}
}

// maxPriorities is the number of distinct priorities of one queue that
// get a depth series of their own.
const maxPriorities = 25

// overflowPriority labels the depth of the priorities beyond maxPriorities.
const overflowPriority = "exceeded_cardinality_limit"

// priorityDepth is the depth, by priority, of one queue.
type priorityDepth struct {
	vec  *prometheus.GaugeVec
	name string
	mu   sync.Mutex
	seen map[int]bool // priorities with a series of their own
}

func (d *priorityDepth) WithPriority(priority int) workqueue.Gauge {
	d.mu.Lock()
	label := overflowPriority
	if d.seen[priority] || len(d.seen) < maxPriorities {
		d.seen[priority] = true
		label = strconv.Itoa(priority)
	}
	d.mu.Unlock()
	return &deltaGauge{g: d.vec.WithLabelValues(d.name, d.name, label)}
}

// deltaGauge turns a queue's Set of one priority's depth into an Add of
// the difference to the series, so that queues, and priorities, that
// share a series add up instead of overwriting each other.
type deltaGauge struct {
	g    prometheus.Gauge
	mu   sync.Mutex
	last float64
}

func (d *deltaGauge) Set(v float64) {
	d.mu.Lock()
	d.g.Add(v - d.last)
	d.last = v
	d.mu.Unlock()
}
