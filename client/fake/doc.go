// Package fake is a Kubernetes API server that keeps its objects in
// memory, for tests that should take milliseconds and still meet the
// API server's rules.
//
// A [Server] serves the REST API: Loom's rest.Client, and so the typed
// clients, informers, cached clients, controllers and a whole manager, run
// on it unchanged. [Server.Transport] hands requests to it in the calling
// process, without sockets or TLS, so it works inside a testing/synctest
// bubble, where time passes only when every goroutine waits:
//
//	func TestOperator(t *testing.T) {
//		synctest.Test(t, func(t *testing.T) {
//			srv, err := fake.New(fake.Options{CRDs: []string{"../config/crd"}})
//			...
//			cfg := srv.Config()
//			go run(ctx, manager.Options{Config: &cfg, Transport: srv.Transport(), Scheme: scheme})
//			rc, err := srv.REST(rest.Options{}) // for the test's own clients
//			...
//		})
//	}
//
// The server is also an [http.Handler], for httptest.NewServer where a
// real socket is wanted.
//
// # What it does as kube-apiserver does
//
// Every behaviour listed here is checked against a real kube-apiserver
// (started by package testenv) by the scripts of testdata/corpus: each
// runs against both servers, and both must answer the same, once uids,
// timestamps and resourceVersion values are replaced by placeholders.
//
//   - resourceVersion: one counter for every object, as etcd's revision;
//     an update or patch that names a stale resourceVersion is a 409
//     Conflict; an update that changes nothing writes nothing.
//   - Create: generateName, uid, creationTimestamp (from Options.Now, so
//     synctest's clock), 409 AlreadyExists, 404 for a namespace that does
//     not exist, 422 Invalid for bad names, labels, annotations and other
//     metadata (apimachinery's own validation), dryRun.
//   - Errors are metav1.Status values with kube-apiserver's reason, code,
//     details and message, so apierrors.IsNotFound, IsConflict and the
//     rest work through rest.Client.
//   - metadata.generation: custom resources, and the built-in kinds that
//     keep one (Deployments, ReplicaSets, StatefulSets, DaemonSets, Pods,
//     Jobs, CronJobs, Ingresses, NetworkPolicies, PodDisruptionBudgets,
//     CRDs and a few more; not ConfigMaps, Services or Namespaces), start
//     at 1 and count spec changes; metadata changes (and status changes,
//     where there is a status subresource) do not count, a deletion that
//     finalizers hold does.
//   - The status subresource: a write to /status changes only status (a
//     built-in kind's metadata too, but for the labels of Deployments,
//     ReplicaSets, StatefulSets and DaemonSets); a write to the object
//     keeps its status; a create drops status. The
//     scale subresource of Deployments, ReplicaSets, StatefulSets and
//     ReplicationControllers, and of CRDs that declare one.
//   - Deletion: finalizers hold an object with deletionTimestamp set; no
//     finalizer may be added then; removing the last one deletes it.
//     Preconditions (uid, resourceVersion). propagationPolicy Orphan and
//     Foreground add the finalizers the garbage collector would act on
//     (see below). A Pod on a node is only marked, with its grace period,
//     as it waits for its kubelet: a delete with gracePeriodSeconds 0
//     finishes it. Deleting a namespace deletes its objects.
//   - List: label selectors, field selectors (metadata.name and
//     metadata.namespace, the fields kube-apiserver supports for some
//     built-in kinds, such as a Pod's spec.nodeName and status.phase, and
//     a CRD's selectableFields; others are refused as kube-apiserver
//     refuses them), limit and continue (pages of one consistent
//     snapshot, with remainingItemCount; a list at resourceVersion 0
//     comes whole, as from kube-apiserver's cache), resourceVersion and
//     resourceVersionMatch (Exact lists show the past; a resourceVersion
//     not reached yet is 504 Too large resource version), and
//     PartialObjectMetadata lists.
//   - Watch: from a resourceVersion (replaying what happened after it),
//     from "" or "0" (the current objects as ADDED first), label and field
//     selectors (an object that leaves the selection is DELETED for the
//     watch, one that enters it ADDED), sendInitialEvents=true with the
//     bookmark annotated k8s.io/initial-events-end, timeoutSeconds.
//     [Server.Compact] forgets the history as an etcd compaction does:
//     a watch or an exact list from before it ends with 410 Gone (reason
//     Expired), and so does a list continued from a page before it.
//     [Server.SendBookmarks] makes watches that allow bookmarks send one
//     now (kube-apiserver sends them about once a minute).
//   - Patches: JSON patch, JSON merge patch, strategic merge patch (with
//     the Go types of k8s.io/api; custom resources refuse it with 415, as
//     kube-apiserver does).
//   - Server-side apply, with managedFields, conflicts and force, through
//     k8s.io/apimachinery/pkg/util/managedfields and
//     sigs.k8s.io/structured-merge-diff: the code kube-apiserver runs, with
//     kube-apiserver's own OpenAPI schemas for the built-in kinds
//     (captured from it by `go generate`; see internal/gen) and each
//     CRD's schema for its custom resources. Other writes record their
//     managedFields too (the manager is the fieldManager parameter, else
//     the User-Agent up to its first '/').
//   - CRDs: creating a CustomResourceDefinition (or Options.CRDs, which
//     takes what crd.ReadFiles reads) serves its resources at once and
//     marks it NamesAccepted and Established; its schema prunes unknown
//     fields (keeping those under x-kubernetes-preserve-unknown-fields)
//     and drives apply. Deleting it deletes its objects.
//   - Discovery: aggregated discovery at /api and /apis, the legacy
//     group and resource lists, with the CRDs, so package discovery's
//     mapper finds built-in and custom kinds.
//   - Bodies in JSON, YAML, or protobuf (what a manager's clients send
//     by default); answers are JSON.
//
// # What it does not do
//
// It runs no admission (webhooks, ValidatingAdmissionPolicy, quota,
// LimitRanger, service accounts), no defaulting of built-in kinds (a
// Deployment gets no strategy, no revisionHistoryLimit; a Pod's
// containers no terminationMessagePath; only a Secret's type and
// stringData are handled), no allocation (a Service gets no cluster IP),
// no validation beyond object
// metadata (no CEL rules, no OpenAPI value validation of custom
// resources, no defaults from their schemas), no conversion between
// versions (each version of a resource holds its objects as written;
// custom resources with several versions share theirs, as with the None
// strategy), no controllers (no Pods for a Deployment, no status; and
// by default no garbage collector: objects with owner references stay
// when their owner goes, and Orphan and Foreground deletes wait for
// someone to remove their finalizer, as on a kube-apiserver without
// kube-controller-manager; Options.GarbageCollection does the garbage
// collector's work at once), no authentication or authorization, no
// aggregated API servers, no exec, attach, port-forward or logs, and
// no Table output. Watches send bookmarks only when asked
// ([Server.SendBookmarks]) or at the end of initial events. A deleted
// namespace is Terminating only for a moment: the fake empties and
// removes it at once, as the namespace controller would. A list at a
// resourceVersion not reached yet fails at once rather than after
// kube-apiserver's few seconds of waiting. Where kube-apiserver lists
// one validation error more than once in a Status's causes, the fake
// lists it once.
//
// The tests named TestException* in this package run each of these
// differences against both servers.
//
// What you get instead is speed and determinism: a test sees exactly
// what its controller wrote, at once, and may check it with the same
// clients it would use on a cluster. Where the difference matters, run
// the test against testenv as well: the same test code takes a
// rest.Client or a transport from either.
package fake
