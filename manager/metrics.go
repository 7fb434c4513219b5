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

// metrics are the manager's Prometheus series.
type metrics struct {
	reg        *prometheus.Registry
	reconciles *prometheus.CounterVec
	durations  *prometheus.HistogramVec
	requests   *prometheus.CounterVec
	latency    *prometheus.HistogramVec
	queues     *prommetrics.Provider
	webhooks   *prometheus.CounterVec
	webhookLat *prometheus.HistogramVec

	// Series looked up once per label set, not per reconcile.
	counters sync.Map // [2]string{controller, outcome} -> prometheus.Counter
	histos   sync.Map // controller -> prometheus.Observer
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
	m := &metrics{
		reg: reg,
		reconciles: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_controller_reconcile_total", Help: "Reconciles by controller and outcome (success, requeue_after, error, terminal_error, panic).",
		}, []string{"controller", "outcome"}),
		durations: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_controller_reconcile_duration_seconds", Help: "Time per reconcile.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"controller"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{
			Name: "loom_rest_requests_total", Help: "REST request attempts by method, resource and status code (0: no response).",
		}, []string{"method", "resource", "code"}),
		latency: prometheus.NewHistogramVec(prometheus.HistogramOpts{
			Name: "loom_rest_request_duration_seconds", Help: "Time until the response headers, per attempt.",
			Buckets: prometheus.ExponentialBuckets(0.001, 2, 16),
		}, []string{"method", "resource"}),
	}
	m.webhooks = prometheus.NewCounterVec(prometheus.CounterOpts{
		Name: "loom_webhook_requests_total", Help: "Webhook requests by webhook (its path) and HTTP status code; codes of 400 and above are errors (a denial is a 200).",
	}, []string{"webhook", "code"})
	m.webhookLat = prometheus.NewHistogramVec(prometheus.HistogramOpts{
		Name: "loom_webhook_request_duration_seconds", Help: "Time to answer a webhook request.",
		Buckets: prometheus.ExponentialBuckets(0.0005, 2, 16),
	}, []string{"webhook"})
	for _, c := range []prometheus.Collector{m.reconciles, m.durations, m.requests, m.latency, m.webhooks, m.webhookLat} {
		if err := reg.Register(c); err != nil {
			return nil, err
		}
	}
	q, err := prommetrics.New(prommetrics.Options{Registerer: reg, Namespace: "loom"})
	if err != nil {
		return nil, err
	}
	m.queues = q
	return m, nil
}

// ObserveReconcile implements controller.Metrics.
func (m *metrics) ObserveReconcile(controller, outcome string, d time.Duration) {
	k := [2]string{controller, outcome}
	c, ok := m.counters.Load(k)
	if !ok {
		c, _ = m.counters.LoadOrStore(k, m.reconciles.WithLabelValues(controller, outcome))
	}
	c.(prometheus.Counter).Inc()
	h, ok := m.histos.Load(controller)
	if !ok {
		h, _ = m.histos.LoadOrStore(controller, m.durations.WithLabelValues(controller))
	}
	h.(prometheus.Observer).Observe(d.Seconds())
}

// ObserveRequest implements rest.Observer.
// ObserveWebhook implements webhook.Metrics.
func (m *metrics) ObserveWebhook(name string, code int, d time.Duration) {
	m.webhooks.WithLabelValues(name, strconv.Itoa(code)).Inc()
	m.webhookLat.WithLabelValues(name).Observe(d.Seconds())
}

func (m *metrics) ObserveRequest(_ context.Context, info rest.RequestInfo) {
	res := info.Resource
	if info.Subresource != "" {
		res += "/" + info.Subresource
	}
	m.requests.WithLabelValues(info.Method, res, strconv.Itoa(info.Code)).Inc()
	m.latency.WithLabelValues(info.Method, res).Observe(info.Latency.Seconds())
}
