// Command priority measures how soon a controller reconciles a change
// while it drains the backlog of its initial list: a controller starts
// over N existing ConfigMaps, with one worker and a reconciler that works
// -work per object, and while the backlog drains a client changes one
// random object every -every. Each change's latency runs from the time it
// was sent (a stamp in the object) to the start of the reconcile that
// reads it.
//
// Implementations: loom (its default: initial-list keys at low priority),
// loom-fifo (controller.Options.NoPriority) and controller-runtime
// (v0.24, whose priority queue is on by default).
//
// Modes:
//
//	-mode env  start a control plane (testenv), create -n ConfigMaps in
//	           namespace bench, print "kubeconfig=PATH", and run until
//	           stdin closes.
//	-mode run  -impl I -kubeconfig PATH: run the controller from scratch
//	           until every object was reconciled once and every change
//	           seen, and print one line of key=value results.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/go-logr/logr"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crcache "sigs.k8s.io/controller-runtime/pkg/cache"
	crconfig "sigs.k8s.io/controller-runtime/pkg/config"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

const (
	namespace = "bench"
	stampKey  = "bench.loom.dev/sent"
)

func main() {
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	mode := fs.String("mode", "run", "env or run")
	impl := fs.String("impl", "loom", "loom, loom-fifo or controller-runtime")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig path")
	n := fs.Int("n", 10000, "objects")
	work := fs.Duration("work", time.Millisecond, "time each reconcile works")
	every := fs.Duration("every", 100*time.Millisecond, "one change this often while the backlog drains")
	fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch *mode {
	case "env":
		err = envMode(ctx, *n)
	case "run":
		err = runMode(ctx, *impl, *kubeconfig, *n, *work, *every)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func cmName(i int) string { return fmt.Sprintf("cm-%05d", i) }

func envMode(ctx context.Context, n int) error {
	env, cs, err := benchenv.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	err = benchenv.CreateConfigMaps(ctx, cs, namespace, n, func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: cmName(i), Namespace: namespace}, Data: map[string]string{"k": "v"}}
	})
	if err != nil {
		return err
	}
	fmt.Printf("kubeconfig=%s\n", env.KubeconfigPath)
	benchenv.UntilStdinCloses(ctx)
	return nil
}

// recorder follows one run: which keys were reconciled, and each change's
// latency.
type recorder struct {
	n     int
	start time.Time

	mu       sync.Mutex
	seen     map[string]int64 // key → newest stamp reconciled (0: none)
	sent     map[string]int64 // key → newest stamp sent and not yet reconciled
	lat      []time.Duration
	drained  time.Duration // from start to the reconcile of the last key never reconciled
	first    chan struct{}
	firstOne sync.Once
	done     chan struct{} // closed once drained and every change seen
	writing  atomic.Bool
}

func newRecorder(n int) *recorder {
	return &recorder{n: n, seen: map[string]int64{}, sent: map[string]int64{}, first: make(chan struct{}), done: make(chan struct{})}
}

// observe is called at the start of each reconcile with the object's
// stamp (0 when it has none).
func (r *recorder) observe(key string, stamp int64) {
	now := time.Now()
	r.firstOne.Do(func() { close(r.first) })
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.seen[key]; !ok {
		r.seen[key] = 0
		if len(r.seen) == r.n {
			r.drained = now.Sub(r.start)
			r.writing.Store(false)
		}
	}
	// A stamp from before this run is an earlier run's change: part of
	// the object as listed, not a change to wait for.
	if stamp != 0 && stamp > r.seen[key] && stamp > r.start.UnixNano() {
		r.seen[key] = stamp
		if want, ok := r.sent[key]; ok && stamp >= want {
			delete(r.sent, key)
		}
		r.lat = append(r.lat, now.Sub(time.Unix(0, stamp)))
	}
	if r.drained > 0 && len(r.sent) == 0 {
		select {
		case <-r.done:
		default:
			close(r.done)
		}
	}
}

// write changes a random object every interval while r.writing holds.
func (r *recorder) write(ctx context.Context, cs kubernetes.Interface, every time.Duration) (changes int, err error) {
	t := time.NewTicker(every)
	defer t.Stop()
	for r.writing.Load() {
		select {
		case <-ctx.Done():
			return changes, ctx.Err()
		case <-t.C:
		}
		key := cmName(rand.IntN(r.n))
		stamp := time.Now().UnixNano()
		r.mu.Lock()
		r.sent[namespace+"/"+key] = stamp
		r.mu.Unlock()
		patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, stampKey, stamp)
		if _, err := cs.CoreV1().ConfigMaps(namespace).Patch(ctx, key, types.MergePatchType, []byte(patch), metav1.PatchOptions{}); err != nil {
			return changes, err
		}
		changes++
	}
	return changes, nil
}

