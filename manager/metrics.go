package manager

import (
	"context"
	"strconv"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"

	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/workqueue/prommetrics"
)

// The manager's series carry controller-runtime's names, types, labels and
// buckets where controller-runtime has an equivalent, so that dashboards and
// alerts written for it work unchanged; Loom's own series start with loom_.
// docs/observability.md lists them.

// Reconcile results, as controller-runtime's controller_runtime_reconcile_total
// labels them. Loom has no plain requeue (Result.Requeue): that series stays 0.
const (
	resultSuccess      = "success"
	resultError        = "error"
	resultRequeue      = "requeue"
	resultRequeueAfter = "requeue_after"
)

// reconcileBuckets are controller-runtime's reconcile_time_seconds buckets.
var reconcileBuckets = []float64{0.005, 0.01, 0.025, 0.05, 0.1, 0.15, 0.2, 0.25, 0.3, 0.35, 0.4, 0.45, 0.5,
	0.6, 0.7, 0.8, 0.9, 1.0, 1.25, 1.5, 1.75, 2.0, 2.5, 3.0, 3.5, 4.0, 4.5, 5, 6, 7, 8, 9, 10, 15, 20, 25, 30, 40, 50, 60}

// nativeHistogram sets the native-histogram options controller-runtime uses
// on its duration histograms.
func nativeHistogram(o prometheus.HistogramOpts) prometheus.HistogramOpts {
	o.NativeHistogramBucketFactor = 1.1
	o.NativeHistogramMaxBucketNumber = 100
	o.NativeHistogramMinResetDuration = time.Hour
	return o
}

// metrics are the manager's Prometheus series.
type metrics struct {
	reg *prometheus.Registry

	// Controllers.
	reconciles     *prometheus.CounterVec // {controller, result}
	errors         *prometheus.CounterVec // {controller}
	terminalErrors *prometheus.CounterVec
	panics         *prometheus.CounterVec
	timeouts       *prometheus.CounterVec
	reconcileTime  *prometheus.HistogramVec
	maxWorkers     *prometheus.GaugeVec
	activeWorkers  *prometheus.GaugeVec
	queues         *prommetrics.Provider

	// REST client.
	restRequests *prometheus.CounterVec // {code, method, host}
	requests     *prometheus.CounterVec // loom_: {method, resource, code}
	latency      *prometheus.HistogramVec

	// Leader election.
	leader *prometheus.GaugeVec // {name}

	// Webhooks.
	webhooks   *prometheus.CounterVec // {webhook, code}
	webhookLat *prometheus.HistogramVec
	inFlight   *prometheus.GaugeVec
	// Panics recovered in admission and conversion handlers; no labels,
	// as controller-runtime's.
	admissionPanics, conversionPanics prometheus.Counter

	// Sharding (loom_ only: controller-runtime has no sharding).
	shardRing    *prometheus.GaugeVec     // {ring}: live shards
	ringChanges  *prometheus.CounterVec   // {ring}
	shardMoves   *prometheus.CounterVec   // {ring, reason}
	shardObjects *prometheus.GaugeVec     // {ring, kind, shard}
	drainTime    *prometheus.HistogramVec // {ring}

	// Series looked up once per controller, not per reconcile.
	series sync.Map // controller -> *controllerSeries
}

// controllerSeries are one controller's reconcile series.
type controllerSeries struct {
	results                                  map[string]prometheus.Counter // by result label
	errors, terminalErrors, panics, timeouts prometheus.Counter
	time                                     prometheus.Observer
	active                                   prometheus.Gauge
}

