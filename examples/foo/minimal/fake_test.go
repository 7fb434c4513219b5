package main

import (
	"context"
	"testing"
	"testing/synctest"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/fake"
	"github.com/loom-k8s/loom/discovery"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
)

// TestOperatorOnFake runs the whole program (manager, informers,
// controller) against package fake's in-memory API server, inside a
// synctest bubble: no sockets, no processes, and time that passes only
// when every goroutine waits. A Foo's Deployment appears, follows the
// Foo's replicas, and stays owned by it.
func TestOperatorOnFake(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		srv, err := fake.New(fake.Options{CRDs: []string{"../config/crd"}})
		if err != nil {
			t.Fatal(err)
		}
		cfg := srv.Config()
		ctx, stop := context.WithCancel(t.Context())
		done := make(chan error, 1)
		go func() {
			done <- run(ctx, manager.Options{Config: &cfg, Transport: srv.Transport(), Scheme: samplev1.Scheme()})
		}()

		rc, err := srv.REST(rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// The fake serves discovery, so Foo is found as on a real cluster.
		mapper := discovery.NewMapper(discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
		foos, err := client.For[samplev1.Foo](rc, client.Options{Scheme: samplev1.Scheme(), Mapper: mapper})
		if err != nil {
			t.Fatal(err)
		}
		deps, err := client.For[appsv1.Deployment](rc, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		// waitFor polls the Deployment until ok says yes, for at most a
		// minute of the bubble's time.
		waitFor := func(what string, ok func(*appsv1.Deployment, error) bool) {
			t.Helper()
			deadline := time.Now().Add(time.Minute)
			for {
				dep, err := deps.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
				if ok(dep, err) {
					return
				}
				if time.Now().After(deadline) {
					t.Fatalf("%s: last %v, %v", what, dep, err)
				}
				time.Sleep(100 * time.Millisecond)
			}
		}

		foo := &samplev1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "foo"},
			Spec: samplev1.FooSpec{DeploymentName: "web", Replicas: new(int32(2))}}
		foo, err = foos.Create(ctx, foo, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		waitFor("the Deployment is created", func(dep *appsv1.Deployment, err error) bool {
			return err == nil && *dep.Spec.Replicas == 2 && metav1.IsControlledBy(dep, foo)
		})

		foo.Spec.Replicas = new(int32(5))
		if foo, err = foos.Update(ctx, foo, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("the Deployment follows the Foo", func(dep *appsv1.Deployment, err error) bool {
			return err == nil && *dep.Spec.Replicas == 5
		})

		// Someone scales the Deployment by hand: the controller puts it back.
		dep, err := deps.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		dep.Spec.Replicas = new(int32(1))
		if _, err := deps.Update(ctx, dep, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		waitFor("the Deployment is put back", func(dep *appsv1.Deployment, err error) bool {
			return err == nil && *dep.Spec.Replicas == 5
		})

		if err := foos.Namespace("default").Delete(ctx, "foo", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := foos.Namespace("default").Get(ctx, "foo", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
			t.Fatalf("the Foo after delete: %v, want NotFound", err)
		}

		stop()
		if err := <-done; err != nil {
			t.Fatal(err)
		}
	})
}
