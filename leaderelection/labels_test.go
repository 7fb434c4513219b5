package leaderelection_test

import (
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/leaderelection"
)

// TestLeaseLabels: the candidate's labels are on a Lease it creates, and
// join the labels of one it takes over.
func TestLeaseLabels(t *testing.T) {
	c := leases(t, "").Namespace("default")
	labels := map[string]string{"app.kubernetes.io/name": "foo-operator"}
	opts := leaderelection.Options{Labels: labels}

	rec := newRecorder()
	start(t, leases(t, ""), "labelled-new", "a", rec, opts)
	if l := rec.waitLeader(t, ""); l != "a" {
		t.Fatalf("leader %q, want a", l)
	}
	got, err := c.Get(t.Context(), "labelled-new", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Labels["app.kubernetes.io/name"] != "foo-operator" {
		t.Errorf("created Lease's labels: %v", got.Labels)
	}

	// A Lease left by a holder without labels (released: no holder).
	if _, err := c.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "labelled-old", Labels: map[string]string{"kept": "yes"}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	rec2 := newRecorder()
	start(t, leases(t, ""), "labelled-old", "b", rec2, opts)
	if l := rec2.waitLeader(t, ""); l != "b" {
		t.Fatalf("leader %q, want b", l)
	}
	deadline := time.Now().Add(time.Minute)
	for {
		got, err := c.Get(t.Context(), "labelled-old", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if got.Labels["app.kubernetes.io/name"] == "foo-operator" && got.Labels["kept"] == "yes" {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("taken-over Lease's labels after a minute: %v", got.Labels)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
