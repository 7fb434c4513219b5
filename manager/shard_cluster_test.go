package manager_test

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

var gizmoRes = client.Resource{
	Resource: schema.GroupVersionResource{Group: "test.loom.dev", Version: "v1", Resource: "gizmos"},
	Kind:     schema.GroupVersionKind{Group: "test.loom.dev", Version: "v1", Kind: "Gizmo"},
}

const gizmoCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gizmos.test.loom.dev"},
 "spec":{"group":"test.loom.dev","scope":"Cluster","names":{"plural":"gizmos","singular":"gizmo","kind":"Gizmo"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// TestShardedClusterScoped: a cluster-scoped kind shards like a namespaced
// one. Two replicas split 30 Gizmos (a cluster-scoped custom resource):
// each Gizmo carries its bucket label, each
// replica's informer holds exactly its share, and each Gizmo is
// reconciled by its shard.
func TestShardedClusterScoped(t *testing.T) {
	const n, leaseNS = 30, "shard-cluster"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, leaseNS)
	installCRD(t, rc, gizmoCRD, gizmoRes)
	gizmos, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: gizmoRes})
	for i := range n {
		g := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "test.loom.dev/v1", "kind": "Gizmo", "metadata": map[string]any{"name": fmt.Sprintf("gizmo-%02d", i)},
		}}
		if _, err := gizmos.Create(t.Context(), g, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	var mu sync.Mutex
	by := map[string]string{} // gizmo -> replica that last reconciled it
	ctrls := map[string]*controller.Controller[*unstructured.Unstructured]{}
	for _, id := range []string{"c1", "c2"} {
		mgr, err := manager.New(manager.Options{
			Config: &c, Logger: testLogger(t, id),
			LeaderElection: manager.LeaderElection{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond},
			Sharding: manager.Sharding{Ring: "cluster", Namespace: leaseNS, Identity: id, Kinds: []schema.GroupKind{gizmoRes.Kind.GroupKind()},
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond},
		})
		if err != nil {
			t.Fatal(err)
		}
		ctrls[id] = controller.New[unstructured.Unstructured](mgr, func(_ context.Context, g *unstructured.Unstructured) (controller.Result, error) {
			mu.Lock()
			by[g.GetName()] = id
			mu.Unlock()
			return controller.Result{}, nil
		}, controller.Options{For: cache.InformerForOptions{Resource: gizmoRes}})
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{id: id, mgr: mgr, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- mgr.Start(ctx) }()
		t.Cleanup(func() { r.stop(t) })
	}

	ring := shard.NewRing([]string{"c1", "c2"}, shard.RingOptions{})
	var why string
	eventually(t, "the Gizmos split between the replicas", func() bool {
		l, err := gizmos.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			why = err.Error()
			return false
		}
		want := map[string]int{}
		for _, g := range l.Items {
			s, _ := ring.Shard(shard.Key(gizmoRes.Kind.GroupKind(), g))
			want[s]++
			mu.Lock()
			last := by[g.GetName()]
			mu.Unlock()
			b := strconv.Itoa(shard.Bucket(shard.Key(gizmoRes.Kind.GroupKind(), g)))
			if g.GetLabels()[shard.BucketLabel("cluster")] != b || last != s {
				why = fmt.Sprintf("%s: bucket label %q, last reconciled by %q, want bucket %s on %q", g.GetName(), g.GetLabels()[shard.BucketLabel("cluster")], last, b, s)
				return false
			}
		}
		for id, ctrl := range ctrls {
			if got := len(ctrl.Informer().Indexer().List()); got != want[id] {
				why = fmt.Sprintf("replica %s caches %d Gizmos, want %d", id, got, want[id])
				return false
			}
		}
		if want["c1"] == 0 || want["c2"] == 0 {
			why = fmt.Sprintf("the ring puts every Gizmo on one replica: %v", want)
			return false
		}
		return true
	})
	if t.Failed() {
		t.Log(why)
	}
}
