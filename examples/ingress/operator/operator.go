package operator

import (
	"context"
	"errors"
	"log/slog"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/manager"
)

// The operator's permissions, from which controller-gen writes
// config/rbac/role.yaml. They are all it needs, and the e2e test proves it by
// running the operator with its service account's token. Services are only
// read (through the informer); Ingresses are read live (get) only by
// CreateOrPatch, when the cache says one must be written, and changed with
// merge patches, never updates:
//
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=get;list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=ingress-system

// ServiceResource is where Services live: the owner kind of the Ingresses
// the operator makes.
var ServiceResource = client.Resource{
	Resource:   corev1.SchemeGroupVersion.WithResource("services"),
	Kind:       corev1.SchemeGroupVersion.WithKind("Service"),
	Namespaced: true,
}

// Options configure Run. The zero value is valid.
type Options struct {
	// Namespace limits the operator to one namespace. Default "": all.
	Namespace string
	// LeaderElection is the manager's; default off. The shipped Deployment
	// turns it on, with the Lease "ingress-operator" in ingress-system.
	LeaderElection manager.LeaderElection
	// HealthAddr and MetricsAddr are the manager's; default: not served.
	HealthAddr, MetricsAddr string
	// Logger receives the manager's and controller's logs. Nil: discard.
	Logger *slog.Logger
}

