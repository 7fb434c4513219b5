// Package manager runs the parts of an operator together under one
// context: informers shared through one cache.Factory, controllers and any
// other runnables, leader election, events, health and readiness probes and
// a Prometheus metrics endpoint, with a graceful shutdown.
//
// # Getting started
//
//	mgr, err := manager.New(manager.Options{Scheme: v1.Scheme(), // the kubeconfig, or in-cluster
//		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "kube-system", Name: "widgets"},
//		HealthAddr:     ":8081",
//		MetricsAddr:    ":8080",
//	})
//	deployments := manager.CachedClient[appsv1.Deployment](mgr) // cached reads, live writes
//	r := &WidgetReconciler{Deployments: deployments}
//	controller.New(mgr, r.Reconcile, controller.Options{}).Owns(deployments)
//	err = mgr.Start(manager.SignalContext()) // blocks until ctx ends or leadership is lost
//
// The manager owns one connection to the API server and a RESTMapper over
// its discovery, so the resources of custom types (from the Scheme) are
// found without spelling them out.
//
// # Runnables and leadership
//
// A [Runnable] is anything with a blocking Start(ctx) error. Runnables
// that implement [LeaderRunnable] and return true (controllers do) start
// only once this replica leads, and stop when leadership ends; the others
// (informers, webhooks, the probe and metrics servers) run on every
// replica. When leadership is lost, the leader runnables' writes are
// fenced at once (see the leaderelection package: nothing they send with
// their context, or a context derived from it, through a client of this
// manager reaches the server any more, even if they ignore the
// cancellation), Start stops the other runnables and returns
// leaderelection.ErrLeadershipLost without waiting for the leader
// runnables. The process should exit then, as controller-runtime's do, and
// a new one campaigns again.
//
// # Probes and metrics
//
// /healthz answers 200 while the manager runs; /readyz answers 200 once
// every informer of the factory has synced, and 503 naming the ones that
// have not, or, with leader election, naming why the last attempt to
// acquire or renew the Lease failed (RBAC, a missing namespace). /metrics serves the manager's Prometheus registry: reconcile
// counts by outcome and durations per controller, the work queues'
// metrics, and REST request counts by code and latencies.
//
// # Reads
//
// The manager hands out the live client's REST connection (REST) and the
// shared cache (Factory). A reader over the cache is a lister; it is
// named as such, and is never the default for reads. CachedClientFor
// combines the two for one type: writes go to the server, reads come from
// the cache and wait for the client's own writes (read your writes), or
// fail with cache.StaleCacheError rather than return stale data.
//
// # Shutdown
//
// When Start's context ends, every runnable's context is cancelled; Start
// waits up to Options.ShutdownTimeout for them to return.
package manager
