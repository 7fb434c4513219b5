package main

import (
	"context"
	"fmt"
	"net/http"
	"os"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/go-logr/logr"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	"sigs.k8s.io/controller-runtime/pkg/controller/controllerutil"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
)

// stampKey is the annotation the writer sets to the time it sent an update
// (Unix nanoseconds).
const stampKey = "bench.loom.dev/sent"

// recorder is the trivial reconciler's state, the same for both
// frameworks: it counts reconciles, remembers which keys it has seen, and
// records event → reconcile-start latency once per new stamp of a key.
type recorder struct {
	reconciles atomic.Int64
	mu         sync.Mutex
	last       map[string]int64 // key → last stamp seen
	lat        []time.Duration
	recording  bool

	// With arrival on, an informer transform stamps when the reflector
	// received each version (key → stamp, time), and observe also records
	// reflector-receipt → reconcile-start latency (framework only).
	arrival  bool
	arrived  map[string]arrivalMark
	framelat []time.Duration

	// With owned on, each reconcile also brings a Secret owned by the
	// ConfigMap up to date with CreateOrUpdate (ownedSecret), reading it
	// through the framework's cache, and the controller watches the
	// Secrets it owns.
	owned bool
}

// ownedName is the name of the Secret a ConfigMap owns.
func ownedName(cm string) string { return cm + "-owned" }

// ownedData is what the owned Secret of a ConfigMap with annotations ann
// holds: the ConfigMap's stamp, so that every churned version needs one
// update of the Secret.
func ownedData(ann map[string]string) map[string][]byte {
	return map[string][]byte{"stamp": []byte(ann[stampKey])}
}

type arrivalMark struct {
	stamp int64
	at    time.Time
}

// arrive is the transform's body: it runs on the reflector's goroutine as
// each decoded object is handed to the cache.
func (r *recorder) arrive(key string, ann map[string]string) {
	now := time.Now()
	stamp, err := strconv.ParseInt(ann[stampKey], 10, 64)
	if err != nil {
		return
	}
	r.mu.Lock()
	r.arrived[key] = arrivalMark{stamp, now}
	r.mu.Unlock()
}

func (r *recorder) frameworkLatencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := slices.Clone(r.framelat)
	slices.Sort(l)
	return l
}

func newRecorder() *recorder {
	return &recorder{last: map[string]int64{}, arrived: map[string]arrivalMark{}}
}

// observe is called at reconcile start with the object read from the cache
// (ok false: not in the cache).
func (r *recorder) observe(key string, ann map[string]string, ok bool) {
	now := time.Now()
	r.reconciles.Add(1)
	var stamp int64
	if ok {
		if s, has := ann[stampKey]; has {
			stamp, _ = strconv.ParseInt(s, 10, 64)
		}
	}
	r.mu.Lock()
	prev, seen := r.last[key]
	if !seen || prev != stamp {
		r.last[key] = stamp
		if seen && stamp != 0 && r.recording {
			r.lat = append(r.lat, now.Sub(time.Unix(0, stamp)))
			if a, ok := r.arrived[key]; ok && a.stamp == stamp {
				r.framelat = append(r.framelat, now.Sub(a.at))
			}
		}
	}
	r.mu.Unlock()
}

func (r *recorder) keys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.last)
}

func (r *recorder) setRecording(on bool) {
	r.mu.Lock()
	r.recording = on
	r.mu.Unlock()
}

func (r *recorder) latencies() []time.Duration {
	r.mu.Lock()
	defer r.mu.Unlock()
	l := slices.Clone(r.lat)
	slices.Sort(l)
	return l
}

// framework is one controller runtime running the trivial reconciler.
type framework interface {
	// requests returns the API requests sent so far (every attempt,
	// watches included).
	requests() int64
}

