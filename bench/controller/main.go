// Command controller measures the same trivial reconciler behind Loom and
// behind controller-runtime on a real kube-apiserver with N ConfigMaps
// under churn (issue 7): event → reconcile-start latency, reconciles per
// CPU-second of the framework's process, and API requests.
//
// Modes:
//
//	-mode env    start a control plane (testenv) and an OTLP trace
//	             collector, create -n ConfigMaps in namespace bench, print
//	             "kubeconfig=PATH otlp=HOST:PORT", run until stdin closes.
//	-mode run    -impl loom|controller-runtime -kubeconfig PATH: start the
//	             framework, wait until every object has been reconciled once
//	             (cache synced, initial reconciles done), then start a writer
//	             child process (-mode write) that patches random objects at
//	             -rate per second for -duration, stamping each with its send
//	             time; after it ends, wait until reconciles stop (at most 5 s).
//	             Prints one line of key=value results for that window.
//	-mode write  the writer (its own process, so its CPU is not counted).
//
// latency = reconcile start − the send-time stamp of the version read from
// the cache, counted once per new stamp of a key: it includes the API
// server's write and watch delivery, the same for both frameworks.
// cpu_s is getrusage(RUSAGE_SELF) user+system over the window.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"math/rand/v2"
	"os"
	"os/exec"
	"os/signal"
	"runtime/pprof"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/client-go/kubernetes"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/testenv"
)

const namespace = "bench"

var (
	cpuProfile   string
	otlpEndpoint string
	arrival      bool
	owned        bool
)

func main() {
	// controller-runtime registers -kubeconfig on flag.CommandLine: use our own set.
	fs := flag.NewFlagSet(os.Args[0], flag.ExitOnError)
	mode := fs.String("mode", "run", "env, run or write")
	impl := fs.String("impl", "loom", "loom, loom-trace (tracing on, spans sent to -otlp), loom-trace-events (the same with tracing.Options.EventSpans), loom-trace-10pct (one trace in ten sampled), loom-trace-noexport (spans made, sent nowhere), controller-runtime or controller-runtime-nocopy (its cache's UnsafeDisableDeepCopy on)")
	fs.StringVar(&otlpEndpoint, "otlp", "", "OTLP/gRPC collector for -impl loom-trace (run mode); env mode prints one")
	kubeconfig := fs.String("kubeconfig", "", "kubeconfig path")
	n := fs.Int("n", 10000, "objects")
	rate := fs.Int("rate", 300, "updates per second")
	duration := fs.Duration("duration", 20*time.Second, "churn duration")
	fs.BoolVar(&arrival, "arrival", false, "also measure reflector receipt → reconcile start (adds an informer transform; run mode)")
	fs.BoolVar(&owned, "owned", false, "each reconcile also brings an owned Secret up to date with CreateOrUpdate, and the controller watches the Secrets it owns (run mode)")
	fs.StringVar(&cpuProfile, "cpuprofile", "", "write a CPU profile of the churn window (run mode)")
	fs.Parse(os.Args[1:])
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	var err error
	switch *mode {
	case "env":
		err = envMode(ctx, *n)
	case "write":
		var cs *kubernetes.Clientset
		if cs, err = benchenv.Clientset(*kubeconfig); err == nil {
			var w, e int64
			floor := startFloorWatch(ctx, cs)
			w, e, err = churn(ctx, cs, *n, *rate, *duration)
			time.Sleep(500 * time.Millisecond)
			p50, p99 := floor()
			fmt.Printf("writes=%d write_errors=%d watch_p50_ms=%.2f watch_p99_ms=%.2f\n", w, e, p50, p99)
		}
	case "run":
		err = runMode(ctx, *impl, *kubeconfig, *n, *rate, *duration)
	default:
		err = fmt.Errorf("unknown -mode %q", *mode)
	}
	if err != nil {
		log.Fatal(err)
	}
}

