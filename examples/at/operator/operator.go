package operator

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/api/v1beta1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/tracing"
)

// The operator's permissions, from which controller-gen writes
// config/rbac/role.yaml. They are all it needs, and the e2e test proves it by
// running the operator with its service account's token:
//
// +kubebuilder:rbac:groups=cnat.programming-kubernetes.info,resources=ats,verbs=list;watch;update
// +kubebuilder:rbac:groups=cnat.programming-kubernetes.info,resources=ats/status,verbs=update
// +kubebuilder:rbac:groups="",resources=pods,verbs=list;watch;create;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=at-system

// Finalizer is put on every At: when an At is deleted, the operator deletes
// its Pod before letting the At go, so a command never outlives its At, even
// when the At is deleted with orphan propagation (which would leave the Pod
// to run on).
const Finalizer = "cnat.programming-kubernetes.info/stop-pod"

// PodLabel is set on each At's Pod to the At's name. The Pod informer
// selects on it, so the operator caches its own Pods only.
const PodLabel = "cnat.programming-kubernetes.info/at"

// Options configure Run. The zero value is valid.
type Options struct {
	// Namespace limits the operator to one namespace. Default "": all.
	Namespace string
	// LeaderElection is the manager's; default off. The shipped Deployment
	// turns it on, with the Lease "at-operator" in at-system.
	LeaderElection manager.LeaderElection
	// HealthAddr and MetricsAddr are the manager's; default: not served.
	HealthAddr, MetricsAddr string
	// Webhooks, when set, serves the At's validating, defaulting and
	// conversion webhooks, with certificates the operator makes, renews and
	// injects itself. Default nil: no webhooks (config/ registers them, so
	// the API server then refuses At writes: failurePolicy Fail).
	Webhooks *WebhookOptions
	// Now is the clock the schedule is compared with. Default time.Now.
	Now func() time.Time
	// Logger receives the manager's and controller's logs. Nil: discard.
	Logger *slog.Logger
	// Tracing is the manager's; default off.
	Tracing tracing.Options
}

// Scheme returns a Scheme with the At types of both versions. It is made
// once; do not change it.
func Scheme() *runtime.Scheme { return scheme() }

var scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta1.AddToScheme} {
		_ = add(s) // they cannot fail
	}
	return s
})

// Run runs the At operator until ctx ends (or leadership is lost).
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	mgr, err := manager.New(manager.Options{Config: new(cfg),
		Namespace:        opts.Namespace,
		Scheme:           Scheme(),
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "cnat.programming-kubernetes.info/at-operator",
		Logger:           opts.Logger,
		Tracing:          opts.Tracing,
	})
	if err != nil {
		return err
	}
	if err := Setup(mgr, opts.Now); err != nil {
		return err
	}
	if opts.Webhooks != nil {
		if err := setupWebhooks(ctx, mgr, *opts.Webhooks, opts); err != nil {
			return err
		}
	}
	return mgr.Start(ctx)
}

// Setup adds the At controller to mgr (whose Scheme must have the At
// types). now may be nil for time.Now.
func Setup(mgr *manager.Manager, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	pods := manager.CachedClient[corev1.Pod](mgr, cache.InformerForOptions{LabelSelector: PodLabel}) // its own Pods only
	r := &Reconciler{Ats: manager.CachedClient[v1alpha1.At](mgr), Pods: pods, Events: mgr.Recorder(), Now: now}
	controller.New(mgr, r.Reconcile, controller.Options{Name: "at"}).
		Filter(controller.ResourceVersionChanged()).
		Owns(pods)
	return nil
}

// Reconciler moves one At a step towards DONE. It reads from the caches
// and writes to the server, through the manager's cached clients.
type Reconciler struct {
	Ats    client.Writer[*v1alpha1.At]
	Pods   client.ReadWriter[*corev1.Pod]
	Events *events.Recorder
	Now    func() time.Time
}

