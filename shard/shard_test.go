package shard

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestNextOnlyOnTheRing: a shard hands objects over unasked only once it
// is on the ring itself. Before its own Lease is seen (as a replica
// starts), the ring holds only the others, and would give them
// everything.
func TestNextOnlyOnTheRing(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	members, err := NewMembers(leases, MembersOptions{Ring: "next", Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	s, err := New(nil, ShardOptions{Ring: "next", Identity: "a", Members: members})
	if err != nil {
		t.Fatal(err)
	}
	hold := func(holder string) {
		dur, now := int32(3600), metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: "next-" + holder, Labels: map[string]string{RingLabel: "next"}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Objects that the ring of a and b gives to each.
	kind := schema.GroupKind{Kind: "ConfigMap"}
	both := NewRing([]string{"a", "b"}, RingOptions{})
	on := map[string]*corev1.ConfigMap{}
	for i := 0; len(on) < 2; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + string(rune('a'+i)), Namespace: "default"}}
		if sh, _ := both.Shard(Key(kind, cm)); on[sh] == nil {
			on[sh] = cm
		}
	}

	hold("b")
	eventually(t, "b on the ring", func() bool { return members.Live("b") })
	for sh, cm := range on {
		if to, ok := s.Next(kind, cm); ok {
			t.Errorf("before a is on the ring, Next(%s, the ring's choice for %s) = %q, true; want false", cm.Name, sh, to)
		}
	}
	hold("a")
	eventually(t, "a on the ring", func() bool { return members.Live("a") })
	if to, ok := s.Next(kind, on["b"]); !ok || to != "b" {
		t.Errorf("Next(b's object) = %q, %v; want b, true", to, ok)
	}
	if to, ok := s.Next(kind, on["a"]); ok {
		t.Errorf("Next(a's object) = %q, true; want false", to)
	}
}
