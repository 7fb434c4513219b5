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

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/manager"
)

// The operator's permissions, from which controller-gen writes
// config/rbac/role.yaml. They are all it needs, and the e2e test proves it by
// running the operator with its service account's token. Services and
// Ingresses are read from the cache only (list and watch); Ingresses are
// changed with merge patches, never updates:
//
// +kubebuilder:rbac:groups="",resources=services,verbs=list;watch
// +kubebuilder:rbac:groups=networking.k8s.io,resources=ingresses,verbs=list;watch;create;patch;delete
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=ingress-system

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
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// NewManager returns the manager Run runs, before Setup: for callers that
// want more of it than Run gives, such as its metrics.
func NewManager(cfg config.Config, opts Options) (*manager.Manager, error) {
	return manager.New(manager.Options{Config: new(cfg),
		Namespace:        opts.Namespace,
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "examples.loom.dev/ingress-operator",
		Logger:           opts.Logger,
	})
}

// Setup adds the Ingress controller to mgr.
func Setup(mgr *manager.Manager) error {
	// Every Ingress, not only the operator's: an Ingress in the way of one
	// the operator would make must be seen, and its removal too.
	ingresses := manager.CachedClient[networkingv1.Ingress](mgr)
	r := &Reconciler{Ingresses: ingresses, Events: mgr.Recorder()}
	// An Ingress that no Service controls, in the way of the one a Service
	// asks for: when it is deleted (or handed over), the Service gets its
	// Ingress. The name is the link, as the operator names each Ingress
	// after its Service.
	inTheWay := func(ing client.Object) []controller.Request {
		if ref := controller.GetControllerOf(ing); ref != nil && ref.APIVersion == "v1" && ref.Kind == "Service" {
			return nil // Owns has it
		}
		return []controller.Request{{Namespace: ing.GetNamespace(), Name: ing.GetName()}}
	}
	controller.New(mgr, r.Reconcile, controller.Options{Name: "ingress"}).
		Filter(controller.ResourceVersionChanged()).
		// A change to an Ingress the operator made (edited or deleted by
		// someone) reconciles its Service, which repairs it.
		Owns(ingresses).
		Watches(ingresses, inTheWay)
	return nil
}

// Reconciler makes one Service's Ingress match the Service. It reads from
// the cache and writes to the server only when the cache shows that
// something must change.
type Reconciler struct {
	Ingresses client.ReadWriter[*networkingv1.Ingress]
	Events    *events.Recorder
}

// Reconcile makes svc's Ingress match it.
func (r *Reconciler) Reconcile(ctx context.Context, svc *corev1.Service) (controller.Result, error) {
	cur, err := r.Ingresses.Get(ctx, svc.Namespace, svc.Name)
	exists := err == nil
	if err != nil && !apierrors.IsNotFound(err) {
		return controller.Result{}, err
	}
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
	// The cache says the Ingress is missing or differs: CreateOrPatch
	// writes only what differs.
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
	err := r.Ingresses.Delete(ctx, ing, metav1.DeleteOptions{
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
