package operator

import (
	"context"
	"log/slog"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
)

// The operator's permissions, from which controller-gen writes
// config/rbac/role.yaml. They are all it needs, and the e2e test proves it by
// running the operator with its service account's token:
//
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos,verbs=list;watch
// +kubebuilder:rbac:groups=samplecontroller.k8s.io,resources=foos/status,verbs=update
// +kubebuilder:rbac:groups=apps,resources=deployments,verbs=list;watch;create;update
// +kubebuilder:rbac:groups=events.k8s.io,resources=events,verbs=create;patch
// +kubebuilder:rbac:groups=coordination.k8s.io,resources=leases,verbs=get;create;update,namespace=foo-system

// Resource is where Foo objects live.
var Resource = client.Resource{
	Resource:   v1alpha1.GroupVersion.WithResource("foos"),
	Kind:       v1alpha1.GroupVersion.WithKind("Foo"),
	Namespaced: true,
}

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
}

// Scheme returns a scheme with the Foo types.
func Scheme() *runtime.Scheme {
	s := runtime.NewScheme()
	if err := v1alpha1.AddToScheme(s); err != nil {
		panic(err) // only a programming error in AddToScheme can fail
	}
	return s
}

// Run runs the Foo operator until ctx ends (or leadership is lost).
func Run(ctx context.Context, cfg config.Config, opts Options) error {
	mgr, err := manager.New(cfg, manager.Options{
		Namespace:        opts.Namespace,
		Scheme:           Scheme(),
		LeaderElection:   opts.LeaderElection,
		HealthAddr:       opts.HealthAddr,
		MetricsAddr:      opts.MetricsAddr,
		EventsController: "samplecontroller.k8s.io/foo-operator",
		Logger:           opts.Logger,
	})
	if err != nil {
		return err
	}
	if err := Setup(ctx, mgr); err != nil {
		return err
	}
	return mgr.Start(ctx)
}

// Setup adds the Foo controller, with its informers, to mgr (whose Scheme
// must have the Foo types).
func Setup(ctx context.Context, mgr *manager.Manager) error {
	foos, err := cache.InformerFor[v1alpha1.Foo](ctx, mgr.Factory(), cache.InformerForOptions[*v1alpha1.Foo]{
		Resource: Resource,
		Indexers: cache.Indexers[*v1alpha1.Foo]{byDeployment: func(foo *v1alpha1.Foo) ([]string, error) {
			return []string{foo.Namespace + "/" + foo.Spec.DeploymentName}, nil
		}},
	})
	if err != nil {
		return err
	}
	// Every Deployment, not only the Foos' own: a Foo whose name is taken
	// must see the other Deployment go.
	deps, err := cache.InformerFor[appsv1.Deployment](ctx, mgr.Factory(), cache.InformerForOptions[*appsv1.Deployment]{})
	if err != nil {
		return err
	}
	fooClient, err := client.For[v1alpha1.Foo](ctx, mgr.REST(), client.Options{Resource: Resource, Scheme: Scheme()})
	if err != nil {
		return err
	}
	depClient, err := client.For[appsv1.Deployment](ctx, mgr.REST(), client.Options{})
	if err != nil {
		return err
	}
	r := &Reconciler{Foos: fooClient, Deployments: depClient, FooCache: foos.Lister(), DeploymentCache: deps.Lister(),
		Events: mgr.Recorder()}
	c := controller.New("foo", r, mgr.ControllerOptions())
	if err := controller.For(c, foos, controller.ResourceVersionChanged[*v1alpha1.Foo]()); err != nil {
		return err
	}
	// A change to a Foo's own Deployment (its status, mostly) reconciles
	// the Foo.
	if err := controller.Owns(c, deps, Resource, controller.ResourceVersionChanged[*appsv1.Deployment]()); err != nil {
		return err
	}
	// A change to a Deployment that is not a Foo's reconciles the Foos that
	// want its name: when it goes, they create theirs.
	fooIndex := foos.Indexer()
	claimants := func(dep *appsv1.Deployment) []controller.Request {
		list, _ := fooIndex.ByIndex(byDeployment, dep.Namespace+"/"+dep.Name) // the index exists
		var reqs []controller.Request
		for _, foo := range list {
			if !controller.IsControlledBy(dep, foo) {
				reqs = append(reqs, controller.Request{Namespace: foo.Namespace, Name: foo.Name})
			}
		}
		return reqs
	}
	if err := controller.Watches(c, deps, claimants, controller.ResourceVersionChanged[*appsv1.Deployment]()); err != nil {
		return err
	}
	return mgr.Add(c)
}

// Reconciler makes one Foo's Deployment match it and reports the
// Deployment's state in the Foo's status. It reads from the caches
// (listers) and writes to the server.
type Reconciler struct {
	Foos            *client.Client[*v1alpha1.Foo]
	Deployments     *client.Client[*appsv1.Deployment]
	FooCache        cache.Lister[*v1alpha1.Foo]
	DeploymentCache cache.Lister[*appsv1.Deployment]
	Events          *events.Recorder
}

// Reconcile implements controller.Reconciler.
func (r *Reconciler) Reconcile(ctx context.Context, req controller.Request) (controller.Result, error) {
	foo, ok := r.FooCache.Namespace(req.Namespace).Get(req.Name)
	if !ok || foo.DeletionTimestamp != nil {
		return controller.Result{}, nil // gone or going; its Deployment goes with it (owner reference)
	}
	deps := r.Deployments.Namespace(foo.Namespace)
	dep, ok := r.DeploymentCache.Namespace(foo.Namespace).Get(foo.Spec.DeploymentName)
	if !ok {
		dep = nil
	}

	st := plan(foo, dep)
	switch {
	case st.create != nil:
		created, err := deps.Create(ctx, st.create, metav1.CreateOptions{})
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
		updated, err := deps.Update(ctx, st.update, metav1.UpdateOptions{})
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
	if _, err := r.Foos.Namespace(foo.Namespace).UpdateStatus(ctx, next, metav1.UpdateOptions{}); err != nil {
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

var _ controller.Reconciler = (*Reconciler)(nil)
