// Package discovery asks an API server which groups, versions and resources
// it serves, caches the answer, and maps between kinds and resources (the
// RESTMapper).
//
// # Getting started
//
//	rc, _ := rest.New(cfg, rest.Options{})
//	d := discovery.New(rc, discovery.Options{})
//	lists, err := d.ServerPreferredResources(ctx)
//
//	m := discovery.NewMapper(d, discovery.MapperOptions{})
//	mapping, err := m.ResourceFor(ctx, "deploy") // apps/v1 deployments, namespaced
//
// # One snapshot
//
// Everything here derives from a [Snapshot]: the groups in the server's
// order, and the resources of every group version. [Client.Discover] takes
// one. It first asks for aggregated discovery (apidiscovery.k8s.io/v2:
// /api and /apis answer with every resource in two requests) and falls back
// to the legacy walk (/api, /apis, then one request per group version, in
// parallel) when the server does not offer it.
//
// # Partial failure
//
// An aggregated API server that is down must not make discovery fail for
// everything. Group versions that could not be discovered (a failed request
// in the legacy walk, a "Stale" version in aggregated discovery) are listed
// in [Snapshot.Failed]; the methods that return resources return what they
// have together with a [*GroupDiscoveryFailedError] naming each failed
// group version and why.
//
// # Caching
//
// [Cached] keeps a snapshot in memory, and optionally on disk, for a TTL.
// [Cached.Invalidate] drops it, and the [Mapper] invalidates once when asked
// for a kind or resource it does not know, so custom resources installed at
// run time are found.
//
// # Names
//
// [Mapper.ResourceFor] resolves what a kubectl user types: a plural, a
// singular or a short name ("deploy"), a kind ("Deployment"), a resource
// qualified by group ("deployments.apps") or by version and group
// ("deployment.v1.apps"), with kubectl's preferences where a name is served
// by more than one group. [Mapper.Category] expands a category such as
// "all".
package discovery
