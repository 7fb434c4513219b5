// Command informer measures the memory and sync time of a Pod informer,
// Loom's or client-go's, fed by a replay server from a recorded corpus.
// Each run measures one informer in its own process, so heaps never mix;
// compare.sh alternates Loom and client-go runs and prints medians and
// ratios.
//
//	go run . -record /tmp/corpus -pods 10000 -events 1000
//	go run . -corpus /tmp/corpus -impl loom [-strip] [-watchlist]
//	go run . -corpus /tmp/corpus -impl client-go [-strip] [-watchlist]
//
// What one run does, in order:
//
//  1. Memory-maps the corpus (off the Go heap) and starts the in-process
//     replay server (server.go) on a loopback port; builds the client.
//  2. runtime.GC() twice; base := HeapAlloc.
//  3. Starts the informer, with one no-op-counting handler, and a sampler
//     reading runtime/metrics every 1 ms (/memory/classes/heap/objects,
//     i.e. HeapAlloc, live plus not yet swept garbage).
//     sync = time from Start to HasSynced.
//  4. Waits until the handler has seen every Pod and every recorded watch
//     event; runtime.GC() twice; steady := HeapAlloc.
//     heap/pod = (steady - base) / pods.
//     peak-sync = max sample from Start to HasSynced - steady: the memory
//     the initial sync needs above the cache it leaves.
//  5. Forced relist: the server ends the held watch with a 410 ERROR
//     event and serves a second snapshot in which every Pod changed. The
//     sampler's max is reset; the relist is done when the handler has
//     seen every Pod's new version. peak-relist = max sample - steady.
//     With -relist-unchanged, the relist gets the first snapshot again:
//     the Pods that no watch event changed come back as they are cached.
//     No handler hears of them, so the relist is done when the client
//     watches again. runtime.GC() twice; heap/pod-relisted is heap/pod
//     computed again then.
//
// With -hold-events, the server withholds the recorded events until step
// 3 is over, and the run measures the allocations and CPU time from their
// release until the handler has seen them all (alloc-events, cpu-events).
//
// Output is one line of key=value pairs.
package main

import (
	"context"
	"flag"
	"fmt"
	"os"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync/atomic"
	"syscall"
	"time"

	clientrest "k8s.io/client-go/rest"

	"github.com/loom-k8s/loom/config"
)

func main() {
	var (
		recordDir  = flag.String("record", "", "write a corpus into this directory and exit")
		pods       = flag.Int("pods", 10000, "with -record: number of Pods")
		events     = flag.Int("events", 1000, "with -record: number of recorded watch events")
		tmpls      = flag.Int("templates", 50, "with -record: number of workloads the Pods are replicas of")
		corpusDir  = flag.String("corpus", "", "recorded corpus to replay")
		impl       = flag.String("impl", "loom", "loom or client-go")
		strip      = flag.Bool("strip", false, "strip managedFields (client-go: a Transform; Loom: DropManagedFields, or with -strip-transform a Transform)")
		stripTf    = flag.Bool("strip-transform", false, "Loom: with -strip, use Transform: cache.StripManagedFields rather than DropManagedFields")
		watchList  = flag.Bool("watchlist", false, "serve and use streaming lists (WatchList); else paginated lists")
		jsonWire   = flag.Bool("json", false, "use JSON instead of protobuf")
		memprofile = flag.String("memprofile", "", "write an inuse heap profile after sync to this file, and one after the relist to this file with .relisted added")
		relist     = flag.Bool("relist", true, "measure a forced relist")
		unchanged  = flag.Bool("relist-unchanged", false, "the relist serves the first snapshot again (list mode only)")
		share      = flag.Bool("share", false, "experiment: a Transform sharing identical parts between Pods (share.go)")
		noShare    = flag.Bool("noshare", false, "Loom: InformerOptions.Sharing = ShareOff (the cache as before sharing)")
		kind       = flag.String("kind", "pods", "with -record or -env: pods, or widgets (a custom resource, JSON only; with -env, small Widgets of about 1 KB); with -kubeconfig, widgets syncs the live Widgets")
		dynamic    = flag.Bool("dynamic", false, "Widgets: unstructured (dynamic) informers; else typed")
		holdEvents = flag.Bool("hold-events", false, "the watch gets the recorded events only once the informer has synced, to measure them alone (alloc_events_MB, cpu_events_ms)")
		kubeconfig = flag.String("kubeconfig", "", "live mode: the informer syncs the Pods of the API server this kubeconfig names (made by -env), not a replayed corpus; no watch events and no relist are measured")
		env        = flag.Bool("env", false, "start a control plane (testenv), create -pods Pods of the corpus's shape in it, print kubeconfig=PATH, and keep it until standard input closes")
		cpuprofile = flag.String("cpuprofile", "", "write a CPU profile of the sync to this file")
	)
	flag.Parse()
	if *env {
		if err := envMode(*pods, *tmpls, *kind); err != nil {
			fatal(err)
		}
		return
	}
	if *recordDir != "" {
		templates = *tmpls
		rec := record
		switch *kind {
		case "pods":
		case "widgets":
			rec = recordWidgets
		default:
			fatal(fmt.Errorf("unknown -kind %q", *kind))
		}
		if err := rec(*recordDir, *pods, *events); err != nil {
			fatal(err)
		}
		return
	}
	if *corpusDir == "" && *kubeconfig == "" {
		fatal(fmt.Errorf("-corpus, -kubeconfig, -env or -record is required"))
	}
	if *memprofile != "" {
		runtime.MemProfileRate = 4096 // fine enough to tell small allocations apart
	}
	res, err := run(runOptions{corpus: *corpusDir, impl: *impl, strip: *strip, stripTransform: *stripTf, watchList: *watchList, json: *jsonWire, memprofile: *memprofile, relist: *relist, relistUnchanged: *unchanged, share: *share, noShare: *noShare, dynamic: *dynamic, holdEvents: *holdEvents, kubeconfig: *kubeconfig, pods: *pods, cpuprofile: *cpuprofile, widgets: *kubeconfig != "" && *kind == "widgets"})
	if err != nil {
		fatal(err)
	}
	fmt.Println(res)
}

