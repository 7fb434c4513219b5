// Command minimal is examples/foo/minimal written on controller-runtime: a
// Foo owns a Deployment of the name and size it asks for. It is the
// reference for the line counts in docs/migrating-from-client-go.md
// (size_test.go counts both programs the same way), and it builds, so it
// stays honest as controller-runtime changes.
package main

import (
	"context"
	"os"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	ctrl "sigs.k8s.io/controller-runtime"
	"sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"

	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
)

func main() {
	scheme := runtime.NewScheme()
	_ = clientgoscheme.AddToScheme(scheme)
	_ = samplev1.AddToScheme(scheme)
	mgr, err := ctrl.NewManager(ctrl.GetConfigOrDie(), ctrl.Options{Scheme: scheme})
	if err != nil {
		os.Exit(1)
	}
	err = ctrl.NewControllerManagedBy(mgr).For(&samplev1.Foo{}).Owns(&appsv1.Deployment{}).
		Complete(&FooReconciler{Client: mgr.GetClient(), Scheme: mgr.GetScheme()})
	if err != nil {
		os.Exit(1)
	}
	if err := mgr.Start(ctrl.SetupSignalHandler()); err != nil {
		os.Exit(1)
	}
}

// FooReconciler makes each Foo's Deployment match it.
type FooReconciler struct {
	client.Client
	Scheme *runtime.Scheme
}

// Reconcile creates or updates the Foo's Deployment, owned by the Foo.
func (r *FooReconciler) Reconcile(ctx context.Context, req ctrl.Request) (ctrl.Result, error) {
	var foo samplev1.Foo
	if err := r.Get(ctx, req.NamespacedName, &foo); err != nil {
		return ctrl.Result{}, client.IgnoreNotFound(err)
	}
	dep := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: foo.Namespace, Name: foo.Spec.DeploymentName}}
	_, err := controllerutil.CreateOrUpdate(ctx, r.Client, dep, func() error {
		labels := map[string]string{"app": foo.Name}
		dep.Spec.Replicas = foo.Spec.Replicas
		dep.Spec.Selector = &metav1.LabelSelector{MatchLabels: labels}
		dep.Spec.Template.Labels = labels
		if len(dep.Spec.Template.Spec.Containers) == 0 {
			dep.Spec.Template.Spec.Containers = []corev1.Container{{Name: "web"}}
		}
		dep.Spec.Template.Spec.Containers[0].Image = "nginx:1.27"
		return controllerutil.SetControllerReference(&foo, dep, r.Scheme)
	})
	return ctrl.Result{}, err
}
