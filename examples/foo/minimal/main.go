// Command minimal is the smallest useful operator: a Foo owns a Deployment
// of the name and size it asks for. docs/migrating-from-client-go.md puts
// it beside the same program on controller-runtime.
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
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	deployments := manager.CachedClient[appsv1.Deployment](mgr)
	controller.New(mgr, (&FooReconciler{deployments}).Reconcile, controller.Options{}).Owns(deployments)
	return mgr.Start(ctx)
}

// FooReconciler makes each Foo's Deployment match it.
type FooReconciler struct {
	Deployments client.ReadWriter[*appsv1.Deployment]
}

// Reconcile creates or updates foo's Deployment, owned by foo.
func (r *FooReconciler) Reconcile(ctx context.Context, foo *samplev1.Foo) (controller.Result, error) {
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: foo.Namespace, Name: foo.Spec.DeploymentName}}
	_, err := controller.CreateOrUpdate(ctx, r.Deployments, dep, func(dep *appsv1.Deployment) error {
		labels := map[string]string{"app": foo.Name}
		dep.Spec.Replicas = foo.Spec.Replicas
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		dep.Spec.Template.Labels = labels
		if len(dep.Spec.Template.Spec.Containers) == 0 {
			dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web"}}
		}
		dep.Spec.Template.Spec.Containers[0].Image = "nginx:1.27"
		return controller.SetControllerReference(foo, dep)
	})
	return controller.Result{}, err
}
