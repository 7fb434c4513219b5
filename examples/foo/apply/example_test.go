package main

import (
	"context"
	"fmt"
	"log"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Example runs the program against a real control plane, creates a Foo,
// and waits for its Deployment. Then another field manager changes the
// image, which the operator owns, and sets minReadySeconds, which it does
// not: on its next reconcile the operator takes the image back and leaves
// minReadySeconds alone.
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
	if foo, err = foos.Create(ctx, foo, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	deps, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	dep := waitFor(ctx, deps, func(d *appsv1.Deployment) bool { return true })
	fmt.Printf("deployment %s: %d replicas of %s, controlled by %s\n", dep.Name, *dep.Spec.Replicas,
		dep.Spec.Template.Spec.Containers[0].Image, metav1.GetControllerOf(dep).Name)

	// Someone else changes the image and sets minReadySeconds.
	other := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "example-web"},
		Spec: appsv1.DeploymentSpec{
			MinReadySeconds: 5,
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "web", Image: "nginx:latest"}},
			}},
		},
	}
	if _, err := deps.Apply(ctx, other, client.ApplyOptions{FieldManager: "someone-else", Force: true}); err != nil {
		log.Fatal(err)
	}
	// The operator's next reconcile (here made by a change to the Foo)
	// takes the image back.
	foo.Labels = map[string]string{"touched": "yes"}
	if _, err := foos.Update(ctx, foo, metav1.UpdateOptions{}); err != nil {
		log.Fatal(err)
	}
	dep = waitFor(ctx, deps, func(d *appsv1.Deployment) bool {
		return d.Spec.Template.Spec.Containers[0].Image == "nginx:1.27"
	})
	fmt.Printf("image %s, minReadySeconds %d\n", dep.Spec.Template.Spec.Containers[0].Image, dep.Spec.MinReadySeconds)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// deployment example-web: 2 replicas of nginx:1.27, controlled by example
	// image nginx:1.27, minReadySeconds 5
}

// waitFor polls the Deployment example-web until ok says yes.
func waitFor(ctx context.Context, deps *client.Client[*appsv1.Deployment], ok func(*appsv1.Deployment) bool) *appsv1.Deployment {
	for {
		dep, err := deps.Namespace("default").Get(ctx, "example-web", metav1.GetOptions{})
		if err == nil && ok(dep) {
			return dep
		}
		select {
		case <-ctx.Done():
			log.Fatalf("deployment example-web never got there (last error %v)", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}
