package operator

import (
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
)

// Image is what every Foo's Deployment runs, as in sample-controller.
const Image = "nginx:1.27"

// The Ready condition's type and reasons, and the reason of the Warning
// event recorded when a Foo's Deployment name is taken (sample-controller's
// ErrResourceExists).
const (
	ConditionReady = "Ready"

	ReasonAvailable   = "DeploymentAvailable"    // True: every replica available
	ReasonProgressing = "DeploymentProgressing"  // False: being created or scaled
	ReasonConflict    = "DeploymentNameConflict" // False: the name is another's

	ReasonResourceExists = "ErrResourceExists"
)

// step is what one reconcile does to the Deployment, decided by plan from
// the Foo and the Deployment under its spec.deploymentName alone: the
// reconciler only carries it out.
type step struct {
	create   *appsv1.Deployment // create this Deployment: none has the name
	update   *appsv1.Deployment // write this copy of the Foo's Deployment
	conflict bool               // the name is taken by a Deployment not the Foo's
}

// plan decides what to do about foo's Deployment. dep is the Deployment
// named foo.Spec.DeploymentName, or nil when there is none (yet).
func plan(foo *v1alpha1.Foo, dep *appsv1.Deployment) step {
	switch {
	case dep == nil:
		return step{create: newDeployment(foo)}
	case !controller.IsControlledBy(dep, foo):
		// Someone else's: never overwritten. The Foo waits until it goes.
		return step{conflict: true}
	case dep.Spec.Replicas == nil || *dep.Spec.Replicas != replicas(foo):
		next := dep.DeepCopy()
		next.Spec.Replicas = new(replicas(foo))
		return step{update: next}
	}
	return step{}
}

// newDeployment returns the Deployment foo asks for, controlled by foo, so
// that the garbage collector deletes it with foo and its changes reconcile
// foo.
func newDeployment(foo *v1alpha1.Foo) *appsv1.Deployment {
	l := podLabels(foo)
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{
			Name:            foo.Spec.DeploymentName,
			Namespace:       foo.Namespace,
			Labels:          l,
			OwnerReferences: []metav1.OwnerReference{*metav1.NewControllerRef(foo, v1alpha1.GroupVersion.WithKind("Foo"))},
		},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(replicas(foo)),
			Selector: &metav1.LabelSelector{MatchLabels: l},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: l},
				Spec: corev1.PodSpec{
					Containers: []corev1.Container{{Name: "nginx", Image: Image}},
				},
			},
		},
	}
}

// nextStatus returns a copy of foo with the status that dep (the Foo's
// Deployment as it now is; nil when it is not known yet) or a name
// conflict calls for, and whether that differs from foo's status, that is,
// whether it must be written.
func nextStatus(foo *v1alpha1.Foo, dep *appsv1.Deployment, conflict bool) (*v1alpha1.Foo, bool) {
	next := foo.DeepCopy()
	want := replicas(foo)
	ready := metav1.Condition{Type: ConditionReady, Status: metav1.ConditionFalse}
	next.Status.AvailableReplicas = 0
	switch {
	case conflict:
		ready.Reason = ReasonConflict
		ready.Message = fmt.Sprintf("deployment %s exists and is not managed by this Foo", foo.Spec.DeploymentName)
	case dep == nil:
		ready.Reason = ReasonProgressing
		ready.Message = "creating deployment " + foo.Spec.DeploymentName
	default:
		next.Status.AvailableReplicas = dep.Status.AvailableReplicas
		ready.Reason = ReasonProgressing
		ready.Message = fmt.Sprintf("%d of %d replicas available", dep.Status.AvailableReplicas, want)
		switch {
		case dep.Status.ObservedGeneration < dep.Generation:
			ready.Message = "waiting for the deployment controller to see the change; " + ready.Message
		case dep.Status.AvailableReplicas == want && dep.Status.UpdatedReplicas == want && dep.Status.Replicas == want:
			ready.Status, ready.Reason = metav1.ConditionTrue, ReasonAvailable
		}
	}
	next.Status.Selector = labels.SelectorFromSet(podLabels(foo)).String()
	changed := controller.SetObservedStatusCondition(&next.Status.Conditions, next, ready)
	changed = changed || next.Status.AvailableReplicas != foo.Status.AvailableReplicas || next.Status.Selector != foo.Status.Selector
	return next, changed
}

// replicas is foo's spec.replicas; the schema defaults it to 1, as does
// the Deployment's.
func replicas(foo *v1alpha1.Foo) int32 {
	if foo.Spec.Replicas == nil {
		return 1
	}
	return *foo.Spec.Replicas
}

// podLabels are the labels of foo's Deployment and of its Pods (the
// Deployment's selector), as in sample-controller.
func podLabels(foo *v1alpha1.Foo) map[string]string {
	return map[string]string{"app": "nginx", "controller": foo.Name}
}