func fatal(err error) {
	fmt.Fprintln(os.Stderr, "informer:", err)
	os.Exit(1)
}

type runOptions struct {
	corpus           string
	impl             string
	strip, watchList bool
	stripTransform   bool
	json             bool
	memprofile       string
	relist           bool
	relistUnchanged  bool
	holdEvents       bool
	share            bool
	noShare          bool
	widgets, dynamic bool   // the Widget corpus; dynamic: unstructured informers
	kubeconfig       string // live mode (live.go)
	pods             int    // live mode: the Pods the server holds
	cpuprofile       string
	timeout          time.Duration
	keepInformer     func(pi podInformer) // tests: inspect the informer before it stops
	// atStage, for tests, is called with the informer after the sync
	// ("synced", only with holdEvents), once every recorded event has
	// arrived ("events") and after the relist ("relisted").
	atStage func(stage string, pi podInformer)
}

// podInformer is what the driver needs of either informer.
type podInformer interface {
	start(ctx context.Context)
	synced() bool
	// rvs returns namespace/name → resourceVersion of every cached Pod.
	rvs() map[string]string
	// objects returns namespace/name → every cached object, as cached.
	objects() map[string]any
	managedFieldsCached() int // Pods that still carry managedFields
}

// counter is the handler both informers get: it counts Pods seen at each
// stage (see stageOf).
type counter struct {
	added, events, relisted atomic.Int64
	events0                 int
}

func (c *counter) add() { c.added.Add(1) }
func (c *counter) update(newRV string) {
	var rv int
	fmt.Sscan(newRV, &rv)
	switch {
	case rv > listRVNum && rv <= listRVNum+c.events0:
		c.events.Add(1)
	case rv >= relistPodRV && rv < relistRVNum:
		c.relisted.Add(1)
	}
}

type result struct {
	impl, mode    string
	strip, share  bool
	pods          int
	syncTime      time.Duration
	base, steady  uint64
	peakSync      uint64
	peakRelist    uint64
	relistTime    time.Duration
	cpuRelist     time.Duration
	allocRelist   uint64
	allocSync     uint64
	gcSync        uint64
	cpuSync       time.Duration
	serverLists   int
	serverStreams int
	refused       int
	relisted      uint64 // HeapAlloc after the relist and two GCs, or 0
	heldEvents    bool   // -hold-events: the events were measured alone
	cpuEvents     time.Duration
	allocEvents   uint64
}

func (r result) String() string {
	per := float64(int64(r.steady)-int64(r.base)) / float64(r.pods)
	return fmt.Sprintf("impl=%s mode=%s strip=%v share=%v pods=%d sync_ms=%.1f heap_per_pod_B=%.0f steady_MB=%.2f base_MB=%.2f peak_sync_extra_MB=%.2f peak_relist_extra_MB=%.2f relist_ms=%.1f cpu_relist_ms=%.0f alloc_relist_MB=%.1f alloc_sync_MB=%.1f gc_sync=%d cpu_sync_ms=%.0f lists=%d streams=%d refused=%d",
		r.impl, r.mode, r.strip, r.share, r.pods, ms(r.syncTime), per, mb(r.steady), mb(r.base), mb(r.peakSync-min(r.peakSync, r.steady)), mb(r.peakRelist-min(r.peakRelist, r.steady)), ms(r.relistTime), ms(r.cpuRelist), mb(r.allocRelist), mb(r.allocSync), r.gcSync, ms(r.cpuSync), r.serverLists, r.serverStreams, r.refused) + r.optional()
}

