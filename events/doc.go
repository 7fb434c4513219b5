// Package events records Kubernetes Events about objects: what a
// controller did and why, where `kubectl describe` and `kubectl events`
// show it.
//
// # Getting started
//
//	rec, err := events.New(rc, events.Options{Controller: "example.com/widget-controller"})
//	go rec.Start(ctx) // sends in the background until ctx ends
//	rec.Eventf(widget, corev1.EventTypeNormal, "Scaled", "scaled to %d replicas", n)
//
// # Best effort, never blocking
//
// Recording never blocks the caller: events go into a bounded buffer that
// Start drains. When the buffer is full, or the API server refuses,
// events are dropped and counted (Recorder.Dropped); a controller's work
// never waits on its events.
//
// # Aggregation and spam filtering
//
// A flapping controller must not flood the server. Two mechanisms:
//
//   - Aggregation: an event with the same regarding object, type, reason
//     and note as one recorded within the last Window (default ten
//     minutes) does not create a new Event object; it updates the first
//     one's series (events.k8s.io/v1 series.count and lastObservedTime; on
//     core/v1, count and lastTimestamp). Events that differ only in their
//     note are written as they are up to Similar (default 10) times per
//     Window; the rest go into one combined Event, "(combined from similar
//     events): <note>", counted in its series.
//   - Spam filtering: each regarding object has a token bucket (default
//     burst 25, one token per five minutes); events beyond it are dropped.
//
// # API versions
//
// Events are written as events.k8s.io/v1. If the server does not serve
// that group, the recorder falls back to core/v1 Events, once, for good.
// Every event is also logged at debug level.
package events
