package main

import (
	"bufio"
	"cmp"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	coordinationv1 "k8s.io/api/coordination/v1"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Options configure a run of the scenario.
type Options struct {
	Shelves    int       // primary objects; each owns two ConfigMaps
	UpdateRate int       // Shelf updates per second, throughout
	Exe        string    // the binary to run replicas with (this one)
	Dir        string    // where the replicas' logs go
	Out        io.Writer // report lines
	// ProbeCreates is the number of new Shelves created in each probe
	// mode (see probeModes) after the 1 -> 3 step; 0: none.
	ProbeCreates int
	// MemProfileRate, when not 0, is the replicas' runtime.MemProfileRate
	// (their heap profiles then tell small allocations apart), and makes
	// them write a heap profile each time they report their heap.
	MemProfileRate int
	// APIServerArgs are extra kube-apiserver flags, such as
	// --profiling=true to read its CPU profile during a step.
	APIServerArgs []string
	// CPU, when set, reports after each step the CPU time each process
	// (kube-apiserver, etcd, the replicas, the driver) used during it.
	CPU bool
	// ProfileDir, when not empty, is where each step's CPU profile of
	// kube-apiserver goes (the server must run with --profiling=true).
	ProfileDir string
}

// replicaEnv makes a process a replica:
// "<kubeconfig>|<namespace>|<id>|<log>|<MemProfileRate or 0>".
const replicaEnv = "LOOM_SHARDING_REPLICA"

// maybeReplica runs the process as a replica if replicaEnv says so, and
// exits.
func maybeReplica() {
	v := os.Getenv(replicaEnv)
	if v == "" {
		return
	}
	f := strings.Split(v, "|")
	rate, _ := strconv.Atoi(f[4])
	if rate > 0 {
		runtime.MemProfileRate = rate
	}
	if err := replicaMain(f[0], f[1], f[2], f[3], rate > 0); err != nil && !errors.Is(err, context.Canceled) {
		fmt.Fprintln(os.Stderr, "replica:", err)
		os.Exit(1)
	}
	os.Exit(0)
}

const ns = "shards"

// webhookConfig is the MutatingWebhookConfiguration of the assignment
// webhook, made before the sharded replicas start (they inject their
// address and CA into it) with no rules: the webhook is off until the
// driver sets its rules.
const webhookConfig = "bench-shard"

// noopPath is where the replicas serve a webhook that allows every object
// unchanged: the floor of what a webhook costs, beside the assignment
// webhook's.
const noopPath = "/noop"

var crdRes = client.Resource{
	Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

const shelfCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"shelves.bench.loom.dev"},
 "spec":{"group":"bench.loom.dev","scope":"Namespaced","names":{"plural":"shelves","singular":"shelf","kind":"Shelf"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object",
   "properties":{"spec":{"type":"object","properties":{"value":{"type":"string"}}}}}}}]}}`

// proc is a replica process.
type proc struct {
	id, log string
	cmd     *exec.Cmd
	done    chan error
	killed  int64 // monotonic time of a kill -9; 0 if not killed
}

// reconciled is the last reconcile of a key seen in the logs.
type reconciled struct {
	at      int64
	value   string
	replica string
}

// run is one run of the scenario.
type run struct {
	opts    Options
	env     *testenv.Env
	kubecfg string       // the admin's, for the driver
	replcfg string       // the replicas' service account's
	host    string       // the API server's URL
	hc      *http.Client // authenticated as the admin
	shelves *client.Client[*unstructured.Unstructured]
	meta    *client.Client[*metav1.PartialObjectMetadata] // Shelves, metadata only
	cmMeta  *client.Client[*metav1.PartialObjectMetadata]
	// shelfInf and cmInf watch the Shelves' and ConfigMaps' metadata, so
	// that checking where every object is costs the API server little:
	// polling lists of all 15,000 objects, back to back, took API-server
	// time from the moves.
	shelfInf, cmInf *cache.Informer[*metav1.PartialObjectMetadata]
	mwcs            *client.Client[*admissionregistrationv1.MutatingWebhookConfiguration]
	leases          *client.Client[*coordinationv1.Lease] // in ns

	procs   map[string]*proc
	offsets map[string]int64

	dead []*proc

	upd sync.Mutex // held by the updater while it writes; held to pause it

	mu         sync.Mutex
	written    map[string]string     // key -> last value written
	last       map[string]reconciled // key -> last reconcile end
	reconciles map[string]int        // per replica
	failed     map[string]int        // per replica: reconciles that returned an error
	open       map[string]int64      // replica+" "+key -> start of a reconcile in flight
	intervals  map[string][]interval // key -> reconciles
}

// interval is one reconcile of a key.
type interval struct {
	start, end int64
	replica    string
}

// Report is what a run measured.
type Report struct {
	Steps    []StepReport
	Probes   []ProbeReport // new objects in each probe mode (see probeModes), under the workload, then with it paused
	Baseline Heap          // one unsharded replica holding everything
	Overlaps []string
}

// Heap is one replica's heap after a GC, and what its informers held.
type Heap struct {
	Replica             string
	Bytes               int64
	Shelves, ConfigMaps int
}

// StepReport is one step of the sequence.
type StepReport struct {
	Name       string
	Replicas   []string
	Acted      time.Duration // from the change until the replicas it starts are spawned, or those it stops (or kills) have exited
	Settled    time.Duration // from the change until every Shelf and ConfigMap is on its shard
	CaughtUp   time.Duration // from the change until every update made before settling is reconciled by its shard
	Bound      time.Duration
	Moved      float64 // share of the Shelves whose shard changed
	MoveBound  float64 // the most that may move (adding replicas only)
	Heaps      []Heap
	Reconciles map[string]int // per replica, during the step
	Failed     map[string]int // per replica, during the step: reconciles that failed
	Unbalanced []string
	CPU        string // CPU time per process until caught up, with Options.CPU
	// SentShelves and SentConfigMaps count the objects kube-apiserver
	// sent from the change until caught up: list items and watch events
	// (a streaming list's initial events included), to every client.
	SentShelves, SentConfigMaps int
}

// Run runs the scenario on a fresh control plane.
func Run(ctx context.Context, opts Options) (*Report, error) {
	return onFreshPlane(ctx, opts, (*run).sequence)
}

// onFreshPlane starts a control plane, sets a run of opts up on it (the
// CRD, the namespace, opts.Shelves Shelves), calls f, and stops the
// replicas and the control plane when f returns.
func onFreshPlane[T any](ctx context.Context, opts Options, f func(*run, context.Context) (T, error)) (T, error) {
	var zero T
	env, err := testenv.Start(ctx, testenv.Options{APIServerArgs: opts.APIServerArgs})
	if err != nil {
		return zero, err
	}
	defer env.Stop()
	r := newRun(opts, env)
	defer r.stopAll()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	if err := r.setup(ctx); err != nil {
		return zero, err
	}
	return f(r, ctx)
}

func (r *run) setup(ctx context.Context) error {
	cfg, err := config.Load(config.LoadOptions{Path: r.kubecfg})
	if err != nil {
		return err
	}
	cfg.QPS, cfg.Burst = -1, 0
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return err
	}
	r.host, r.hc = cfg.Host, rc.HTTPClient()
	crds, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: crdRes})
	var crd unstructured.Unstructured
	if err := json.Unmarshal([]byte(shelfCRD), &crd.Object); err != nil {
		return err
	}
	if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		return err
	}
	nsRes := client.Resource{Resource: schema.GroupVersionResource{Version: "v1", Resource: "namespaces"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Namespace"}}
	nss, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: nsRes})
	nsObj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "Namespace", "metadata": map[string]any{"name": ns}}}
	if _, err := nss.Create(ctx, nsObj, metav1.CreateOptions{}); err != nil {
		return err
	}
	if r.replcfg, err = r.replicaKubeconfig(ctx, rc); err != nil {
		return err
	}
	r.shelves, _ = client.For[unstructured.Unstructured](rc, client.Options{Resource: shelfRes})
	r.shelves = r.shelves.Namespace(ns)
	r.meta, _ = client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: shelfRes})
	r.meta = r.meta.Namespace(ns)
	cmRes := client.Resource{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}
	r.cmMeta, _ = client.For[metav1.PartialObjectMetadata](rc, client.Options{Resource: cmRes})
	r.cmMeta = r.cmMeta.Namespace(ns)
	r.leases, _ = client.For[coordinationv1.Lease](rc, client.Options{})
	r.leases = r.leases.Namespace(ns)
	r.mwcs, _ = client.For[admissionregistrationv1.MutatingWebhookConfiguration](rc, client.Options{})
	r.shelfInf = cache.NewInformer(cache.ListWatch(r.meta, cache.ListWatchOptions{Namespace: ns}), cache.InformerOptions[*metav1.PartialObjectMetadata]{Name: "driver shelves"})
	r.cmInf = cache.NewInformer(cache.ListWatch(r.cmMeta, cache.ListWatchOptions{Namespace: ns}), cache.InformerOptions[*metav1.PartialObjectMetadata]{Name: "driver configmaps"})
	go func() { _ = r.shelfInf.Start(ctx) }()
	go func() { _ = r.cmInf.Start(ctx) }()
	for deadline := time.Now().Add(time.Minute); ; {
		if _, err := r.shelves.List(ctx, metav1.ListOptions{Limit: 1}); err == nil {
			break
		} else if time.Now().After(deadline) {
			return fmt.Errorf("the Shelf CRD is not served: %w", err)
		}
		time.Sleep(100 * time.Millisecond)
	}
	// Create the Shelves, 8 at a time.
	work := make(chan int)
	errs := make(chan error, 8)
	var wg sync.WaitGroup
	for range 8 {
		wg.Go(func() {
			for i := range work {
				name := fmt.Sprintf("shelf-%05d", i)
				// Every Shelf starts with a value of its own, as the
				// updates later give them: were they all alike, the
				// baseline replica, measured first, would hold one
				// shared copy of data that the later steps hold many
				// copies of, and the heap ratios would compare unlike
				// data.
				value := "v" + strconv.Itoa(i)
				obj := &unstructured.Unstructured{Object: map[string]any{
					"apiVersion": "bench.loom.dev/v1", "kind": "Shelf",
					"metadata": map[string]any{"name": name, "namespace": ns},
					"spec":     map[string]any{"value": value},
				}}
				if _, err := r.shelves.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
					select {
					case errs <- err:
					default:
					}
					continue
				}
				r.mu.Lock()
				r.written[ns+"/"+name] = value
				r.mu.Unlock()
			}
		})
	}
	for i := range r.opts.Shelves {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return fmt.Errorf("create shelves: %w", err)
	default:
	}
	return nil
}

// start starts a replica; id "" runs one unsharded.
func (r *run) start(id string) error {
	name := cmp.Or(id, "solo")
	log := filepath.Join(r.opts.Dir, name+".log")
	cmd := exec.Command(r.opts.Exe)
	cmd.Env = append(os.Environ(), replicaEnv+"="+strings.Join([]string{r.replcfg, ns, id, log, strconv.Itoa(r.opts.MemProfileRate)}, "|"))
	cmd.Stderr = os.Stderr
	// A replica dies with the driver, even one killed by a signal.
	cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
	if err := cmd.Start(); err != nil {
		return err
	}
	p := &proc{id: name, log: log, cmd: cmd, done: make(chan error, 1)}
	go func() { p.done <- cmd.Wait() }()
	r.procs[name] = p
	return nil
}

// stop stops replicas gracefully, all at once as a scale-down does, and
// waits for them.
func (r *run) stop(ids ...string) error {
	for _, id := range ids {
		_ = r.procs[id].cmd.Process.Signal(syscall.SIGTERM)
	}
	var errs []error
	for _, id := range ids {
		errs = append(errs, r.wait(id))
	}
	return errors.Join(errs...)
}

// wait waits for a replica that was asked to stop.
func (r *run) wait(id string) error {
	p := r.procs[id]
	select {
	case err := <-p.done:
		r.readLog(p)
		delete(r.procs, id)
		if err != nil {
			return fmt.Errorf("replica %s: %w", id, err)
		}
		return nil
	case <-time.After(time.Minute):
		return fmt.Errorf("replica %s did not stop", id)
	}
}

// kill kills a replica with SIGKILL.
func (r *run) kill(id string) {
	p := r.procs[id]
	p.killed = monotonic()
	_ = p.cmd.Process.Kill()
	<-p.done
	r.readLog(p)
	r.dead = append(r.dead, p)
	delete(r.procs, id)
}

// newRun returns a run of opts on env, with nothing started yet.
func newRun(opts Options, env *testenv.Env) *run {
	return &run{opts: opts, env: env, kubecfg: env.KubeconfigPath, procs: map[string]*proc{}, offsets: map[string]int64{},
		written: map[string]string{}, last: map[string]reconciled{}, reconciles: map[string]int{}, failed: map[string]int{},
		open: map[string]int64{}, intervals: map[string][]interval{}}
}

func (r *run) stopAll() {
	for _, p := range r.procs {
		_ = p.cmd.Process.Kill()
		<-p.done
	}
}

// readLog reads the new complete lines of a replica's log.
func (r *run) readLog(p *proc) []string {
	f, err := os.Open(p.log)
	if err != nil {
		return nil
	}
	defer f.Close()
	if _, err := f.Seek(r.offsets[p.log], io.SeekStart); err != nil {
		return nil
	}
	br := bufio.NewReaderSize(f, 1<<16)
	var heaps []string
	for {
		line, err := br.ReadString('\n')
		if err != nil {
			break // an incomplete line is read next time
		}
		r.offsets[p.log] += int64(len(line))
		fs := strings.Fields(line)
		switch {
		case len(fs) == 3 && fs[0] == "S":
			at, _ := strconv.ParseInt(fs[1], 10, 64)
			r.mu.Lock()
			r.open[p.id+" "+fs[2]] = at
			r.mu.Unlock()
		case len(fs) == 5 && fs[0] == "E":
			at, _ := strconv.ParseInt(fs[1], 10, 64)
			r.mu.Lock()
			// A failed reconcile is retried: only a successful one has
			// caught up with the value it read.
			if fs[4] == "ok" && at > r.last[fs[2]].at {
				r.last[fs[2]] = reconciled{at: at, value: fs[3], replica: p.id}
			}
			r.reconciles[p.id]++
			if fs[4] != "ok" {
				r.failed[p.id]++
			}
			if start, ok := r.open[p.id+" "+fs[2]]; ok {
				r.intervals[fs[2]] = append(r.intervals[fs[2]], interval{start, at, p.id})
				delete(r.open, p.id+" "+fs[2])
			}
			r.mu.Unlock()
		case len(fs) > 0 && fs[0] == "M":
			heaps = append(heaps, line)
		}
	}
	return heaps
}
