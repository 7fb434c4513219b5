package main

import (
	"context"
	"net/http"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	clientrest "k8s.io/client-go/rest"
	toolscache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"
	"k8s.io/client-go/util/workqueue"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/handler"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

// runLoom: the manager's defaults, Secrets read through a referenced-only
// cache. With strip, the manager's Transform is StripManagedFields. With
// getEach, Loom follows controller-runtime's way instead: a metadata-only
// watch of Secrets and a GET per read.
func runLoom(ctx context.Context, kubeconfig string, strip, getEach bool, rec *recorder, ready chan<- framework) error {
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return err
	}
	opts := manager.Options{Config: &cfg, ShutdownTimeout: 5 * time.Second}
	if strip {
		opts.Transform = cache.StripManagedFields[client.Object]
	}
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	var secrets interface {
		controller.Source
		Get(ctx context.Context, namespace, name string) (*corev1.Secret, error)
	}
	if getEach {
		live, err := client.For[corev1.Secret](mgr.REST(), mgr.ClientOptions())
		if err != nil {
			return err
		}
		res, _ := live.KnownResource()
		secrets = getter{manager.CachedClient[metav1.PartialObjectMetadata](mgr, cache.InformerForOptions{Resource: res}), live}
	} else {
		secrets = manager.CachedClient[corev1.Secret](mgr, cache.InformerForOptions{ReferencedOnly: true})
	}
	controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		s, err := secrets.Get(ctx, cm.Namespace, cm.Data["secret"])
		if err != nil {
			return controller.Result{}, err
		}
		rec.observe(cm.Namespace+"/"+cm.Name, s.Annotations[stampKey])
		return controller.Result{}, nil
	}, controller.Options{Name: "refbench", For: cache.InformerForOptions{LabelSelector: label + "=1"}}).
		Watches(secrets, func(s client.Object) []controller.Request {
			if s.GetName() != namedIn(s.GetNamespace()) {
				return nil
			}
			return []controller.Request{{Namespace: s.GetNamespace(), Name: "ref"}}
		})
	ready <- framework{requests: func() int64 { return benchenv.LoomRequests(mgr.MetricsHandler()) }}
	return mgr.Start(ctx)
}

// getter watches Secrets' metadata and GETs each Secret read.
type getter struct {
	*cache.CachedClient[*metav1.PartialObjectMetadata]
	live *client.Client[*corev1.Secret]
}

func (g getter) Get(ctx context.Context, namespace, name string) (*corev1.Secret, error) {
	return g.live.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
}

// countingRT counts the requests a peer sends.
type countingRT struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	return c.rt.RoundTrip(r)
}

// peerConfig is kubeconfig's client-go config with protobuf (as Loom
// uses), no client-side rate limit, and a request counter.
func peerConfig(kubeconfig string, n *atomic.Int64) (*clientrest.Config, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS = -1
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, n} })
	return cfg, nil
}

// runClientGo: a shared informer of every Secret, an informer of the
// labelled ConfigMaps, a work queue and one worker, as sample-controller
// is written.
func runClientGo(ctx context.Context, kubeconfig string, rec *recorder, ready chan<- framework) error {
	n := new(atomic.Int64)
	cfg, err := peerConfig(kubeconfig, n)
	if err != nil {
		return err
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return err
	}
	all := informers.NewSharedInformerFactory(cs, 0)
	selected := informers.NewSharedInformerFactoryWithOptions(cs, 0, informers.WithTweakListOptions(func(o *metav1.ListOptions) {
		o.LabelSelector = label + "=1"
	}))
	secrets, cms := all.Core().V1().Secrets(), selected.Core().V1().ConfigMaps()
	q := workqueue.NewTypedRateLimitingQueue(workqueue.DefaultTypedControllerRateLimiter[types.NamespacedName]())
	enqueue := func(obj any) {
		if cm, ok := obj.(*corev1.ConfigMap); ok {
			q.Add(types.NamespacedName{Namespace: cm.Namespace, Name: cm.Name})
		}
	}
	if _, err := cms.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: enqueue, UpdateFunc: func(_, o any) { enqueue(o) }}); err != nil {
		return err
	}
	onSecret := func(obj any) {
		if s, ok := obj.(*corev1.Secret); ok && s.Name == namedIn(s.Namespace) {
			q.Add(types.NamespacedName{Namespace: s.Namespace, Name: "ref"})
		}
	}
	if _, err := secrets.Informer().AddEventHandler(toolscache.ResourceEventHandlerFuncs{AddFunc: onSecret, UpdateFunc: func(_, o any) { onSecret(o) }}); err != nil {
		return err
	}
	all.Start(ctx.Done())
	selected.Start(ctx.Done())
	ready <- framework{requests: n.Load}
	all.WaitForCacheSync(ctx.Done())
	selected.WaitForCacheSync(ctx.Done())
	go func() { <-ctx.Done(); q.ShutDown() }()
	for {
		key, shutdown := q.Get()
		if shutdown {
			all.Shutdown()
			selected.Shutdown()
			return nil
		}
		cm, err := cms.Lister().ConfigMaps(key.Namespace).Get(key.Name)
		if err == nil {
			var s *corev1.Secret
			if s, err = secrets.Lister().Secrets(key.Namespace).Get(cm.Data["secret"]); err == nil {
				rec.observe(key.Namespace+"/"+key.Name, s.Annotations[stampKey])
			}
		}
		if err != nil {
			q.AddRateLimited(key)
		} else {
			q.Forget(key)
		}
		q.Done(key)
	}
}

// runCRMeta: controller-runtime's defaults (metrics and probes off), the
// labelled ConfigMaps cached, Secrets watched as metadata only
// (WatchesMetadata), and each Secret read with a GET through the API
// reader, as controller-runtime's documentation advises for objects
// not worth caching.
func runCRMeta(ctx context.Context, kubeconfig string, rec *recorder, ready chan<- framework) error {
	crlog.SetLogger(logr.Discard())
	n := new(atomic.Int64)
	cfg, err := peerConfig(kubeconfig, n)
	if err != nil {
		return err
	}
	skip := true
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Logger:                 logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache: crcache.Options{ByObject: map[crclient.Object]crcache.ByObject{
			&corev1.ConfigMap{}: {Label: labels.SelectorFromSet(labels.Set{label: "1"})},
		}},
		Controller: crconfig.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	api, cached := mgr.GetAPIReader(), mgr.GetClient()
	err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("refbench").
		WatchesMetadata(&corev1.Secret{}, handler.EnqueueRequestsFromMapFunc(func(_ context.Context, s crclient.Object) []reconcile.Request {
			if s.GetName() != namedIn(s.GetNamespace()) {
				return nil
			}
			return []reconcile.Request{{NamespacedName: types.NamespacedName{Namespace: s.GetNamespace(), Name: "ref"}}}
		})).
		Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := cached.Get(ctx, req.NamespacedName, &cm); err != nil {
				return reconcile.Result{}, crclient.IgnoreNotFound(err)
			}
			var s corev1.Secret
			if err := api.Get(ctx, types.NamespacedName{Namespace: cm.Namespace, Name: cm.Data["secret"]}, &s); err != nil {
				return reconcile.Result{}, err
			}
			rec.observe(req.Namespace+"/"+req.Name, s.Annotations[stampKey])
			return reconcile.Result{}, nil
		}))
	if err != nil {
		return err
	}
	ready <- framework{requests: n.Load}
	return mgr.Start(ctx)
}
