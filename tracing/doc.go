// Package tracing holds what Loom's packages share to make OpenTelemetry
// traces: the [Options] that turn tracing on, the annotation that carries
// a trace from one controller to the next, and a [log/slog] handler that
// puts trace and span IDs on log records.
//
// Tracing is off unless Options.Provider is set; off, Loom makes no spans,
// sends no traceparent header and stamps no annotation, and every hook
// costs one nil check. The usual way to turn it on is
// manager.Options.Tracing; the rest, controller and webhook packages take
// the same Options for use without a manager.
//
// # What is traced
//
//   - rest: a client span per request attempt, named after the method and
//     resource ("GET pods", "PUT deployments/status"). The request carries a
//     W3C traceparent header, so kube-apiserver's own spans (when its
//     tracing is on) become children of it.
//   - controller: a span per reconcile ("reconcile foo"). A watch event
//     that continues a stamped trace (see below) gets a span of its own
//     ("watch update", kind consumer), and the reconcile it leads to is its
//     child; any other event is named in the attributes of that reconcile,
//     which then starts a trace ([Options].EventSpans gives every event a
//     span). The reconcile is linked to the other event spans folded into
//     it and to the reconcile that asked for a retry. Its context carries
//     its span, so its API requests are its children.
//   - webhook: a server span per request that continues the traceparent
//     kube-apiserver sends when it calls an admission or conversion webhook.
//
// # Across controllers
//
// With Options.Annotate, an object that a reconcile creates, updates or
// applies through a Loom client is stamped with the reconcile's trace
// context in the annotation [Annotation]. A controller that sees the
// stamp change in a watch event continues that trace, so one change can be
// followed through a chain of controllers. Stamps in the initial list of
// an informer, or stamps that did not change with the event, start new
// traces: they belong to changes that were already reconciled.
package tracing