// optional returns the heap per Pod after the relist, and the figures of
// the events measured alone, for the runs that measured them.
func (r result) optional() string {
	s := ""
	if r.relisted > 0 {
		s += fmt.Sprintf(" heap_per_pod_relisted_B=%.0f", float64(int64(r.relisted)-int64(r.base))/float64(r.pods))
	}
	if r.heldEvents {
		s += fmt.Sprintf(" alloc_events_MB=%.1f cpu_events_ms=%.0f", mb(r.allocEvents), ms(r.cpuEvents))
	}
	return s
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }
func mb(b uint64) float64        { return float64(b) / (1 << 20) }

// sampler tracks the max of HeapAlloc-equivalent memory since reset.
type sampler struct {
	max  atomic.Uint64
	stop chan struct{}
	done chan struct{}
}

var sampleNames = []string{"/memory/classes/heap/objects:bytes", "/gc/heap/allocs:bytes", "/gc/cycles/total:gc-cycles"}

func readMetrics() (heap, allocs, gcs uint64) {
	s := make([]metrics.Sample, len(sampleNames))
	for i, n := range sampleNames {
		s[i].Name = n
	}
	metrics.Read(s)
	return s[0].Value.Uint64(), s[1].Value.Uint64(), s[2].Value.Uint64()
}

func startSampler() *sampler {
	s := &sampler{stop: make(chan struct{}), done: make(chan struct{})}
	go func() {
		defer close(s.done)
		sm := []metrics.Sample{{Name: sampleNames[0]}}
		t := time.NewTicker(time.Millisecond)
		defer t.Stop()
		for {
			metrics.Read(sm)
			if v := sm[0].Value.Uint64(); v > s.max.Load() {
				s.max.Store(v)
			}
			select {
			case <-s.stop:
				return
			case <-t.C:
			}
		}
	}()
	return s
}

// sample takes one more reading (so short phases are not missed) and
// returns the max since the last reset.
func (s *sampler) sample() uint64 {
	h, _, _ := readMetrics()
	if h > s.max.Load() {
		s.max.Store(h)
	}
	return s.max.Load()
}

func (s *sampler) reset()  { s.max.Store(0) }
func (s *sampler) finish() { close(s.stop); <-s.done }

func heapAfterGC() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func waitFor(ctx context.Context, what string, cond func() bool) error {
	for !cond() {
		select {
		case <-ctx.Done():
			return fmt.Errorf("timed out waiting for %s", what)
		case <-time.After(200 * time.Microsecond):
		}
	}
	return nil
}

