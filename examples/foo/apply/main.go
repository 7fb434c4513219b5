// Command apply is the minimal Foo operator written with server-side
// apply: each reconcile states the Deployment a Foo wants, and applies it
// with the Foo as its controller. There is no read and no diff; the
// fields the operator sets are its own (a change made by anyone else is
// taken back), and the fields it does not set are left to others.
package main

import (
	"context"
	"log"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
)

func main() {
	if err := run(manager.SignalContext(), manager.Options{Scheme: samplev1.Scheme()}); err != nil {
		log.Fatal(err)
	}
}

func run(ctx context.Context, opts manager.Options) error {
	opts.FieldOwner = "foo-operator"
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	deployments := manager.CachedClient[appsv1.Deployment](mgr)
	controller.New(mgr, (&FooReconciler{deployments}).Reconcile, controller.Options{}).Owns(deployments)
	return mgr.Start(ctx)
}

// FooReconciler applies each Foo's Deployment.
type FooReconciler struct {
	Deployments client.Applier[*appsv1.Deployment]
}

// Reconcile applies the Deployment foo wants, owned by foo.
func (r *FooReconciler) Reconcile(ctx context.Context, foo *samplev1.Foo) (controller.Result, error) {
	labels := map[string]string{"app": foo.Name}
	dep := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: foo.Namespace, Name: foo.Spec.DeploymentName},
		Spec: appsv1.DeploymentSpec{
			Replicas: foo.Spec.Replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	_, err := controller.ApplyOwned(ctx, r.Deployments, foo, dep, client.ApplyOptions{Force: true})
	return controller.Result{}, err
}
