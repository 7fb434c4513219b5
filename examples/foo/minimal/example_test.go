package main

import (
	"context"
	"fmt"
	"log"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Example runs the program against a real control plane (etcd and
// kube-apiserver, started by testenv), creates a Foo, and waits for its
// Deployment.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{CRDs: []string{"../config/crd"}})
	if err != nil {
		log.Fatal(err)
	}
	defer env.Stop()
	cfg, err := env.Config()
	if err != nil {
		log.Fatal(err)
	}
	rc, err := env.REST(rest.Options{})
	if err != nil {
		log.Fatal(err)
	}

	// The program, until stop.
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, manager.Options{Config: &cfg, Scheme: samplev1.Scheme()}) }()

	mgr, err := manager.New(manager.Options{Config: &cfg, Scheme: samplev1.Scheme()}) // for its clients only
	if err != nil {
		log.Fatal(err)
	}
	foos, err := client.For[samplev1.Foo](rc, mgr.ClientOptions())
	if err != nil {
		log.Fatal(err)
	}
	foo := &samplev1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "example"},
		Spec: samplev1.FooSpec{DeploymentName: "example-web", Replicas: new(int32(2))}}
	if _, err := foos.Create(ctx, foo, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	deps, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	for {
		dep, err := deps.Namespace("default").Get(ctx, "example-web", metav1.GetOptions{})
		if err == nil {
			owner := metav1.GetControllerOf(dep)
			fmt.Printf("deployment %s: %d replicas, controlled by %s %s\n", dep.Name, *dep.Spec.Replicas, owner.Kind, owner.Name)
			break
		}
		select {
		case <-ctx.Done():
			log.Fatal("no deployment: ", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// deployment example-web: 2 replicas, controlled by Foo example
}
