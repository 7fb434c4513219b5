package main

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/foo/operator"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// TestFooSharded runs two replicas of the operator as one sharded ring,
// each as the operator's service account (so the shipped role covers
// sharding): every Foo gets its Deployment and carries its bucket label,
// the ring gives both replicas some, and each replica's shard Lease comes
// to claim exactly the buckets the ring gives it.
func TestFooSharded(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	ctx := t.Context()
	e2e.Kubectl(t, env, "apply", "-k", "config")
	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	if err := crd.WaitEstablished(ctx, rc, crd.Options{}, "foos.samplecontroller.k8s.io"); err != nil {
		t.Fatal(err)
	}
	sa := e2e.ServiceAccount(t, env, "foo-system", "foo-operator")
	for _, id := range []string{"one", "two"} {
		e2e.Run(t, func(ctx context.Context) error {
			return operator.Run(ctx, sa, operator.Options{Ring: "foo", Identity: id, Logger: testLogger(t)})
		})
	}
	foos, err := client.For[v1alpha1.Foo](rc, client.Options{Scheme: v1alpha1.Scheme(), Mapper: discovery.MapperFor(rc)})
	if err != nil {
		t.Fatal(err)
	}
	foos = foos.Namespace("default")
	deps, _ := client.For[appsv1.Deployment](rc, client.Options{})
	deps = deps.Namespace("default")
	const n = 8
	for i := range n {
		name := fmt.Sprintf("foo-%d", i)
		if _, err := foos.Create(ctx, &v1alpha1.Foo{
			ObjectMeta: metav1.ObjectMeta{Name: name},
			Spec:       v1alpha1.FooSpec{DeploymentName: name, Replicas: new(int32(1))},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n {
		name := fmt.Sprintf("foo-%d", i)
		waitFoo(t, foos, deps, name, name, 1)
	}
	ring := shard.NewRing([]string{"one", "two"}, shard.RingOptions{})
	held := map[string]int{}
	list, err := foos.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, f := range list.Items {
		key := shard.Key(v1alpha1.GroupVersion.WithKind("Foo").GroupKind(), f)
		if got, want := f.Labels[shard.BucketLabel("foo")], strconv.Itoa(shard.Bucket(key)); got != want {
			t.Errorf("Foo %s is in bucket %q, want %s", f.Name, got, want)
		}
		on, _ := ring.Shard(key)
		held[on]++
	}
	if held["one"] == 0 || held["two"] == 0 {
		t.Errorf("the ring puts all %d Foos on one replica: %v", n, held)
	}
	out := e2e.Kubectl(t, env, "get", "leases", "-n", "foo-system", "-l", shard.RingLabel+"=foo", "-o", "name")
	if out != "lease.coordination.k8s.io/foo-one\nlease.coordination.k8s.io/foo-two\n" {
		t.Errorf("shard leases:\n%s", out)
	}
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	for _, id := range []string{"one", "two"} {
		want := shard.EncodeClaims(ring.Buckets(id))
		deadline := time.Now().Add(time.Minute)
		for {
			l, err := leases.Namespace("foo-system").Get(ctx, "foo-"+id, metav1.GetOptions{})
			if err == nil && l.Annotations[shard.ClaimsAnnotation] == want {
				break
			}
			if time.Now().After(deadline) {
				t.Fatalf("the Lease of %s does not claim the buckets the ring gives it (%v)", id, err)
			}
			time.Sleep(100 * time.Millisecond)
		}
	}
}
