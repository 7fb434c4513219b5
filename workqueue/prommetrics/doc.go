// Package prommetrics records workqueue metrics in Prometheus.
//
// # Use
//
//	p, err := prommetrics.New(prommetrics.Options{Registerer: reg})
//	if err != nil { ... }
//	q := workqueue.New(workqueue.Options[string]{Name: "pods", Metrics: p})
//
// # Metrics
//
// Every metric has a "name" label holding the queue's name; with
// Options.ControllerLabels, also the "controller" (and, on
// workqueue_depth, "priority") labels of controller-runtime's controller
// queues, workqueue_depth then having a series per priority of ready
// items. The names and histogram buckets match controller-runtime's, so
// existing dashboards keep working: workqueue_depth, workqueue_adds_total,
// workqueue_queue_duration_seconds, workqueue_work_duration_seconds,
// workqueue_unfinished_work_seconds,
// workqueue_longest_running_processor_seconds and workqueue_retries_total.
//
// The package is separate from workqueue so that programs which do not use
// Prometheus do not link it.
package prommetrics