// Run runs the Ingress operator until ctx ends (or leadership is lost).
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	mgr, err := NewManager(cfg, opts)
	if err != nil {
		return err
	}
	if err := Setup(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// NewManager returns the manager Run runs, before Setup: for callers that
// want more of it than Run gives, such as its metrics.
func NewManager(cfg config.Config, opts Options) (*manager.Manager, error) {
	return manager.New(cfg, manager.Options{
		Namespace:        opts.Namespace,
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "examples.loom.dev/ingress-operator",
		Logger:           opts.Logger,
	})
}

// Setup adds the Ingress controller, with its informers (Services and
// Ingresses), to mgr.
func Setup(ctx context.Context, mgr *manager.Manager) error {
	services, err := cache.InformerFor[corev1.Service](ctx, mgr.Factory(), cache.InformerForOptions[*corev1.Service]{})
	if err != nil {
		return err
	}
	// Every Ingress, not only the operator's: an Ingress in the way of one
	// the operator would make must be seen, and its removal too.
	ingresses, err := cache.InformerFor[networkingv1.Ingress](ctx, mgr.Factory(), cache.InformerForOptions[*networkingv1.Ingress]{})
	if err != nil {
		return err
	}
	ingClient, err := client.For[networkingv1.Ingress](ctx, mgr.REST(), client.Options{})
	if err != nil {
		return err
	}
	r := &Reconciler{Ingresses: ingClient, ServiceCache: services.Lister(), IngressCache: ingresses.Lister(), Events: mgr.Recorder()}
	c := controller.New("ingress", r, mgr.ControllerOptions())
	if err := controller.For(c, services, controller.ResourceVersionChanged[*corev1.Service]()); err != nil {
		return err
	}
	// A change to an Ingress the operator made (edited or deleted by
	// someone) reconciles its Service, which repairs it.
	if err := controller.Owns(c, ingresses, ServiceResource); err != nil {
		return err
	}
	// An Ingress that no Service controls, in the way of the one a Service
	// asks for: when it is deleted (or handed over), the Service gets its
	// Ingress. The name is the link, as the operator names each Ingress
	// after its Service.
	err = controller.Watches(c, ingresses, func(ing *networkingv1.Ingress) []controller.Request {
		if ref := controller.GetControllerOf(ing); ref != nil && ref.APIVersion == "v1" && ref.Kind == "Service" {
			return nil // Owns has it
		}
		return []controller.Request{{Namespace: ing.Namespace, Name: ing.Name}}
	})
	if err != nil {
		return err
	}
	return mgr.Add(c)
}

// Reconciler makes one Service's Ingress match the Service. It reads from
// the caches (listers) and writes to the server only when the cache shows
// that something must change.
type Reconciler struct {
	Ingresses    *client.Client[*networkingv1.Ingress]
	ServiceCache cache.Lister[*corev1.Service]
	IngressCache cache.Lister[*networkingv1.Ingress]
	Events       *events.Recorder
}

// Reconcile implements controller.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	svc, ok := r.ServiceCache.Namespace(req.Namespace).Get(req.Name)
	if !ok {
		return controller.Result{}, nil // gone; the garbage collector deletes its Ingress
	}
	cur, exists := r.IngressCache.Namespace(req.Namespace).Get(req.Name)
	want, err := desired(svc)
	if err != nil {
		// The Ingress there (if any) stays as it was: a bad edit of an
		// annotation does not take a working Ingress away.
		r.Events.Event(svc, corev1.EventTypeWarning, "InvalidIngress", err.Error())
		return controller.Result{}, controller.TerminalError(err)
	}
	if want == nil {
		if !exists || claim(cur, svc) != nil {
			return controller.Result{}, nil
		}
		return controller.Result{}, r.delete(ctx, svc, cur)
	}

	mutate := func(ing *networkingv1.Ingress) error {
		if ing.UID != "" { // as stored, not new
			if err := claim(ing, svc); err != nil {
				return err
			}
		}
		return apply(ing, want, svc)
	}
	if exists {
		next := cur.DeepCopy()
		err := mutate(next)
		if err == nil && equality.Semantic.DeepEqual(cur, next) {
			return controller.Result{}, nil // in line: nothing to write
		}
		if err != nil {
			return controller.Result{}, r.blocked(svc, err)
		}
	}
	// The cache says the Ingress is missing or differs: CreateOrPatch reads
	// it live and writes only what still differs (nothing, if the cache was
	// just behind).
	op, err := controller.CreateOrPatch(ctx, r.Ingresses,
		&networkingv1.Ingress{ObjectMeta: metav1.ObjectMeta{Namespace: svc.Namespace, Name: svc.Name}}, mutate)
	switch {
	case errors.Is(err, errTaken) || errors.Is(err, errEarlierOwner):
		return controller.Result{}, r.blocked(svc, err)
	case apierrors.IsInvalid(err):
		r.Events.Event(svc, corev1.EventTypeWarning, "InvalidIngress", err.Error())
		return controller.Result{}, controller.TerminalError(err)
	case err != nil:
		return controller.Result{}, err // AlreadyExists included: the next attempt reads it
	}
	switch op {
	case controller.OperationCreated:
		r.Events.Event(svc, corev1.EventTypeNormal, "IngressCreated", "created ingress "+svc.Name)
	case controller.OperationUpdated:
		r.Events.Event(svc, corev1.EventTypeNormal, "IngressUpdated", "updated ingress "+svc.Name)
	}
	return controller.Result{}, nil
}

// delete deletes svc's Ingress ing, as long as it is still the one seen
// (a UID precondition).
func (r *Reconciler) delete(ctx context.Context, svc *corev1.Service, ing *networkingv1.Ingress) error {
	err := r.Ingresses.Namespace(ing.Namespace).Delete(ctx, ing.Name, metav1.DeleteOptions{
		Preconditions: &metav1.Preconditions{UID: &ing.UID},
	})
	if apierrors.IsNotFound(err) {
		return nil
	}
	if err != nil {
		return err // a Conflict (another Ingress of that name now) included: try again from fresh state
	}
	r.Events.Event(svc, corev1.EventTypeNormal, "IngressDeleted", "deleted ingress "+ing.Name+": the service no longer asks for one")
	return nil
}

// blocked handles an Ingress, in svc's Ingress's place, that the operator
// may not write (claim's error).
func (r *Reconciler) blocked(svc *corev1.Service, err error) error {
	if errors.Is(err, errEarlierOwner) {
		return nil // its deletion reconciles svc again
	}
	r.Events.Eventf(svc, corev1.EventTypeWarning, "IngressExists", "ingress %s exists and is not controlled by this service; not overwriting it", svc.Name)
	return controller.TerminalError(err)
}

var _ controller.Reconciler = (*Reconciler)(nil)