// runLoom runs the reconciler behind Loom until ctx ends. ready is called
// once the framework is built.
func runLoom(ctx context.Context, kubeconfig, ns string, topts tracing.Options, rec *recorder, ready func(framework)) error {
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return err
	}
	// Loom's REST client has no client-side rate limit by default.
	opts := manager.Options{Config: new(cfg), Namespace: ns, ShutdownTimeout: 5 * time.Second, Tracing: topts}
	if rec.arrival {
		opts.Transform = func(obj client.Object) (client.Object, error) {
			rec.arrive(obj.GetNamespace()+"/"+obj.GetName(), obj.GetAnnotations())
			return obj, nil
		}
	}
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	// Loom hands the reconciler the cached object itself (shared, not
	// copied), as controller-runtime does with UnsafeDisableDeepCopy.
	if !rec.owned {
		controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
			rec.observe(cm.Namespace+"/"+cm.Name, cm.Annotations, true)
			return controller.Result{}, nil
		}, controller.Options{Name: "bench"})
		ready(loomFramework{mgr})
		return mgr.Start(ctx)
	}
	secrets := manager.CachedClient[corev1.Secret](mgr)
	controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		rec.observe(cm.Namespace+"/"+cm.Name, cm.Annotations, true)
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: ownedName(cm.Name)}}
		_, err := controller.CreateOrUpdate(ctx, secrets, sec, func(sec *corev1.Secret) error {
			sec.Data = ownedData(cm.Annotations)
			return controller.SetControllerReference(cm, sec)
		})
		return controller.Result{}, err
	}, controller.Options{Name: "bench"}).Owns(secrets)
	ready(loomFramework{mgr})
	return mgr.Start(ctx)
}

type loomFramework struct{ mgr *manager.Manager }

// requests sums loom_rest_requests_total from the manager's registry.
func (l loomFramework) requests() int64 { return benchenv.LoomRequests(l.mgr.MetricsHandler()) }

// countingRT counts the requests controller-runtime sends.
type countingRT struct {
	rt http.RoundTripper
	n  *atomic.Int64
}

func (c countingRT) RoundTrip(r *http.Request) (*http.Response, error) {
	c.n.Add(1)
	resp, err := c.rt.RoundTrip(r)
	if os.Getenv("LOOM_BENCH_DEBUG") != "" && err == nil {
		fmt.Fprintf(os.Stderr, "controller-runtime request: %s %s accept=%q response=%q\n", r.Method, r.URL.Path, r.Header.Get("Accept"), resp.Header.Get("Content-Type"))
	}
	return resp, err
}

type crFramework struct{ n *atomic.Int64 }

func (c crFramework) requests() int64 { return c.n.Load() }

// runCR runs the reconciler behind controller-runtime (defaults, except: no
// client-side rate limit, protobuf like Loom, metrics and probes off, one
// namespace cached). With nocopy, its cache hands out the cached objects
// themselves (UnsafeDisableDeepCopy), as Loom's does.
func runCR(ctx context.Context, kubeconfig, ns string, nocopy bool, rec *recorder, ready func(framework)) error {
	crlog.SetLogger(logr.Discard())
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return err
	}
	cfg.QPS = -1 // client-side rate limiter off, as in Loom
	cfg.ContentType = runtime.ContentTypeProtobuf
	cfg.AcceptContentTypes = runtime.ContentTypeProtobuf + "," + runtime.ContentTypeJSON
	n := new(atomic.Int64)
	cfg.Wrap(func(rt http.RoundTripper) http.RoundTripper { return countingRT{rt, n} })
	skip := true
	copts := crcache.Options{DefaultNamespaces: map[string]crcache.Config{ns: {}}}
	if nocopy {
		copts.DefaultUnsafeDisableDeepCopy = &nocopy
	}
	if rec.arrival {
		copts.DefaultTransform = func(obj any) (any, error) {
			if cm, ok := obj.(*corev1.ConfigMap); ok {
				rec.arrive(cm.Namespace+"/"+cm.Name, cm.Annotations)
			}
			return obj, nil
		}
	}
	mgr, err := ctrl.NewManager(cfg, ctrl.Options{
		Scheme:                 clientgoscheme.Scheme,
		Logger:                 logr.Discard(),
		Metrics:                metricsserver.Options{BindAddress: "0"},
		HealthProbeBindAddress: "0",
		Cache:                  copts,
		Controller:             crconfig.Controller{SkipNameValidation: &skip},
	})
	if err != nil {
		return err
	}
	reader := mgr.GetCache()
	b := ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("bench")
	if rec.owned {
		b = b.Owns(&corev1.Secret{})
	}
	c := mgr.GetClient() // reads from the cache, writes to the API server
	err = b.Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
		var cm corev1.ConfigMap
		err := reader.Get(ctx, req.NamespacedName, &cm)
		if err != nil && crclient.IgnoreNotFound(err) != nil {
			return reconcile.Result{}, err
		}
		rec.observe(req.Namespace+"/"+req.Name, cm.Annotations, err == nil)
		if err != nil || !rec.owned {
			return reconcile.Result{}, nil
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: ownedName(cm.Name)}}
		_, err = controllerutil.CreateOrUpdate(ctx, c, sec, func() error {
			sec.Data = ownedData(cm.Annotations)
			// With nocopy, the Secret read from the cache shares its
			// owner references with the cached one, which
			// SetControllerReference would change in place under the
			// informer's readers: a user of UnsafeDisableDeepCopy must
			// copy what it changes.
			sec.OwnerReferences = slices.Clone(sec.OwnerReferences)
			return controllerutil.SetControllerReference(&cm, sec, mgr.GetScheme())
		})
		return reconcile.Result{}, err
	}))
	if err != nil {
		return err
	}
	ready(crFramework{n})
	return mgr.Start(ctx)
}

