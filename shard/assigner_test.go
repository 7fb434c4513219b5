package shard

import (
	"slices"
	"strconv"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

// liveShards creates in ns (made first, unless it is "default")
// hour-long Leases of ring for the shards ids. It returns the admin's
// config, a client on it, the Leases' client, and started Members that
// see every one of the shards live.
func liveShards(t *testing.T, ns, ring string, ids ...string) (config.Config, *rest.Client, *client.Client[*coordinationv1.Lease], *Members) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.CloseIdleConnections)
	if ns != "default" {
		nss, _ := client.For[corev1.Namespace](plain, client.Options{})
		if _, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leases, _ := client.For[coordinationv1.Lease](plain, client.Options{})
	leases = leases.Namespace(ns)
	for _, id := range ids {
		holder, dur, now := id, int32(3600), metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: ring + "-" + id, Labels: map[string]string{RingLabel: ring}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	members, err := NewMembers(leases, MembersOptions{Ring: ring, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	eventually(t, "every shard on the ring", func() bool { return slices.Equal(members.Ring().Members(), slices.Sorted(slices.Values(ids))) })
	return cfg, plain, leases, members
}

// TestAssignerLabelsBuckets: the assigner gives an object without a
// bucket label its bucket (its owner's, for an owned one), and its pass
// corrects a wrong bucket.
func TestAssignerLabelsBuckets(t *testing.T) {
	const ns, ring = "bucket-kinds", "bk"
	_, plain, _, members := liveShards(t, ns, ring, "one")
	secrets, _ := client.For[corev1.Secret](plain, client.Options{})
	secrets = secrets.Namespace(ns)
	cms, _ := client.For[corev1.ConfigMap](plain, client.Options{})
	owner, err := cms.Namespace(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	secretGK := schema.GroupKind{Kind: "Secret"}
	for name, labels := range map[string]map[string]string{
		"unlabelled": nil,
		"wrong":      {BucketLabel(ring): "9999"},
		"other":      {"app": "x", BucketLabel(ring): "0"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: ref}}
		if _, err := secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := strconv.Itoa(Bucket(Key(secretGK, &metav1.ObjectMeta{Namespace: ns, Name: "x", OwnerReferences: ref})))
	if want != strconv.Itoa(Bucket(Key(schema.GroupKind{Kind: "ConfigMap"}, owner))) {
		t.Fatal("an owned object's bucket is not its owner's")
	}
	a, err := NewAssigner(plain, AssignerOptions{
		Ring: ring, Members: members, Kinds: []schema.GroupKind{secretGK}, Mapper: discovery.MapperFor(plain),
		Namespace: ns, SyncPeriod: time.Second,
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Start)
	eventually(t, "every Secret in its owner's bucket", func() bool {
		l, err := secrets.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for _, s := range l.Items {
			if s.OwnerReferences == nil {
				continue
			}
			if s.Labels[BucketLabel(ring)] != want {
				return false
			}
			n++
		}
		return n == 3
	})
}
