package workqueue

import (
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// Counter is a metric that only goes up. Implementations must be safe for
// concurrent use.
type Counter interface {
	Inc()
}

// Gauge is a metric that is set to a value. Implementations must be safe
// for concurrent use.
type Gauge interface {
	Set(v float64)
}

// Histogram observes values, such as durations in seconds.
// Implementations must be safe for concurrent use.
type Histogram interface {
	Observe(v float64)
}

// Metrics are the instruments of one queue. A nil field is not recorded.
// Durations are in seconds.
type Metrics struct {
	// Depth is set to the number of ready items.
	Depth Gauge
	// Adds counts Adds that made an item ready or marked a processing
	// item for another round; Adds that collapse into a ready item are
	// not counted.
	Adds Counter
	// QueueLatency observes how long each item was ready before a Get
	// handed it out.
	QueueLatency Histogram
	// WorkDuration observes how long each item was processing, from Get
	// to Done.
	WorkDuration Histogram
	// UnfinishedWork is set to the total time that the items processing
	// now have been processing. A value that grows while the queue is
	// idle points to a stuck worker.
	UnfinishedWork Gauge
	// LongestRunningProcessor is set to how long the oldest processing
	// item has been processing.
	LongestRunningProcessor Gauge
	// Retries counts AddRateLimited calls.
	Retries Counter
}

// MetricsProvider creates the instruments of a queue. The prommetrics
// package adapts it to Prometheus; any other system can implement it.
type MetricsProvider interface {
	// QueueMetrics returns the instruments of the queue named name. It is
	// called once, by [New].
	QueueMetrics(name string) Metrics
}

// DefaultMetricsUpdatePeriod is the default of [Options].MetricsUpdatePeriod.
const DefaultMetricsUpdatePeriod = 500 * time.Millisecond

// queueMetrics records one queue's metrics. Every method runs with the
// queue's mutex held.
type queueMetrics[T comparable] struct {
	m      Metrics
	q      *Queue[T]
	clock  clock.Clock
	period time.Duration
	timer  clock.Timer
	// Processing entries, oldest first.
	head, tail *entry[T]
}

func newQueueMetrics[T comparable](q *Queue[T], m Metrics, period time.Duration) *queueMetrics[T] {
	if period <= 0 {
		period = DefaultMetricsUpdatePeriod
	}
	qm := &queueMetrics[T]{m: m, q: q, clock: q.clock, period: period}
	if m.UnfinishedWork != nil || m.LongestRunningProcessor != nil {
		qm.timer = q.clock.AfterFunc(period, qm.tick)
	}
	return qm
}

func (qm *queueMetrics[T]) depth() {
	if qm.m.Depth != nil {
		qm.m.Depth.Set(float64(qm.q.ring.len()))
	}
}

func (qm *queueMetrics[T]) added() {
	if qm.m.Adds != nil {
		qm.m.Adds.Inc()
	}
}

// readied records that e became ready.
func (qm *queueMetrics[T]) readied(e *entry[T]) {
	qm.depth()
	if qm.m.QueueLatency != nil {
		e.readyAt = qm.clock.Now()
	}
}

// started records that e was handed out by Get.
func (qm *queueMetrics[T]) started(e *entry[T]) {
	qm.depth()
	now := qm.clock.Now()
	if qm.m.QueueLatency != nil {
		qm.m.QueueLatency.Observe(now.Sub(e.readyAt).Seconds())
	}
	e.startedAt = now
	e.prev, e.next = qm.tail, nil
	if qm.tail != nil {
		qm.tail.next = e
	} else {
		qm.head = e
	}
	qm.tail = e
}

// finished records that Done was called for e.
func (qm *queueMetrics[T]) finished(e *entry[T]) {
	if qm.m.WorkDuration != nil {
		qm.m.WorkDuration.Observe(qm.clock.Now().Sub(e.startedAt).Seconds())
	}
	if e.prev != nil {
		e.prev.next = e.next
	} else {
		qm.head = e.next
	}
	if e.next != nil {
		e.next.prev = e.prev
	} else {
		qm.tail = e.prev
	}
	e.prev, e.next = nil, nil
}

func (qm *queueMetrics[T]) retried() {
	if qm.m.Retries != nil {
		qm.m.Retries.Inc()
	}
}

// tick recomputes the unfinished-work gauges, then re-arms itself unless
// the queue is shutting down.
func (qm *queueMetrics[T]) tick() {
	now := qm.clock.Now()
	qm.q.mu.Lock()
	defer qm.q.mu.Unlock()
	if qm.q.shutting {
		return
	}
	qm.update(now)
	qm.timer.Reset(qm.period)
}

func (qm *queueMetrics[T]) update(now time.Time) {
	var total, longest time.Duration
	for e := qm.head; e != nil; e = e.next {
		total += now.Sub(e.startedAt)
	}
	if qm.head != nil {
		longest = now.Sub(qm.head.startedAt)
	}
	if qm.m.UnfinishedWork != nil {
		qm.m.UnfinishedWork.Set(total.Seconds())
	}
	if qm.m.LongestRunningProcessor != nil {
		qm.m.LongestRunningProcessor.Set(longest.Seconds())
	}
}

// stop stops the periodic update. It runs with the queue's mutex held.
func (qm *queueMetrics[T]) stop() {
	if qm.timer != nil {
		qm.timer.Stop()
	}
}
