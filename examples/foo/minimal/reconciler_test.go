package main

import (
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/clienttest"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
)

// TestReconcile runs the reconciler with no API server: Deployments are
// read from an in-memory store and writes are recorded.
func TestReconcile(t *testing.T) {
	foo := &samplev1.Foo{
		TypeMeta:   metav1.TypeMeta{APIVersion: "samplecontroller.k8s.io/v1alpha1", Kind: "Foo"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "foo", UID: "uid-foo"},
		Spec:       samplev1.FooSpec{DeploymentName: "web", Replicas: new(int32(3))},
	}
	// The Deployment as the reconciler makes it, and the same scaled down.
	want := reconcile(t, foo, nil)[0].Object
	scaled := want.DeepCopy()
	scaled.Spec.Replicas = new(int32(1))

	tests := []struct {
		name     string
		existing *appsv1.Deployment
		want     []string // the writes, as "verb name replicas"
	}{
		{"no Deployment: it is created, owned by the Foo", nil, []string{"create web 3"}},
		{"the Deployment matches: nothing is written", want, nil},
		{"the Deployment was scaled: it is updated", scaled, []string{"update web 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			var got []string
			for _, c := range reconcile(t, foo, tt.existing) {
				got = append(got, fmt.Sprint(c.Verb, " ", c.Object.Name, " ", *c.Object.Spec.Replicas))
				if ref := metav1.GetControllerOf(c.Object); ref == nil || ref.UID != foo.UID || ref.Kind != "Foo" {
					t.Errorf("%s: controller reference %v, want the Foo", c.Verb, ref)
				}
			}
			if len(got) != len(tt.want) || (len(got) > 0 && got[0] != tt.want[0]) {
				t.Errorf("writes %q, want %q", got, tt.want)
			}
		})
	}
}

// reconcile reconciles foo once, with existing (if not nil) as the only
// Deployment, and returns the writes.
func reconcile(t *testing.T, foo *samplev1.Foo, existing *appsv1.Deployment) []clienttest.Call[*appsv1.Deployment] {
	t.Helper()
	store := cache.NewStore(cache.StoreOptions[*appsv1.Deployment]{})
	if existing != nil {
		if err := store.Add(existing); err != nil {
			t.Fatal(err)
		}
	}
	writes := &clienttest.Recorder[*appsv1.Deployment]{}
	r := &FooReconciler{Deployments: struct {
		client.Reader[*appsv1.Deployment]
		client.Writer[*appsv1.Deployment]
	}{cache.StoreReader(store), writes}}
	if _, err := r.Reconcile(t.Context(), foo); err != nil {
		t.Fatal(err)
	}
	return writes.Calls()
}
