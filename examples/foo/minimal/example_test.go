package main

import (
	"context"
	"fmt"
	"log"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/foo/internal/footest"
	"github.com/loom-k8s/loom/manager"
)

// Example runs the program against a real control plane (etcd and
// kube-apiserver, started by testenv), creates a Foo, and waits for its
// Deployment.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := footest.Start(ctx, "../config/crd")
	if err != nil {
		log.Fatal(err)
	}
	defer env.Stop()

	// The program, until stop.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, manager.Options{Config: &env.Config, Scheme: samplev1.Scheme()}) }()

	foo := &samplev1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "example"},
		Spec: samplev1.FooSpec{DeploymentName: "example-web", Replicas: new(int32(2))}}
	if _, err := env.Foos.Create(ctx, foo, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	dep, err := env.WaitDeployment(ctx, "default", "example-web", func(*appsv1.Deployment) bool { return true })
	if err != nil {
		log.Fatal(err)
	}
	owner := metav1.GetControllerOf(dep)
	fmt.Printf("deployment %s: %d replicas, controlled by %s %s\n", dep.Name, *dep.Spec.Replicas, owner.Kind, owner.Name)
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// deployment example-web: 2 replicas, controlled by Foo example
}