// newMetrics registers the manager's series in reg; a nil reg means a new
// registry with the Go runtime and process collectors.
func newMetrics(reg *prometheus.Registry) (*metrics, error) {
	if reg == nil {
		reg = prometheus.NewRegistry()
		if err := reg.Register(collectors.NewGoCollector()); err != nil {
			return nil, err
		}
		if err := reg.Register(collectors.NewProcessCollector(collectors.ProcessCollectorOpts{})); err != nil {
			return nil, err
		}
	}
	ctrl := []string{"controller"}
	counter := func(name, help string) *prometheus.CounterVec {
		return prometheus.NewCounterVec(prometheus.CounterOpts{Name: name, Help: help}, ctrl)
	}
	gauge := func(name, help string) *prometheus.GaugeVec {
		return prometheus.NewGaugeVec(prometheus.GaugeOpts{Name: name, Help: help}, ctrl)
	}
	m := &metrics{
		reg: reg,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_reconcile_total",
			Help: "Reconciles per controller, by result: success, error (any error, terminal or not, and panics), requeue_after (a RequeueAfter without error), requeue (never in Loom).",
		}, []string{"controller", "result"}),
		errors:         counter("controller_runtime_reconcile_errors_total", "Reconciles that returned an error or panicked, per controller."),
		terminalErrors: counter("controller_runtime_terminal_reconcile_errors_total", "Reconciles that returned a terminal error, per controller."),
		panics:         counter("controller_runtime_reconcile_panics_total", "Reconciles that panicked, per controller."),
		timeouts:       counter("controller_runtime_reconcile_timeouts_total", "Reconciles whose controller's Timeout expired before they returned, per controller."),
		reconcileTime: prometheus.NewHistogramVec(nativeHistogram(prometheus.HistogramOpts{
			Name: "controller_runtime_reconcile_time_seconds", Help: "Time per reconcile, per controller.",
			Buckets: reconcileBuckets,
		}), ctrl),
		maxWorkers:    gauge("controller_runtime_max_concurrent_reconciles", "Workers per controller: the most reconciles it runs at once."),
		activeWorkers: gauge("controller_runtime_active_workers", "Workers reconciling now, per controller."),
		restRequests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "rest_client_requests_total",
			Help: "REST request attempts by status code (<error>: no response), method and API server host.",
		}, []string{"code", "method", "host"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_rest_requests_total", Help: "REST request attempts by method, resource and status code (0: no response).",
		}, []string{"method", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_rest_request_duration_seconds", Help: "Time until the response headers, per attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"method", "resource"}),
		leader: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "leader_election_master_status",
			Help: "1 while this manager leads through the Lease named by the name label, 0 while it does not.",
		}, []string{"name"}),
		webhooks: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_requests_total",
			Help: "Webhook requests by webhook (its path) and HTTP status code; a denial is a 200.",
		}, []string{"webhook", "code"}),
		webhookLat: prometheus.NewHistogramVec(nativeHistogram(prometheus.HistogramOpts{
			Name: "controller_runtime_webhook_latency_seconds", Help: "Time to answer a webhook request, per webhook.",
			Buckets: prometheus.ExponentialBuckets(10e-9, 10, 12),
		}), []string{"webhook"}),
		inFlight: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "controller_runtime_webhook_requests_in_flight", Help: "Webhook requests being answered now, per webhook.",
		}, []string{"webhook"}),
		admissionPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_runtime_webhook_panics_total", Help: "Panics recovered in admission webhook handlers.",
		}),
		conversionPanics: prometheus.NewCounter(prometheus.CounterOpts{
			Name: "controller_runtime_conversion_webhook_panics_total", Help: "Panics recovered in conversion webhook handlers.",
		}),
		shardRing: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "loom_shard_ring_members", Help: "Live shards of the ring, as the leader last saw them.",
		}, []string{"ring"}),
		ringChanges: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_shard_ring_changes_total", Help: "Changes of the ring's live shards seen by the leader.",
		}, []string{"ring"}),
		shardMoves: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_shard_assignments_total",
			Help: "Assignments made by this replica, by reason: new (an object given its bucket label), bucket (a wrong bucket label corrected), handover (a bucket this shard took from the ring's other shards).",
		}, []string{"ring", "reason"}),
		shardObjects: prometheus.NewGaugeVec(prometheus.GaugeOpts{
			Name: "loom_shard_objects", Help: "Objects per shard (\"\" for those without a bucket label) and kind, counted by the leader's last pass.",
		}, []string{"ring", "kind", "shard"}),
		drainTime: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_shard_drain_seconds", Help: "Time a shard took to give up the buckets the ring moved off it: from its seeing the change to its Lease no longer claiming them.",
			Buckets: prometheus.ExponentialBuckets(0.01, 2, 14),
		}, []string{"ring"}),
	}
	for _, c := range []prometheus.Collector{
		m.reconciles, m.errors, m.terminalErrors, m.panics, m.timeouts, m.reconcileTime, m.maxWorkers, m.activeWorkers,
		m.restRequests, m.requests, m.latency, m.leader, m.webhooks, m.webhookLat, m.inFlight,
		m.admissionPanics, m.conversionPanics,
		m.shardRing, m.ringChanges, m.shardMoves, m.shardObjects, m.drainTime,
	} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	q, err := prommetrics.New(prommetrics.Options{Registerer: reg, ControllerLabels: true})
	if err != nil {
		return nil, err
	}
	m.queues = q
	return m, nil
}

