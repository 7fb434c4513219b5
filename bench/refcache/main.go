// Command refcache measures a controller that reads the few Secrets its
// objects name, among many large Secrets, three ways:
//
//   - loom: Loom's referenced-only cache (every Secret's metadata, the
//     full object only for the Secrets read);
//   - client-go: a client-go informer that holds every Secret;
//   - cr-meta: controller-runtime watching Secrets' metadata only
//     (WatchesMetadata) and GETting each Secret it reads.
//
// Each runs the same controller: one ConfigMap per namespace (label
// refbench=1) names one Secret of its namespace; a reconcile reads that
// Secret; a change to a named Secret reconciles its ConfigMap. Measured,
// in one process per run: the time to sync and read every named Secret,
// heap after that (two GCs), API requests per reconcile in steady state
// (every ConfigMap touched, no Secret changed), and change → reconcile
// latency (a named Secret is patched with the time it was sent; the
// reconcile that reads that version records the delay).
//
// compare.sh starts the control plane with -env and runs the three in
// alternation; -summarize prints medians, ranges and ratios.
package main

import (
	"context"
	"flag"
	"fmt"
	"log"
	"os"
	"runtime"
	"runtime/pprof"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"time"
)

const (
	stampKey = "bench.loom.dev/sent"  // annotation: Unix nanoseconds the change was sent
	touchKey = "bench.loom.dev/touch" // annotation on ConfigMaps: steady-state touches
	label    = "refbench"
)

// flags is the command's own flag set: controller-runtime registers
// -kubeconfig on flag.CommandLine.
var flags = flag.NewFlagSet("refcache", flag.ExitOnError)

var (
	namespaces = flags.Int("namespaces", 100, "namespaces, each with one ConfigMap naming one Secret")
	secrets    = flags.Int("secrets", 10000, "Secrets in all, spread evenly over the namespaces")
	size       = flags.Int("size", 50*1024, "bytes of data per Secret")
	passes     = flags.Int("passes", 2, "latency passes: each changes every named Secret once")
	memprofile = flags.String("memprofile", "", "write a heap profile here when the heap is measured")
)

func nsName(i int) string { return fmt.Sprintf("refbench-%03d", i) }

func secretName(j int) string { return fmt.Sprintf("s-%04d", j) }

// named returns the Secret the ConfigMap of namespace i names.
func named(i int) string { return secretName((i * 37) % (*secrets / *namespaces)) }

// namedIn returns the Secret named in namespace ns, or "".
func namedIn(ns string) string {
	var i int
	if _, err := fmt.Sscanf(ns, "refbench-%d", &i); err != nil {
		return ""
	}
	return named(i)
}

// recorder is the reconciler's state, the same for every implementation.
type recorder struct {
	reconciles atomic.Int64
	mu         sync.Mutex
	seen       map[string]string // ConfigMap key → stamp of the Secret last read
	lat        []time.Duration
	recording  bool
}

func newRecorder() *recorder { return &recorder{seen: map[string]string{}} }

// observe is called by a reconcile of the ConfigMap key that read a
// Secret carrying stamp ("" before any change).
func (r *recorder) observe(key, stamp string) {
	r.reconciles.Add(1)
	now := time.Now()
	r.mu.Lock()
	defer r.mu.Unlock()
	if old, ok := r.seen[key]; ok && old == stamp {
		return
	}
	r.seen[key] = stamp
	if r.recording && stamp != "" {
		if ns, err := strconv.ParseInt(stamp, 10, 64); err == nil {
			r.lat = append(r.lat, now.Sub(time.Unix(0, ns)))
		}
	}
}

func (r *recorder) keys() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.seen)
}

func (r *recorder) has(key, stamp string) bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.seen[key] == stamp
}

// framework is what runMode needs of an implementation.
type framework struct {
	// requests counts the API requests the framework has sent.
	requests func() int64
}

func main() {
	env := flags.Bool("env", false, "start a control plane with the Secrets and ConfigMaps, print kubeconfig=PATH, keep it until standard input closes")
	kubeconfig := flags.String("kubeconfig", "", "measure against this cluster (made by -env)")
	impl := flags.String("impl", "loom", "loom, loom-strip (managed fields stripped), loom-meta-get (metadata watch and a GET per read, as cr-meta), client-go or cr-meta")
	summarize := flags.String("summarize", "", "print medians, ranges and ratios of the raw results in this file")
	_ = flags.Parse(os.Args[1:])
	var err error
	switch {
	case *summarize != "":
		err = summary(*summarize, os.Stdout)
	case *env:
		err = envMode()
	default:
		var line string
		if line, err = runMode(*impl, *kubeconfig); err == nil {
			fmt.Println(line)
		}
	}
	if err != nil {
		log.Fatal(err)
	}
}

