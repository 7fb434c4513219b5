package operator

import (
	"context"
	"log/slog"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/tracing"
)

// The operator's permissions, from which controller-gen writes
// config/rbac/role.yaml. They are all it needs, and the e2e test proves it by
// running the operator with its service account's token:
//
// Run sharded (Options.Sharding), the replicas also patch Foos (the
// leader labels each with its bucket) and list, watch and delete their
// shard Leases.
//
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=list;watch;patch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;list;watch;create;update;delete,namespace=foo-system

// byDeployment indexes Foos by "namespace/spec.deploymentName", so that a
// change to any Deployment finds the Foos that want its name.
const byDeployment = "deploymentName"

// Options configure Run. The zero value is valid.
type Options struct {
	// Namespace limits the operator to one namespace. Default "": all.
	Namespace string
	// LeaderElection is the manager's; default off. The shipped Deployment
	// turns it on, with the Lease "foo-operator" in foo-system.
	LeaderElection manager.LeaderElection
	// HealthAddr and MetricsAddr are the manager's; default: not served.
	HealthAddr, MetricsAddr string
	// Logger receives the manager's and controller's logs. Nil: discard.
	Logger *slog.Logger
	// Tracing is the manager's; default off.
	Tracing tracing.Options
	// Ring, when set, makes the operator one replica of a sharded ring of
	// that name (Leases in foo-system): the replicas split the Foos among
	// them, each caching and reconciling its share. Deployments are not
	// sharded, since a Foo must see a Deployment of its name that it does
	// not own. Identity names this replica (default: host name and a
	// random suffix). Default "": not sharded.
	Ring, Identity string
}

// Run runs the Foo operator until ctx ends (or leadership is lost).
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	mgr, err := manager.New(manager.Options{Config: new(cfg),
		Namespace:        opts.Namespace,
		Scheme:           v1alpha1.Scheme(),
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "samplecontroller.k8s.io/foo-operator",
		Logger:           opts.Logger,
		Tracing:          opts.Tracing,
		Sharding:         sharding(opts),
	})
	if err != nil {
		return err
	}
	if err := Setup(mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// sharding is the manager's sharding for opts: the Foos, if opts.Ring is
// set.
func sharding(opts Options) manager.Sharding {
	if opts.Ring == "" {
		return manager.Sharding{}
	}
	return manager.Sharding{
		Ring: opts.Ring, Namespace: "foo-system", Identity: opts.Identity,
		Kinds: []schema.GroupKind{{Group: v1alpha1.GroupVersion.Group, Kind: "Foo"}},
	}
}

// Setup adds the Foo controller to mgr (whose Scheme must have the Foo
// types).
func Setup(mgr *manager.Manager) error {
	foos := manager.CachedClient[v1alpha1.Foo](mgr)
	// Every Deployment, not only the Foos' own: a Foo whose name is taken
	// must see the other Deployment go.
	deps := manager.CachedClient[appsv1.Deployment](mgr)
	if err := foos.AddIndexer(byDeployment, func(foo *v1alpha1.Foo) ([]string, error) {
		return []string{foo.Namespace + "/" + foo.Spec.DeploymentName}, nil
	}); err != nil {
		return err
	}
	r := &Reconciler{Foos: foos, Deployments: deps, Events: mgr.Recorder()}
	// A change to a Deployment that is not a Foo's reconciles the Foos that
	// want its name: when it goes, they create theirs.
	claimants := func(dep client.Object) []controller.Request {
		list, _ := foos.Informer().Indexer().ByIndex(byDeployment, dep.GetNamespace()+"/"+dep.GetName()) // the index exists
		var reqs []controller.Request
		for _, foo := range list {
			if !controller.IsControlledBy(dep, foo) {
				reqs = append(reqs, controller.Request{Namespace: foo.Namespace, Name: foo.Name})
			}
		}
		return reqs
	}
	rvChanged := controller.ResourceVersionChanged()
	controller.New(mgr, r.Reconcile, controller.Options{Name: "foo"}).
		Filter(rvChanged).
		Owns(deps, rvChanged). // its own Deployment's status, mostly
		Watches(deps, claimants, rvChanged)
	return nil
}

// Reconciler makes one Foo's Deployment match it and reports the
// Deployment's state in the Foo's status. It reads from the caches and
// writes to the server, through the manager's cached clients (or, in
// unit tests, an in-memory reader and a recorder).
type Reconciler struct {
	Foos        client.Writer[*v1alpha1.Foo]
	Deployments client.ReadWriter[*appsv1.Deployment]
	Events      *events.Recorder
}

// Reconcile brings foo's Deployment and status up to date.
func (r *Reconciler) Reconcile(ctx context.Context, foo *v1alpha1.Foo) (controller.Result, error) {
	if foo.DeletionTimestamp != nil {
		return controller.Result{}, nil // going; its Deployment goes with it (owner reference)
	}
	dep, err := r.Deployments.Get(ctx, foo.Namespace, foo.Spec.DeploymentName)
	switch {
	case apierrors.IsNotFound(err):
		dep = nil
	case err != nil:
		return controller.Result{}, err
	}

	st := plan(foo, dep)
	switch {
	case st.create != nil:
		created, err := r.Deployments.Create(ctx, st.create, metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return controller.Result{}, nil // the cache was behind; its add event brings us back
		}
		if err != nil {
			return controller.Result{}, err
		}
		r.Events.Eventf(foo, corev1.EventTypeNormal, "DeploymentCreated", "created deployment %s with %d replicas",
			created.Name, *created.Spec.Replicas)
		dep = created
	case st.update != nil:
		updated, err := r.Deployments.Update(ctx, st.update, metav1.UpdateOptions{})
		if err != nil {
			return controller.Result{}, err // a conflict: the next attempt reads fresh state
		}
		r.Events.Eventf(foo, corev1.EventTypeNormal, "DeploymentScaled", "scaled deployment %s from %d to %d replicas",
			dep.Name, replicasOf(dep), replicasOf(updated))
		dep = updated
	}

	next, changed := nextStatus(foo, dep, st.conflict)
	if !changed {
		return controller.Result{}, nil
	}
	if _, err := r.Foos.UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
		return controller.Result{}, err // a conflict: the next attempt reads fresh state
	}
	if st.conflict {
		// Once per change of the Foo's status, not on every reconcile. No
		// retry either: the other Deployment's deletion reconciles the Foo.
		r.Events.Eventf(foo, corev1.EventTypeWarning, ReasonResourceExists,
			"deployment %s already exists and is not managed by this Foo", foo.Spec.DeploymentName)
	}
	return controller.Result{}, nil
}

func replicasOf(dep *appsv1.Deployment) int32 {
	if dep.Spec.Replicas == nil {
		return 1
	}
	return *dep.Spec.Replicas
}