// controller returns the series of the controller named name, creating
// them (at zero) the first time.
func (m *metrics) controller(name string) *controllerSeries {
	if s, ok := m.series.Load(name); ok {
		return s.(*controllerSeries)
	}
	s := &controllerSeries{
		results:        map[string]prometheus.Counter{},
		errors:         m.errors.WithLabelValues(name),
		terminalErrors: m.terminalErrors.WithLabelValues(name),
		panics:         m.panics.WithLabelValues(name),
		timeouts:       m.timeouts.WithLabelValues(name),
		time:           m.reconcileTime.WithLabelValues(name),
		active:         m.activeWorkers.WithLabelValues(name),
	}
	for _, r := range []string{resultSuccess, resultError, resultRequeue, resultRequeueAfter} {
		s.results[r] = m.reconciles.WithLabelValues(name, r)
	}
	v, _ := m.series.LoadOrStore(name, s)
	return v.(*controllerSeries)
}

// ObserveStart implements controller.Metrics.
func (m *metrics) ObserveStart(controller string, workers int) {
	m.controller(controller)
	m.maxWorkers.WithLabelValues(controller).Set(float64(workers))
}

// ObserveActive implements controller.Metrics.
func (m *metrics) ObserveActive(controller string, delta int) {
	m.controller(controller).active.Add(float64(delta))
}

// ObserveReconcile implements controller.Metrics. Loom's outcomes map onto
// controller-runtime's series as controller-runtime counts the same
// events: every error, terminal or not, and every panic (which
// controller-runtime recovers into an error) is an "error" result and a
// reconcile error; terminal errors and panics are also counted on their own.
func (m *metrics) ObserveReconcile(controller, outcome string, timedOut bool, d time.Duration) {
	s := m.controller(controller)
	result := resultSuccess
	switch outcome {
	case "requeue_after":
		result = resultRequeueAfter
	case "error":
		result = resultError
		s.errors.Inc()
	case "terminal_error":
		result = resultError
		s.errors.Inc()
		s.terminalErrors.Inc()
	case "panic":
		result = resultError
		s.errors.Inc()
		s.panics.Inc()
	}
	s.results[result].Inc()
	if timedOut {
		s.timeouts.Inc()
	}
	s.time.Observe(d.Seconds())
}

// ObserveRequest implements rest.Observer.
func (m *metrics) ObserveRequest(_ context.Context, info rest.RequestInfo) {
	code := "<error>"
	if info.Code != 0 {
		code = strconv.Itoa(info.Code)
	}
	m.restRequests.WithLabelValues(code, info.Method, info.Host).Inc()
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	m.requests.WithLabelValues(info.Method, res, strconv.Itoa(info.Code)).Inc()
	m.latency.WithLabelValues(info.Method, res).Observe(info.Latency.Seconds())
}

// leading sets leader_election_master_status for the Lease named name.
func (m *metrics) leading(name string, leads bool) {
	v := 0.0
	if leads {
		v = 1
	}
	m.leader.WithLabelValues(name).Set(v)
}

// RegisterWebhook implements webhook.Metrics: the series of the likeliest
// codes start at zero.
func (m *metrics) RegisterWebhook(name string) {
	m.webhooks.WithLabelValues(name, "200")
	m.webhooks.WithLabelValues(name, "500")
	m.inFlight.WithLabelValues(name)
}

// StartWebhook implements webhook.Metrics.
func (m *metrics) StartWebhook(name string) {
	m.inFlight.WithLabelValues(name).Inc()
}

// ObserveWebhook implements webhook.Metrics.
func (m *metrics) ObserveWebhook(name string, code int, d time.Duration) {
	m.inFlight.WithLabelValues(name).Dec()
	m.webhooks.WithLabelValues(name, strconv.Itoa(code)).Inc()
	m.webhookLat.WithLabelValues(name).Observe(d.Seconds())
}

// ObservePanic implements webhook.Metrics.
func (m *metrics) ObservePanic(_ string, conversion bool) {
	if conversion {
		m.conversionPanics.Inc()
	} else {
		m.admissionPanics.Inc()
	}
}

// ObserveRing implements shard.Metrics.
func (m *metrics) ObserveRing(ring string, shards int) {
	m.shardRing.WithLabelValues(ring).Set(float64(shards))
	m.ringChanges.WithLabelValues(ring).Inc()
}

// ObserveMove implements shard.Metrics.
func (m *metrics) ObserveMove(ring, reason string) {
	m.shardMoves.WithLabelValues(ring, reason).Inc()
}

// ObserveObjects implements shard.Metrics. The series of a shard counted
// before but not now (one that left) are removed.
func (m *metrics) ObserveObjects(ring, kind string, perShard map[string]int) {
	m.shardObjects.DeletePartialMatch(prometheus.Labels{"ring": ring, "kind": kind})
	for s, n := range perShard {
		m.shardObjects.WithLabelValues(ring, kind, s).Set(float64(n))
	}
}

// ObserveDrain implements shard.Metrics.
func (m *metrics) ObserveDrain(ring string, d time.Duration) {
	m.drainTime.WithLabelValues(ring).Observe(d.Seconds())
}