func envMode(ctx context.Context, n int) error {
	env, cs, err := benchenv.Start(ctx)
	if err != nil {
		return err
	}
	defer env.Stop()
	// A trace collector for -impl loom-trace, in this process so that
	// receiving spans costs the measured process nothing.
	traces, err := testenv.NewTraceCollector()
	if err != nil {
		return err
	}
	defer traces.Close()
	start := time.Now()
	if err := populate(ctx, cs, n); err != nil {
		return err
	}
	fmt.Fprintf(os.Stderr, "created %d configmaps in %v\n", n, time.Since(start).Round(time.Millisecond))
	fmt.Printf("kubeconfig=%s otlp=%s\n", env.KubeconfigPath, traces.Endpoint())
	benchenv.UntilStdinCloses(ctx)
	return nil
}

func cmName(i int) string { return fmt.Sprintf("cm-%05d", i) }

// populate creates namespace bench and n ConfigMaps in it.
func populate(ctx context.Context, cs kubernetes.Interface, n int) error {
	return benchenv.CreateConfigMaps(ctx, cs, namespace, n, func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: cmName(i), Namespace: namespace, Labels: map[string]string{"app": "bench"}},
			Data:       map[string]string{"key": strings.Repeat("x", 64)},
		}
	})
}

// churn patches random objects at rate per second for d, each patch
// stamping the time it is sent; it returns the patches sent and failed.
func churn(ctx context.Context, cs kubernetes.Interface, n, rate int, d time.Duration) (writes, errs int64, err error) {
	var w, e atomic.Int64
	jobs := make(chan int, 1024)
	var wg sync.WaitGroup
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				patch := fmt.Sprintf(`{"metadata":{"annotations":{%q:"%d"}}}`, stampKey, time.Now().UnixNano())
				_, err := cs.CoreV1().ConfigMaps(namespace).Patch(ctx, cmName(i), types.MergePatchType, []byte(patch), metav1.PatchOptions{})
				w.Add(1)
				if err != nil {
					e.Add(1)
				}
			}
		})
	}
	interval := time.Second / time.Duration(rate)
	start := time.Now()
	for k := 0; ; k++ {
		next := start.Add(time.Duration(k) * interval)
		if next.Sub(start) >= d || ctx.Err() != nil {
			break
		}
		time.Sleep(time.Until(next))
		select {
		case jobs <- rand.IntN(n):
		default: // writers saturated: skip rather than burst later
		}
	}
	close(jobs)
	wg.Wait()
	return w.Load(), e.Load(), ctx.Err()
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func runMode(ctx context.Context, impl, kubeconfig string, n, rate int, d time.Duration) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	rec := newRecorder()
	rec.arrival = arrival
	rec.owned = owned
	fwc := make(chan framework, 1)
	errc := make(chan error, 1)
	t0 := time.Now()
	go func() { errc <- run(ctx, impl, kubeconfig, namespace, rec, func(f framework) { fwc <- f }) }()
	var fw framework
	select {
	case fw = <-fwc:
	case err := <-errc:
		return err
	}
	// Wait for the initial reconcile of every object.
	for rec.keys() < n {
		select {
		case err := <-errc:
			return fmt.Errorf("framework stopped: %v", err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Since(t0) > 5*time.Minute {
			return fmt.Errorf("only %d of %d objects reconciled", rec.keys(), n)
		}
	}
	initial := time.Since(t0)
	startCPU := time.Duration(0)
	time.Sleep(time.Second) // let the initial burst settle
	if owned {
		// The owned Secrets' creation events reconcile their owners once
		// more: wait for that to end too.
		waitQuiet(rec, time.Second, 2*time.Minute)
	}
	reqs0 := fw.requests()
	rec0 := rec.reconciles.Load()
	rec.setRecording(true)
	if cpuProfile != "" {
		f, err := os.Create(cpuProfile)
		if err != nil {
			return err
		}
		defer f.Close()
		pprof.StartCPUProfile(f)
		defer pprof.StopCPUProfile()
	}
	startCPU = cpuTime()
	wstart := time.Now()

	self, err := os.Executable()
	if err != nil {
		return err
	}
	cmd := exec.CommandContext(ctx, self, "-mode", "write", "-kubeconfig", kubeconfig,
		"-n", strconv.Itoa(n), "-rate", strconv.Itoa(rate), "-duration", d.String())
	cmd.Stderr = os.Stderr
	wout, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("writer: %v", err)
	}
	// Drain: until no reconcile for 500 ms, at most 5 s.
	waitQuiet(rec, 500*time.Millisecond, 5*time.Second)
	cpu := cpuTime() - startCPU
	window := time.Since(wstart)
	reconciles := rec.reconciles.Load() - rec0
	reqs := fw.requests() - reqs0
	rec.setRecording(false)
	lat := rec.latencies()
	fl := rec.frameworkLatencies()
	flms := func(p float64) float64 {
		if len(fl) == 0 {
			return 0
		}
		return float64(fl[int(p*float64(len(fl)-1))].Microseconds()) / 1000
	}
	extra := ""
	if arrival {
		extra = fmt.Sprintf(" fw_samples=%d fw_p50_ms=%.3f fw_p99_ms=%.3f fw_max_ms=%.3f", len(fl), flms(0.5), flms(0.99), flms(1))
	}
	pct := func(p float64) float64 {
		if len(lat) == 0 {
			return 0
		}
		i := int(p * float64(len(lat)-1))
		return float64(lat[i].Microseconds()) / 1000
	}
	if owned {
		extra += fmt.Sprintf(" requests_per_reconcile=%.3f requests_per_version=%.3f initial_requests=%d",
			float64(reqs)/float64(max(reconciles, 1)), float64(reqs)/float64(max(len(lat), 1)), reqs0)
	}
	fmt.Printf("impl=%s owned=%t objects=%d rate=%d initial_s=%.2f window_s=%.2f %s reconciles=%d versions=%d cpu_s=%.3f reconciles_per_cpu_s=%.0f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f api_requests=%d api_requests_total=%d%s\n",
		impl, owned, n, rate, initial.Seconds(), window.Seconds(), strings.TrimSpace(string(wout)), reconciles, len(lat), cpu.Seconds(),
		float64(reconciles)/cpu.Seconds(), pct(0.5), pct(0.99), pct(1), reqs, fw.requests(), extra)
	cancel()
	select {
	case <-errc:
	case <-time.After(10 * time.Second):
	}
	return nil
}