// Reconcile moves at a step towards DONE.
func (r *Reconciler) Reconcile(ctx context.Context, at *v1alpha1.At) (controller.Result, error) {
	if at.DeletionTimestamp != nil {
		return r.finalize(ctx, at)
	}
	if !controller.HasFinalizer(at, Finalizer) {
		next := at.DeepCopy()
		controller.AddFinalizer(next, Finalizer)
		_, err := r.Ats.Update(ctx, next, metav1.UpdateOptions{})
		return controller.Result{}, err // the update brings us back
	}

	pod, err := r.Pods.Get(ctx, at.Namespace, podName(at))
	ok := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, err
	}
	if ok && !controller.IsControlledBy(pod, at) {
		r.Events.Eventf(at, corev1.EventTypeWarning, "PodNameTaken", "pod %s exists and is not this At's", pod.Name)
		return controller.Result{}, controller.TerminalError(fmt.Errorf("pod %s/%s is not owned by at %s", pod.Namespace, pod.Name, at.Name))
	}
	if !ok {
		pod = nil
	}
	st, err := plan(at, pod, r.Now())
	if err != nil {
		r.Events.Event(at, corev1.EventTypeWarning, "InvalidSchedule", err.Error())
		return controller.Result{}, controller.TerminalError(err)
	}
	if st.createPod {
		if err := r.createPod(ctx, at); err != nil {
			return controller.Result{}, err
		}
	}
	if st.phase != "" {
		next := at.DeepCopy()
		next.Status.Phase = st.phase
		next.Status.PodName = ""
		if st.phase != v1alpha1.PhasePending {
			next.Status.PodName = podName(at)
		}
		if st.succeeded != nil {
			c := metav1.Condition{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: st.reason, Message: st.note}
			if !*st.succeeded {
				c.Status = metav1.ConditionFalse
			}
			controller.SetObservedStatusCondition(&next.Status.Conditions, next, c)
		}
		if _, err := r.Ats.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return controller.Result{}, err // a conflict: the next attempt reads fresh state
		}
	}
	if st.reason != "" {
		r.Events.Event(at, st.eventType, st.reason, st.note)
	}
	return controller.Result{RequeueAfter: st.requeue}, nil
}

func (r *Reconciler) createPod(ctx context.Context, at *v1alpha1.At) error {
	image := at.Spec.Image
	if image == "" {
		image = "busybox:1.37"
	}
	pod := &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: podName(at), Namespace: at.Namespace, Labels: map[string]string{PodLabel: at.Name}},
		Spec: corev1.PodSpec{
			RestartPolicy: corev1.RestartPolicyNever,
			Containers:    []corev1.Container{{Name: "at", Image: image, Command: []string{"sh", "-c", at.Spec.Command}}},
		},
	}
	if err := controller.SetControllerReference(at, pod); err != nil {
		return err
	}
	_, err := r.Pods.Create(ctx, pod, metav1.CreateOptions{})
	if apierrors.IsAlreadyExists(err) {
		return nil // made by an earlier attempt; the cache was behind
	}
	return err
}

// finalize deletes the At's Pod, and once it is gone lets the At go by
// removing the finalizer. The Pod's deletion brings the At back here (the
// Pod informer's Owns); a requeue after a few seconds is the fallback.
func (r *Reconciler) finalize(ctx context.Context, at *v1alpha1.At) (controller.Result, error) {
	if !controller.HasFinalizer(at, Finalizer) {
		return controller.Result{}, nil
	}
	err := r.Pods.Delete(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Namespace: at.Namespace, Name: podName(at)}}, metav1.DeleteOptions{})
	switch {
	case apierrors.IsNotFound(err):
	case err != nil:
		return controller.Result{}, err
	default:
		r.Events.Event(at, corev1.EventTypeNormal, "Stopping", "deleting pod "+podName(at)+" before the At goes")
		return controller.Result{RequeueAfter: 5 * time.Second}, nil
	}
	next := at.DeepCopy()
	controller.RemoveFinalizer(next, Finalizer)
	_, err = r.Ats.Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	return controller.Result{}, err
}
