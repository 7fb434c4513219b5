package operator

import (
	"context"
	"fmt"
	"log/slog"
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

// Resource is where At objects live.
var Resource = client.Resource{
	Resource:   v1alpha1.GroupVersion.WithResource("ats"),
	Kind:       v1alpha1.GroupVersion.WithKind("At"),
	Namespaced: true,
}

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
}

// Scheme returns a scheme with the At types of both versions.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	for _, add := range []func(*runtime.Scheme) error{v1alpha1.AddToScheme, v1beta1.AddToScheme} {
		if err := add(s); err != nil {
			panic(err) // only a programming error in AddToScheme can fail
		}
	}
	return s
}

// Run runs the At operator until ctx ends (or leadership is lost).
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	mgr, err := manager.New(cfg, manager.Options{
		Namespace:        opts.Namespace,
		Scheme:           Scheme(),
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "cnat.programming-kubernetes.info/at-operator",
		Logger:           opts.Logger,
	})
	if err != nil {
		return err
	}
	if err := Setup(ctx, mgr, opts.Now); err != nil {
		return err
	}
	if opts.Webhooks != nil {
		srv, err := setupWebhooks(ctx, mgr, *opts.Webhooks, opts)
		if err != nil {
			return err
		}
		defer srv.Close() // if the manager failed before starting it
	}
	return mgr.Start(ctx)
}

// Setup adds the At controller, with its informers, to mgr (whose Scheme
// must have the At types). now may be nil for time.Now.
func Setup(ctx context.Context, mgr *manager.Manager, now func() time.Time) error {
	if now == nil {
		now = time.Now
	}
	ats, err := cache.InformerFor[v1alpha1.At](ctx, mgr.Factory(), cache.InformerForOptions[*v1alpha1.At]{Resource: Resource})
	if err != nil {
		return err
	}
	pods, err := cache.InformerFor[corev1.Pod](ctx, mgr.Factory(), cache.InformerForOptions[*corev1.Pod]{LabelSelector: PodLabel})
	if err != nil {
		return err
	}
	atClient, err := client.For[v1alpha1.At](ctx, mgr.REST(), client.Options{Resource: Resource, Scheme: Scheme()})
	if err != nil {
		return err
	}
	podClient, err := client.For[corev1.Pod](ctx, mgr.REST(), client.Options{})
	if err != nil {
		return err
	}
	r := &Reconciler{Ats: atClient, Pods: podClient, AtCache: ats.Lister(), PodCache: pods.Lister(),
		Events: mgr.Recorder(), Scheme: Scheme(), Now: now}
	c := controller.New("at", r, mgr.ControllerOptions())
	if err := controller.For(c, ats, controller.ResourceVersionChanged[*v1alpha1.At]()); err != nil {
		return err
	}
	if err := controller.Owns(c, pods, Resource); err != nil {
		return err
	}
	return mgr.Add(c)
}

// Reconciler moves one At a step towards DONE. It reads from the caches
// (listers) and writes to the server.
type Reconciler struct {
	Ats      *client.Client[*v1alpha1.At]
	Pods     *client.Client[*corev1.Pod]
	AtCache  cache.Lister[*v1alpha1.At]
	PodCache cache.Lister[*corev1.Pod]
	Events   *events.Recorder
	Scheme   *runtime.Scheme
	Now      func() time.Time
}

// Reconcile implements controller.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	at, ok := r.AtCache.Namespace(req.Namespace).Get(req.Name)
	if !ok {
		return controller.Result{}, nil // gone; its Pod goes with it (owner reference)
	}
	ats, pods := r.Ats.Namespace(at.Namespace), r.Pods.Namespace(at.Namespace)
	if at.DeletionTimestamp != nil {
		return r.finalize(ctx, at)
	}
	if !controller.HasFinalizer(at, Finalizer) {
		next := at.DeepCopy()
		controller.AddFinalizer(next, Finalizer)
		_, err := ats.Update(ctx, next, metav1.UpdateOptions{})
		return controller.Result{}, err // the update brings us back
	}

	pod, ok := r.PodCache.Namespace(at.Namespace).Get(podName(at))
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
		if err := r.createPod(ctx, pods, at); err != nil {
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
		if _, err := ats.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
			return controller.Result{}, err // a conflict: the next attempt reads fresh state
		}
	}
	if st.reason != "" {
		r.Events.Event(at, st.eventType, st.reason, st.note)
	}
	return controller.Result{RequeueAfter: st.requeue}, nil
}

func (r *Reconciler) createPod(ctx context.Context, pods *client.Client[*corev1.Pod], at *v1alpha1.At) error {
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
	if err := controller.SetControllerReference(at, pod, r.Scheme); err != nil {
		return err
	}
	_, err := pods.Create(ctx, pod, metav1.CreateOptions{})
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
	err := r.Pods.Namespace(at.Namespace).Delete(ctx, podName(at), metav1.DeleteOptions{})
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
	_, err = r.Ats.Namespace(at.Namespace).Update(ctx, next, metav1.UpdateOptions{})
	if apierrors.IsNotFound(err) {
		return controller.Result{}, nil
	}
	return controller.Result{}, err
}

var _ controller.Reconciler = (*Reconciler)(nil)