func stampOf(ann map[string]string) int64 {
	s, _ := strconv.ParseInt(ann[stampKey], 10, 64)
	return s
}

func runMode(ctx context.Context, impl, kubeconfig string, n int, work, every time.Duration) error {
	cs, err := benchenv.Clientset(kubeconfig)
	if err != nil {
		return err
	}
	rec := newRecorder(n)
	rec.writing.Store(true)
	rctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, 1)
	rec.start = time.Now()
	go func() { errc <- runFramework(rctx, impl, kubeconfig, work, rec) }()
	select {
	case <-rec.first: // the backlog begins to drain
	case err := <-errc:
		return err
	}
	changes, werr := rec.write(rctx, cs, every)
	if werr != nil {
		return werr
	}
	select {
	case <-rec.done:
	case <-time.After(2 * time.Minute):
		return fmt.Errorf("%s: changes still unseen two minutes after the backlog drained", impl)
	case err := <-errc:
		return err
	}
	cancel()
	<-errc
	rec.mu.Lock()
	defer rec.mu.Unlock()
	lat := slices.Clone(rec.lat)
	slices.Sort(lat)
	q := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		return float64(lat[min(len(lat)-1, int(p*float64(len(lat))))].Microseconds()) / 1000
	}
	fmt.Printf("impl=%s n=%d work_ms=%.1f changes=%d drain_s=%.3f p50_ms=%.1f p99_ms=%.1f max_ms=%.1f\n",
		impl, n, float64(work.Microseconds())/1000, changes, rec.drained.Seconds(), q(0.50), q(0.99), q(1))
	return nil
}

// runFramework runs one worker and the working reconciler until ctx ends.
func runFramework(ctx context.Context, impl, kubeconfig string, work time.Duration, rec *recorder) error {
	reconcileOne := func(key string, stamp int64) {
		rec.observe(key, stamp)
		time.Sleep(work)
	}
	switch impl {
	case "loom", "loom-fifo":
		cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
		if err != nil {
			return err
		}
		mgr, err := manager.New(manager.Options{Config: &cfg, Namespace: namespace, ShutdownTimeout: 5 * time.Second})
		if err != nil {
			return err
		}
		controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
			reconcileOne(cm.Namespace+"/"+cm.Name, stampOf(cm.Annotations))
			return controller.Result{}, nil
		}, controller.Options{Name: "bench", Workers: 1, NoPriority: impl == "loom-fifo"})
		return mgr.Start(ctx)
	case "controller-runtime":
		crlog.SetLogger(logr.Discard())
		cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
		if err != nil {
			return err
		}
		cfg.QPS = -1
		cfg.ContentType = runtime.ContentTypeProtobuf
		skip := true
		mgr, err := ctrl.NewManager(cfg, ctrl.Options{
			Scheme:                 clientgoscheme.Scheme,
			Logger:                 logr.Discard(),
			Metrics:                metricsserver.Options{BindAddress: "0"},
			HealthProbeBindAddress: "0",
			Cache:                  crcache.Options{DefaultNamespaces: map[string]crcache.Config{namespace: {}}},
			Controller:             crconfig.Controller{SkipNameValidation: &skip, MaxConcurrentReconciles: 1},
		})
		if err != nil {
			return err
		}
		reader := mgr.GetCache()
		err = ctrl.NewControllerManagedBy(mgr).For(&corev1.ConfigMap{}).Named("bench").Complete(reconcile.Func(func(ctx context.Context, req reconcile.Request) (reconcile.Result, error) {
			var cm corev1.ConfigMap
			if err := reader.Get(ctx, req.NamespacedName, &cm); err != nil {
				return reconcile.Result{}, client404(err)
			}
			reconcileOne(req.Namespace+"/"+req.Name, stampOf(cm.Annotations))
			return reconcile.Result{}, nil
		}))
		if err != nil {
			return err
		}
		return mgr.Start(ctx)
	}
	return fmt.Errorf("unknown -impl %q", impl)
}

func client404(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
