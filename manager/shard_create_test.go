package manager_test

import (
	"strconv"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

// TestShardedWritesCarryBucket checks that a sharded manager's cached
// clients create the objects of sharded kinds with their bucket label (an
// owned one with its owner's), keep it through an update that replaces
// the labels, and leave the objects of other kinds alone.
func TestShardedWritesCarryBucket(t *testing.T) {
	const ns, ring = "shard-create", "create"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)
	mgr, err := manager.New(manager.Options{
		Config: &c, Namespace: ns, Logger: testLogger(t, "a"),
		Sharding: manager.Sharding{Ring: ring, Namespace: ns, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}}, Identity: "a"},
	})
	if err != nil {
		t.Fatal(err)
	}
	cms := manager.CachedClient[corev1.ConfigMap](mgr)
	secrets := manager.CachedClient[corev1.Secret](mgr)
	label := shard.BucketLabel(ring)
	bucketOf := func(kind, name string) string {
		return strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: kind}, &metav1.ObjectMeta{Namespace: ns, Name: name})))
	}

	owner, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner", Namespace: ns, Labels: map[string]string{"app": "x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, want := owner.Labels[label], bucketOf("ConfigMap", "owner"); got != want || owner.Labels["app"] != "x" {
		t.Errorf("owner created with labels %v, want %s=%s and app=x", owner.Labels, label, want)
	}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns}}
	if err := controller.SetControllerReference(owner, owned); err != nil {
		t.Fatal(err)
	}
	if owned, err = cms.Create(t.Context(), owned, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := owned.Labels[label], owner.Labels[label]; got != want {
		t.Errorf("owned ConfigMap created in bucket %q, want its owner's, %q", got, want)
	}
	owned.Labels = map[string]string{"app": "y"}
	if owned, err = cms.Update(t.Context(), owned, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got, want := owned.Labels[label], owner.Labels[label]; got != want || owned.Labels["app"] != "y" {
		t.Errorf("owned ConfigMap updated with labels %v, want %s=%s and app=y", owned.Labels, label, want)
	}
	sec, err := secrets.Create(t.Context(), &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "not-sharded", Namespace: ns}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if v, ok := sec.Labels[label]; ok {
		t.Errorf("Secret, not a sharded kind, created with %s=%s", label, v)
	}
}
