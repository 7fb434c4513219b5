// Package controller runs reconcile loops: changes seen by informers become
// keys in a work queue, and workers call a Reconciler for each key.
//
// # The contract: level-based
//
// A reconcile function ([ReconcileFunc]) is given the object as the cache
// holds it when a worker gets to its key, never the event that caused the
// call. It must read whatever else it needs as it is now (from the cache,
// or the API server) and make the world match what the object asks for,
// as if seeing it for the first time. This is what makes a controller
// correct although events are merged, delayed, repeated or lost: several
// changes to one object before a worker gets to it become one
// reconcile (the queue keeps a key once); a change missed while a watch
// was broken is caught by the relist that follows it; and a periodic
// resync revisits everything in case something outside the cluster drifted.
// Handlers that need the event itself (the old object of an update, the
// final state of a deleted object) are in package cache; a controller
// that must act on deletion holds a finalizer instead.
//
// # Outcomes
//
//   - nil error and a zero Result: done; the key's failure count is reset.
//   - Result.RequeueAfter > 0: reconcile again after that long (a timer,
//     not polling), at Result.Priority: for work that is due later, such
//     as a schedule.
//   - an error: reconcile again after a delay from the rate limiter
//     (per-key exponential backoff, capped by an overall token bucket),
//     at Result.Priority.
//     Conflicts (409) are normal: the next attempt reads fresh state.
//   - a [TerminalError]: logged and counted, not retried; the key waits
//     for its next change.
//   - a panic: recovered, logged with its stack, and treated as an error;
//     the process keeps running.
//
// The same key is never reconciled by two workers at once; different keys
// run in parallel on Options.Workers workers.
//
// # Priorities
//
// The work queue hands out keys by priority (see package workqueue),
// then in the order they were queued. Keys that come from an informer's
// initial list, or from a periodic resync, go in at
// workqueue.PriorityLow; keys of changes seen later at
// workqueue.PriorityNormal. So a controller that starts with thousands
// of objects to go through still reconciles an object changed meanwhile
// as soon as a worker is free, instead of after the whole backlog. A key
// queued again keeps the higher of its priorities. Result.Priority
// chooses the priority of a requeue or a retry (zero is normal), and
// [Controller.EnqueueWithPriority] that of a key queued by hand.
//
// # Sources
//
// [New] feeds a controller from the manager's shared informer for its
// type (Options.For narrows it): each object's change enqueues its own
// key. [Controller.Owns] enqueues the key of an object's controller
// owner, and [Controller.Watches] whatever a map function returns; both
// take an informer (shared through a cache.Factory) and optional
// [Predicate] values that drop changes not worth a reconcile, such as
// updates that do not change the generation ([Controller.Filter] does the
// same for the controller's own objects).
//
// # Helpers
//
// Reconcilers repeat a few moves, provided here (each changes an object in
// memory or writes it, as its doc says):
//
//   - finalizers: [AddFinalizer], [RemoveFinalizer], [HasFinalizer]; a
//     finalizer turns a delete into an update that the controller sees,
//     and holds the object until the controller removes it;
//   - owner references: [SetControllerReference] (with the garbage
//     collector's scope rules checked), [SetOwnerReference],
//     [GetControllerOf], [IsControlledBy]; the garbage collector in
//     kube-controller-manager deletes owned objects when their owner goes;
//   - [CreateOrUpdate] and [CreateOrPatch]: make an object match a mutate
//     function, creating it if absent, and say what was done;
//   - status conditions: [SetStatusCondition], [SetObservedStatusCondition]
//     and friends, over apimachinery's meta helpers;
//   - optimistic concurrency: client.RetryOnConflict and Client.Mutate.
//
// # Tracing
//
// With Options.Tracing (the manager sets it from manager.Options.Tracing)
// each reconcile is an OpenTelemetry span whose context the ReconcileFunc
// gets, so its API requests are child spans. An event that continues a
// trace stamped on the object by its writer gets a span of its own, and
// the reconcile becomes its child; see package tracing.
package controller