func run(o runOptions) (result, error) {
	if o.timeout == 0 {
		o.timeout = 2 * time.Minute
	}
	var (
		n, e int
		srv  *server
		lcfg config.Config
		ccfg *clientrest.Config
		err  error
	)
	if o.kubeconfig != "" {
		if o.holdEvents || o.relistUnchanged {
			return result{}, fmt.Errorf("live mode measures the sync only")
		}
		if o.dynamic {
			o.widgets = true
		}
		if o.widgets {
			o.json = true // custom resources come as JSON only
		}
		o.relist = false
		n = o.pods
		if lcfg, ccfg, err = liveConfigs(o.kubeconfig); err != nil {
			return result{}, err
		}
	} else {
		c, err := load(o.corpus)
		if err != nil {
			return result{}, err
		}
		n, e = c.meta.Pods, c.meta.Events
		if c.meta.Kind == "widgets" {
			o.widgets, o.json = true, true // custom resources come as JSON only
		} else if o.dynamic {
			return result{}, fmt.Errorf("-dynamic needs a Widget corpus (-record -kind widgets)")
		}
		if o.relistUnchanged && o.watchList {
			return result{}, fmt.Errorf("-relist-unchanged measures paginated lists only")
		}
		srv = newServer(c, o.watchList, o.relistUnchanged, o.holdEvents)
		defer srv.Close()
		lcfg, ccfg = config.Config{Host: srv.URL()}, &clientrest.Config{Host: srv.URL()}
	}
	ctx, cancel := context.WithTimeout(context.Background(), o.timeout)
	defer cancel()

	cnt := &counter{events0: e}
	var pi podInformer
	switch o.impl {
	case "loom":
		pi, err = newLoom(ctx, lcfg, o, cnt)
	case "client-go":
		pi, err = newClientGo(ccfg, o, cnt)
	default:
		err = fmt.Errorf("unknown -impl %q", o.impl)
	}
	if err != nil {
		return result{}, err
	}
	mode := "list"
	if o.watchList {
		mode = "watchlist"
	}
	impl := o.impl
	if o.noShare && impl == "loom" {
		impl = "loom-noshare"
	}
	if o.widgets {
		mode += map[bool]string{true: "-dynamic", false: "-typed"}[o.dynamic]
	}
	if o.kubeconfig != "" {
		mode = "live-" + mode + map[bool]string{true: "-json", false: "-proto"}[o.json]
	}
	res := result{impl: impl, mode: mode, strip: o.strip, share: o.share, pods: n}

	res.base = heapAfterGC()
	smp := startSampler()
	defer smp.finish()
	_, alloc0, gc0 := readMetrics()
	cpu0 := cpuTime()
	stopProfile, err := startCPUProfile(o.cpuprofile)
	if err != nil {
		return res, err
	}
	t0 := time.Now()
	runCtx, stop := context.WithCancel(ctx)
	defer stop()
	pi.start(runCtx)
	if err := waitFor(ctx, "sync", pi.synced); err != nil {
		return res, err
	}
	res.syncTime = time.Since(t0)
	res.cpuSync = cpuTime() - cpu0
	if err := stopProfile(); err != nil {
		return res, err
	}
	res.peakSync = smp.sample()
	_, alloc1, gc1 := readMetrics()
	res.allocSync, res.gcSync = alloc1-alloc0, gc1-gc0

	if o.holdEvents {
		if o.atStage != nil {
			o.atStage("synced", pi)
		}
		cpu := cpuTime()
		srv.ReleaseEvents()
		if err := waitFor(ctx, "watch events", func() bool { return cnt.events.Load() >= int64(e) }); err != nil {
			return res, err
		}
		_, alloc, _ := readMetrics()
		res.heldEvents, res.cpuEvents, res.allocEvents = true, cpuTime()-cpu, alloc-alloc1
	}

	if err := waitFor(ctx, "all Pods and watch events", func() bool {
		return cnt.added.Load() >= int64(n) && cnt.events.Load() >= int64(e)
	}); err != nil {
		return res, err
	}
	res.steady = heapAfterGC()
	if o.atStage != nil {
		o.atStage("events", pi)
	}
	if o.memprofile != "" {
		if err := writeHeapProfile(o.memprofile); err != nil {
			return res, err
		}
	}
	if o.relist {
		smp.reset()
		_, alloc2, _ := readMetrics()
		cpu2 := cpuTime()
		t1 := time.Now()
		srv.Relist()
		done := func() bool { return cnt.relisted.Load() >= int64(n) }
		if o.relistUnchanged {
			done = func() bool { return srv.rewatch.Load() > 0 }
		}
		if err := waitFor(ctx, "relist", done); err != nil {
			return res, err
		}
		res.relistTime = time.Since(t1)
		res.cpuRelist = cpuTime() - cpu2
		res.peakRelist = smp.sample()
		_, alloc3, _ := readMetrics()
		res.allocRelist = alloc3 - alloc2
		res.relisted = heapAfterGC()
		if o.atStage != nil {
			o.atStage("relisted", pi)
		}
		if o.memprofile != "" {
			if err := writeHeapProfile(o.memprofile + ".relisted"); err != nil {
				return res, err
			}
		}
	}
	if srv != nil {
		st := srv.stats()
		res.serverLists, res.serverStreams, res.refused = st.Lists, st.Streamed, st.Refused
	}
	if o.keepInformer != nil {
		o.keepInformer(pi)
	}
	return res, nil
}

// startCPUProfile starts a CPU profile into the file name, if one is
// named, and returns what stops it.
func startCPUProfile(name string) (stop func() error, err error) {
	if name == "" {
		return func() error { return nil }, nil
	}
	f, err := os.Create(name)
	if err != nil {
		return nil, err
	}
	if err := pprof.StartCPUProfile(f); err != nil {
		f.Close()
		return nil, err
	}
	return func() error { pprof.StopCPUProfile(); return f.Close() }, nil
}

// writeHeapProfile writes the heap profile to the file name.
func writeHeapProfile(name string) error {
	f, err := os.Create(name)
	if err != nil {
		return err
	}
	if err := pprof.Lookup("heap").WriteTo(f, 0); err != nil {
		f.Close()
		return err
	}
	return f.Close()
}