func run(ctx context.Context, impl, kubeconfig, ns string, rec *recorder, ready func(framework)) error {
	switch impl {
	case "loom":
		return runLoom(ctx, kubeconfig, ns, tracing.Options{}, rec, ready)
	case "loom-trace", "loom-trace-events":
		// Tracing on, every span sampled and sent over OTLP/gRPC to the
		// collector the env process runs (its CPU is not this process's);
		// -events also gives every watch event a span of its own.
		if otlpEndpoint == "" {
			return fmt.Errorf("-impl %s needs -otlp", impl)
		}
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(otlpEndpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(exp))
		defer tp.Shutdown(context.Background())
		return runLoom(ctx, kubeconfig, ns, tracing.Options{Provider: tp, EventSpans: impl == "loom-trace-events"}, rec, ready)
	case "loom-trace-10pct":
		// The same as loom-trace with one trace in ten sampled.
		if otlpEndpoint == "" {
			return fmt.Errorf("-impl %s needs -otlp", impl)
		}
		exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(otlpEndpoint), otlptracegrpc.WithInsecure())
		if err != nil {
			return err
		}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.ParentBased(sdktrace.TraceIDRatioBased(0.1))), sdktrace.WithBatcher(exp))
		defer tp.Shutdown(context.Background())
		return runLoom(ctx, kubeconfig, ns, tracing.Options{Provider: tp}, rec, ready)
	case "loom-trace-noexport":
		// Spans made and ended, but sent nowhere: the cost of making them.
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
		defer tp.Shutdown(context.Background())
		return runLoom(ctx, kubeconfig, ns, tracing.Options{Provider: tp}, rec, ready)
	case "controller-runtime":
		return runCR(ctx, kubeconfig, ns, false, rec, ready)
	case "controller-runtime-nocopy":
		return runCR(ctx, kubeconfig, ns, true, rec, ready)
	case "watch-floor":
		return runWatchFloor(ctx, kubeconfig, ns, rec, ready)
	}
	return fmt.Errorf("unknown -impl %q", impl)
}

// runWatchFloor is not a framework: it lists the ConfigMaps and watches
// them with Loom's client, calling the recorder for each object and event
// on the watch's own goroutine, with no cache, queue or handler. What it
// costs per event is what any controller pays to receive a change, a
// floor under the frameworks' reconciles per CPU-second.
func runWatchFloor(ctx context.Context, kubeconfig, ns string, rec *recorder, ready func(framework)) error {
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return err
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		return err
	}
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		return err
	}
	cms = cms.Namespace(ns)
	n := new(atomic.Int64)
	ready(crFramework{n})
	list, err := cms.ListAll(ctx, metav1.ListOptions{})
	n.Add(1)
	if err != nil {
		return err
	}
	for _, cm := range list.Items {
		rec.observe(cm.Namespace+"/"+cm.Name, cm.Annotations, true)
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true})
	n.Add(1)
	if err != nil {
		return err
	}
	defer w.Stop()
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return nil
			}
			return err
		}
		if ev.Type == watch.Modified || ev.Type == watch.Added {
			rec.observe(ev.Object.Namespace+"/"+ev.Object.Name, ev.Object.Annotations, true)
		}
	}
}
