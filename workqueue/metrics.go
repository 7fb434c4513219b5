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
	// DepthByPriority, when set, gives the gauges of the number of ready
	// items of each priority, which the queue sets as it sets Depth.
	DepthByPriority PriorityGauge
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
	// Retries counts the items added with a delay: AddAfter (and so
	// AddRateLimited) calls with a positive duration on a queue that is not
	// shutting down.
	Retries Counter
}

// PriorityGauge is a family of gauges, one per priority, such as a
// Prometheus gauge vector with a priority label. Implementations must be
// safe for concurrent use.
type PriorityGauge interface {
	// WithPriority returns the gauge of priority. A queue calls it when it
	// first holds ready items of priority, and again if it has since
	// dropped its record of that priority (which it does only after
	// setting the gauge to 0), so it should be quick; it may return a new
	// gauge each time.
	WithPriority(priority int) Gauge
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
	epoch  time.Time // entry times are nanoseconds since epoch
	period time.Duration
	timer  clock.Timer
	// Processing entries, oldest first, as slab indices; -1 if none.
	head, tail int32
}

func newQueueMetrics[T comparable](q *Queue[T], m Metrics, period time.Duration) *queueMetrics[T] {
	if period <= 0 {
		period = DefaultMetricsUpdatePeriod
	}
	qm := &queueMetrics[T]{m: m, q: q, clock: q.clock, epoch: q.clock.Now(), period: period, head: -1, tail: -1}
	if m.UnfinishedWork != nil || m.LongestRunningProcessor != nil {
		// Arm the periodic update under the queue's mutex: on a real clock
		// it may fire before AfterFunc returns, and tick reads qm.timer.
		q.mu.Lock()
		qm.timer = q.clock.AfterFunc(period, qm.tick)
		q.mu.Unlock()
	}
	return qm
}

func (qm *queueMetrics[T]) now() int64 { return int64(qm.clock.Now().Sub(qm.epoch)) }

// levelDepth sets the depth gauges after the number of ready items of
// level l changed.
func (qm *queueMetrics[T]) levelDepth(l *level) {
	if qm.m.Depth != nil {
		qm.m.Depth.Set(float64(qm.q.nready))
	}
	if l.gauge != nil {
		l.gauge.Set(float64(l.live))
	}
}

// levelGauge returns the depth gauge of a new level of priority prio, or
// nil.
func (qm *queueMetrics[T]) levelGauge(prio int) Gauge {
	if qm.m.DepthByPriority == nil {
		return nil
	}
	return qm.m.DepthByPriority.WithPriority(prio)
}

func (qm *queueMetrics[T]) added() {
	if qm.m.Adds != nil {
		qm.m.Adds.Inc()
	}
}

// readied records that entry i became ready, in level l.
func (qm *queueMetrics[T]) readied(i int32, l *level) {
	qm.levelDepth(l)
	if qm.m.QueueLatency != nil {
		qm.q.slab[i].at = qm.now()
	}
}

// started records that entry i was handed out by Get, from level l.
func (qm *queueMetrics[T]) started(i int32, l *level) {
	qm.levelDepth(l)
	now := qm.now()
	slab := qm.q.slab
	e := &slab[i]
	if qm.m.QueueLatency != nil {
		qm.m.QueueLatency.Observe(seconds(now - e.at))
	}
	e.at = now
	e.prev, e.next = qm.tail, -1
	if qm.tail >= 0 {
		slab[qm.tail].next = i
	} else {
		qm.head = i
	}
	qm.tail = i
}

// finished records that Done was called for entry i.
func (qm *queueMetrics[T]) finished(i int32) {
	slab := qm.q.slab
	e := &slab[i]
	if qm.m.WorkDuration != nil {
		qm.m.WorkDuration.Observe(seconds(qm.now() - e.at))
	}
	if e.prev >= 0 {
		slab[e.prev].next = e.next
	} else {
		qm.head = e.next
	}
	if e.next >= 0 {
		slab[e.next].prev = e.prev
	} else {
		qm.tail = e.prev
	}
	e.prev, e.next = -1, -1
}

func seconds(ns int64) float64 { return time.Duration(ns).Seconds() }

func (qm *queueMetrics[T]) retried() {
	if qm.m.Retries != nil {
		qm.m.Retries.Inc()
	}
}

// tick recomputes the unfinished-work gauges, then re-arms itself unless
// the queue is shutting down.
func (qm *queueMetrics[T]) tick() {
	qm.q.mu.Lock()
	defer qm.q.mu.Unlock()
	if qm.q.shutting {
		return
	}
	qm.update(qm.now())
	qm.timer.Reset(qm.period)
}

func (qm *queueMetrics[T]) update(now int64) {
	var total, longest int64
	slab := qm.q.slab
	for i := qm.head; i >= 0; i = slab[i].next {
		total += now - slab[i].at
	}
	if qm.head >= 0 {
		longest = now - slab[qm.head].at
	}
	if qm.m.UnfinishedWork != nil {
		qm.m.UnfinishedWork.Set(seconds(total))
	}
	if qm.m.LongestRunningProcessor != nil {
		qm.m.LongestRunningProcessor.Set(seconds(longest))
	}
}

// stop stops the periodic update. It runs with the queue's mutex held.
func (qm *queueMetrics[T]) stop() {
	if qm.timer != nil {
		qm.timer.Stop()
	}
}
