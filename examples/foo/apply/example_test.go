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
	"github.com/loom-k8s/loom/examples/foo/internal/footest"
	"github.com/loom-k8s/loom/manager"
)

// Example runs the program against a real control plane, creates a Foo,
// and waits for its Deployment. Then another field manager changes the
// image, which the operator owns, and sets minReadySeconds, which it does
// not: on its next reconcile the operator takes the image back and leaves
// minReadySeconds alone.
func Example() {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := footest.Start(ctx, "../config/crd")
	if err != nil {
		log.Fatal(err)
	}
	defer env.Stop()
	runCtx, stop := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- run(runCtx, manager.Options{Config: &env.Config, Scheme: samplev1.Scheme()}) }()

	foo := &samplev1.Foo{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "example"},
		Spec: samplev1.FooSpec{DeploymentName: "example-web", Replicas: new(int32(2))}}
	if foo, err = env.Foos.Create(ctx, foo, metav1.CreateOptions{}); err != nil {
		log.Fatal(err)
	}
	image := func(d *appsv1.Deployment) string { return d.Spec.Template.Spec.Containers[0].Image }
	dep, err := env.WaitDeployment(ctx, "default", "example-web", func(*appsv1.Deployment) bool { return true })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("deployment %s: %d replicas of %s, controlled by %s\n", dep.Name, *dep.Spec.Replicas, image(dep), metav1.GetControllerOf(dep).Name)

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
	if _, err := env.Deployments.Apply(ctx, other, client.ApplyOptions{FieldManager: "someone-else", Force: true}); err != nil {
		log.Fatal(err)
	}
	// The operator's next reconcile (here made by a change to the Foo)
	// takes the image back.
	foo.Labels = map[string]string{"touched": "yes"}
	if _, err := env.Foos.Update(ctx, foo, metav1.UpdateOptions{}); err != nil {
		log.Fatal(err)
	}
	dep, err = env.WaitDeployment(ctx, "default", "example-web", func(d *appsv1.Deployment) bool { return image(d) == "nginx:1.27" })
	if err != nil {
		log.Fatal(err)
	}
	fmt.Printf("image %s, minReadySeconds %d\n", image(dep), dep.Spec.MinReadySeconds)

	stop()
	if err := <-done; err != nil {
		log.Fatal(err)
	}
	// Output:
	// deployment example-web: 2 replicas of nginx:1.27, controlled by example
	// image nginx:1.27, minReadySeconds 5
}