// runMode measures impl against the cluster of kubeconfig and returns the
// result line.
func runMode(impl, kubeconfig string) (string, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Minute)
	defer cancel()
	drv, err := newDriver(kubeconfig)
	if err != nil {
		return "", err
	}
	rec := newRecorder()
	ready := make(chan framework, 1)
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	done := make(chan error, 1)
	start := time.Now()
	go func() {
		var err error
		switch impl {
		case "loom", "loom-strip", "loom-meta-get":
			err = runLoom(runCtx, kubeconfig, impl == "loom-strip", impl == "loom-meta-get", rec, ready)
		case "client-go":
			err = runClientGo(runCtx, kubeconfig, rec, ready)
		case "cr-meta":
			err = runCRMeta(runCtx, kubeconfig, rec, ready)
		default:
			err = fmt.Errorf("unknown -impl %q", impl)
		}
		done <- err
	}()
	var fw framework
	select {
	case fw = <-ready:
	case err := <-done:
		return "", err
	}
	wait := func(what string, cond func() bool) error {
		deadline := time.Now().Add(10 * time.Minute)
		for !cond() {
			if time.Now().After(deadline) {
				return fmt.Errorf("%s: waited 10 minutes for %s", impl, what)
			}
			time.Sleep(time.Millisecond)
		}
		return nil
	}
	// Synced: every ConfigMap reconciled with its Secret read.
	if err := wait("every named Secret read", func() bool { return rec.keys() == *namespaces }); err != nil {
		return "", err
	}
	syncTime := time.Since(start)
	quiet(rec, 500*time.Millisecond)

	// Steady state: every ConfigMap touched, no Secret changed.
	req0, n0 := fw.requests(), rec.reconciles.Load()
	if err := drv.touchConfigMaps(ctx); err != nil {
		return "", err
	}
	if err := wait("the touched ConfigMaps' reconciles", func() bool { return rec.reconciles.Load()-n0 >= int64(*namespaces) }); err != nil {
		return "", err
	}
	quiet(rec, 500*time.Millisecond)
	reqs, recs := fw.requests()-req0, rec.reconciles.Load()-n0

	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	heap := ms.HeapAlloc
	if *memprofile != "" {
		f, err := os.Create(*memprofile)
		if err != nil {
			return "", err
		}
		err = pprof.Lookup("heap").WriteTo(f, 0)
		if cerr := f.Close(); err == nil {
			err = cerr
		}
		if err != nil {
			return "", err
		}
	}

	// Change → reconcile: each named Secret patched in turn, the next once
	// the reconcile has read the change (or after 5 s, counted as missed).
	rec.mu.Lock()
	rec.recording = true
	rec.mu.Unlock()
	missed := 0
	for range *passes {
		for i := range *namespaces {
			stamp, err := drv.changeSecret(ctx, i)
			if err != nil {
				return "", err
			}
			deadline := time.Now().Add(5 * time.Second)
			for !rec.has(nsName(i)+"/ref", stamp) {
				if time.Now().After(deadline) {
					missed++
					break
				}
				time.Sleep(100 * time.Microsecond)
			}
		}
	}
	rec.mu.Lock()
	lat := slices.Clone(rec.lat)
	rec.mu.Unlock()
	slices.Sort(lat)
	stop()
	if err := <-done; err != nil && runCtx.Err() == nil {
		return "", err
	}
	return fmt.Sprintf("impl=%s secrets=%d size=%d namespaces=%d sync_ms=%.0f heap_MB=%.2f reqs_per_reconcile=%.3f p50_ms=%.2f p99_ms=%.2f max_ms=%.2f changes=%d missed=%d",
		impl, *secrets, *size, *namespaces, ms64(syncTime), float64(heap)/1e6, float64(reqs)/float64(max(recs, 1)),
		ms64(pct(lat, 0.50)), ms64(pct(lat, 0.99)), ms64(pct(lat, 1)), len(lat), missed), nil
}

// quiet waits until no reconcile has run for d (at most a minute).
func quiet(rec *recorder, d time.Duration) {
	limit := time.Now().Add(time.Minute)
	last, since := rec.reconciles.Load(), time.Now()
	for time.Since(since) < d && time.Now().Before(limit) {
		time.Sleep(10 * time.Millisecond)
		if n := rec.reconciles.Load(); n != last {
			last, since = n, time.Now()
		}
	}
}

func pct(sorted []time.Duration, p float64) time.Duration {
	if len(sorted) == 0 {
		return 0
	}
	i := int(p*float64(len(sorted))+0.5) - 1
	return sorted[min(max(i, 0), len(sorted)-1)]
}

func ms64(d time.Duration) float64 { return float64(d) / 1e6 }
