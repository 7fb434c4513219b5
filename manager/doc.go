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
//		MetricsAddr:    ":8443", // HTTPS; callers checked by the API server
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
// Options.HealthAddr serves /healthz and /readyz over plain HTTP, for the
// kubelet. /healthz answers 200 while the manager runs; /readyz answers
// 200 once every informer of the factory has synced ("informers") and,
// with leader election, while the last attempt to acquire or renew the
// Lease has not failed ("leader-election": RBAC, a missing namespace). A
// program adds its own checks with [Manager.AddHealthzCheck] and
// [Manager.AddReadyzCheck]. A failing probe answers 503 with a line per
// failing check, its name and a short reason ("informers: not synced",
// "leader-election: failed: forbidden"), never an error's own text, which
// goes to the log; ?verbose lists the passing checks too.
//
// /metrics serves the manager's Prometheus registry: reconcile counts by
// outcome and durations per controller, the work queues' metrics, and
// REST request counts by code and latencies. Options.MetricsAddr serves
// it over HTTPS, with a self-signed certificate or one from
// MetricsServing.CertDir, to callers whose bearer token the API server
// authenticates (TokenReview) and who may get the non-resource URL
// /metrics (SubjectAccessReview): as kubebuilder's projects do. The
// manager's identity then needs create on tokenreviews and
// subjectaccessreviews, and a scraper needs a ClusterRole such as
//
//	rules:
//	- nonResourceURLs: ["/metrics"]
//	  verbs: ["get"]
//
// The decisions are cached for a minute (10 s for refusals), so a
// scraper costs the API server two requests a minute at most.
// MetricsServing.Insecure serves plain HTTP to anyone instead. The filter
// is [NewAuthFilter], for a program's own handlers too. HTTP/2 is off
// unless MetricsServing.EnableHTTP2, and MetricsServing.TLSConfig has the
// last word on the TLS settings.
//
// Options.PprofAddr serves the Go profiler (net/http/pprof), off by
// default, and on a loopback address only unless Options.PprofAllowRemote.
//
// # Reads
//
// The manager hands out the live client's REST connection (REST) and the
// shared cache (Factory). [CachedClient] combines the two for one type:
// writes go to the server, reads come from the cache and wait for the
// client's own writes (read your writes), or fail with
// cache.StaleCacheError rather than return stale data. A live client
// (client.For with REST and ClientOptions) reads from the server.
//
// # Shutdown
//
// When Start's context ends, every runnable's context is cancelled; Start
// waits up to Options.ShutdownTimeout for them to return.
package manager