// waitQuiet returns once no reconcile has started for quiet, or after at
// most limit.
func waitQuiet(rec *recorder, quiet, limit time.Duration) {
	last, since := rec.reconciles.Load(), time.Now()
	for deadline := time.Now().Add(limit); time.Now().Before(deadline); {
		time.Sleep(50 * time.Millisecond)
		if c := rec.reconciles.Load(); c != last {
			last, since = c, time.Now()
		} else if time.Since(since) > quiet {
			return
		}
	}
}

// startFloorWatch watches the namespace with a plain client-go watch in the
// writer's process and records send → watch-event-received latency: the
// API server's share of the end-to-end latency, which neither framework can
// remove. The returned func stops it and gives its p50 and p99 in ms.
func startFloorWatch(ctx context.Context, cs kubernetes.Interface) func() (p50, p99 float64) {
	list, err := cs.CoreV1().ConfigMaps(namespace).List(ctx, metav1.ListOptions{Limit: 1})
	if err != nil {
		return func() (float64, float64) { return 0, 0 }
	}
	w, err := cs.CoreV1().ConfigMaps(namespace).Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
	if err != nil {
		return func() (float64, float64) { return 0, 0 }
	}
	var mu sync.Mutex
	var lat []time.Duration
	done := make(chan struct{})
	go func() {
		defer close(done)
		for ev := range w.ResultChan() {
			now := time.Now()
			cm, ok := ev.Object.(*corev1.ConfigMap)
			if !ok {
				continue
			}
			if s, err := strconv.ParseInt(cm.Annotations[stampKey], 10, 64); err == nil {
				mu.Lock()
				lat = append(lat, now.Sub(time.Unix(0, s)))
				mu.Unlock()
			}
		}
	}()
	return func() (float64, float64) {
		w.Stop()
		<-done
		slices.Sort(lat)
		if len(lat) == 0 {
			return 0, 0
		}
		ms := func(p float64) float64 { return float64(lat[int(p*float64(len(lat)-1))].Microseconds()) / 1000 }
		return ms(0.5), ms(0.99)
	}
}
