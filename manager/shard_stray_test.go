package manager_test

import (
	"context"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

// TestShardedStrayFollowsItsOwner checks that an owned object reaching a
// shard's cache after its owner has left that shard (a reconcile created
// it just before the owner was released, and its watch event came late)
// follows the owner at once, moved by the shard that holds it. The
// leader, which would move it on its next pass, is another process that
// never acts here, so without the shard's own move the object stays
// behind.
func TestShardedStrayFollowsItsOwner(t *testing.T) {
	const ns, ring = "shard-stray", "stray"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)

	// A live shard "b" and a leader that is neither: Leases held for an
	// hour by processes that do not run.
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	hold := func(name, holder string, dur int32, labels map[string]string) {
		now := metav1.NewMicroTime(time.Now())
		if _, err := leases.Namespace(ns).Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hold(ring+"-b", "b", 3600, map[string]string{shard.RingLabel: ring})
	hold(ring+"-leader", "elsewhere", 3600, nil)

	// One ConfigMap the ring gives to "a", one it gives to "b".
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	r := shard.NewRing([]string{"a", "b"}, shard.RingOptions{})
	cmKind := schema.GroupKind{Kind: "ConfigMap"}
	names := map[string]string{}
	for i := 0; len(names) < 2; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + string(rune('a'+i)), Namespace: ns}}
		s, _ := r.Shard(shard.Key(cmKind, cm))
		if _, ok := names[s]; !ok {
			names[s] = cm.Name
		}
	}
	create := func(name, on string) *corev1.ConfigMap {
		cm, err := cms.Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.Label(ring): on}},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return cm
	}
	create(names["a"], "a")
	gone := create(names["b"], "b") // left "a" before the test begins

	mgr, err := manager.New(manager.Options{
		Config: &c, Namespace: ns, Logger: testLogger(t, "a"),
		Sharding: manager.Sharding{
			Ring: ring, Namespace: ns, Kinds: []schema.GroupKind{cmKind, {Kind: "Secret"}}, Identity: "a",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reconciled := make(chan string, 16)
	ctrl := controller.New[corev1.ConfigMap](mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		reconciled <- cm.Name
		return controller.Result{}, nil
	}, controller.Options{})
	ctrl.Owns(manager.CachedClient[corev1.Secret](mgr))
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{id: "a", mgr: mgr, ctrl: ctrl, cancel: cancel, done: make(chan error, 1)}
	go func() { rep.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { rep.stop(t) })
	select {
	case name := <-reconciled:
		if name != names["a"] {
			t.Fatalf("replica a reconciled %s, which is not on its shard", name)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("replica a did not reconcile its ConfigMap")
	}
	// a's controller may start before a sees itself on the ring, which
	// then holds b only; it must not give its objects away meanwhile
	// (shard.TestNextOnlyOnTheRing checks this without the race).
	if cm, err := cms.Get(t.Context(), names["a"], metav1.GetOptions{}); err != nil || cm.Labels[shard.Label(ring)] != "a" {
		t.Fatalf("a's ConfigMap: %v, labels %v; want it kept on a", err, cm.GetLabels())
	}

	// The late owned object: still labelled with "a", owned by the
	// ConfigMap that has moved to "b".
	secrets, _ := client.For[corev1.Secret](rc, client.Options{})
	secrets = secrets.Namespace(ns)
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "late", Namespace: ns, Labels: map[string]string{shard.Label(ring): "a"}}}
	if err := controller.SetControllerReference(gone, s); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	// And one that stays: owned by the ConfigMap that "a" holds.
	kept, err := cms.Get(t.Context(), names["a"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	k := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "kept", Namespace: ns, Labels: map[string]string{shard.Label(ring): "a"}}}
	if err := controller.SetControllerReference(kept, k); err != nil {
		t.Fatal(err)
	}
	if _, err := secrets.Create(t.Context(), k, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	eventually(t, "the late Secret to follow its owner to shard b", func() bool {
		s, err := secrets.Get(t.Context(), "late", metav1.GetOptions{})
		return err == nil && s.Labels[shard.Label(ring)] == "b"
	})
	// The Secret "kept" was created after "late", and reached the cache
	// with it: both have been seen once "late" has moved.
	if s, err := secrets.Get(t.Context(), "kept", metav1.GetOptions{}); err != nil || s.Labels[shard.Label(ring)] != "a" {
		t.Errorf("the Secret of a's own ConfigMap: %v, labels %v; want it left on a", err, s.GetLabels())
	}
}
