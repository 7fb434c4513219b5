// Command recovery measures how fast Loom's informer and client-go's shared
// informer catch up after faults of the API server and the network, side by
// side, through one fault-injecting proxy (testenv.Proxy) in front of one
// real kube-apiserver (testenv).
//
// Catch-up is the time from the end of a fault until an informer's contents
// equal a fresh consistent LIST, whole objects compared (apimachinery's
// semantic equality). Both informers watch the same ConfigMaps, with each
// library's defaults (protobuf on both sides; client-side rate limits off
// on both sides), while writers change them directly (not through the
// proxy) during each fault. When the fault is over the writers stop, the
// LIST is taken, and both caches are compared with it every 2 ms.
//
// Trial types:
//
//	kill9             kube-apiserver kill -9 with writes in flight, then restarted
//	recreate-down     an object deleted and recreated (new UID) in etcd while kube-apiserver is down
//	recreate-after    an object deleted and recreated (new UID) right after kube-apiserver returns
//	etcd-stop         etcd stopped for 2–10 s
//	compact-cache     the proxy goes dark, the server moves on and is compacted, the watches are cut (watch cache on)
//	compact-nocache   the same with kube-apiserver's watch cache off (--watch-cache=false: the watch gets 410)
//	partition         the proxy carries nothing for 2–5 s while the server moves on
//	reset             every connection reset (TCP RST) with writes in flight
//	truncate          every connection cut halfway through the next thing the server sends (half a watch event)
//
// Usage (from bench/):
//
//	go run ./recovery [-trials 5] [-objects 200] [-only kill9,reset] [-out FILE]
//
// It prints a line per trial and informer, then a table: per trial type,
// each informer's median and max catch-up, relists and reported errors, and
// whether Loom meets the goal (median ≤ client-go's median + 0.2 s, max ≤
// 5 s, final contents equal to the LIST).
package main

import (
	"cmp"
	"context"
	"flag"
	"fmt"
	"io"
	"log"
	"math/rand/v2"
	"os"
	"os/signal"
	goruntime "runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/kubernetes"
	k8scache "k8s.io/client-go/tools/cache"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

const namespace = "recovery"

func main() {
	trials := flag.Int("trials", 5, "trials per type")
	objects := flag.Int("objects", 200, "ConfigMaps watched")
	only := flag.String("only", "", "comma-separated trial types to run (default: all)")
	outPath := flag.String("out", "", "also append the raw lines to this file")
	flag.Parse()
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	defer stop()
	out := io.Writer(os.Stdout)
	if *outPath != "" {
		f, err := os.OpenFile(*outPath, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
		if err != nil {
			log.Fatal(err)
		}
		defer f.Close()
		out = io.MultiWriter(os.Stdout, f)
	}
	if err := run(ctx, out, *trials, *objects, *only); err != nil {
		log.Fatal(err)
	}
}

// A fault breaks something and returns when it is over.
type fault struct {
	name    string
	noCache bool // needs kube-apiserver with --watch-cache=false
	do      func(ctx context.Context, b *bench) error
}

var faults = []fault{
	{name: "kill9", do: func(ctx context.Context, b *bench) error {
		return b.env.RestartAPIServer(ctx)
	}},
	{name: "recreate-down", do: func(ctx context.Context, b *bench) error {
		// The victim's old incarnation (another UID) was kept by prepare;
		// put it back in etcd while kube-apiserver is down.
		if err := b.env.StopAPIServer(ctx); err != nil {
			return err
		}
		key := "/registry/configmaps/" + namespace + "/victim"
		if err := b.env.EtcdDelete(ctx, key); err != nil {
			return err
		}
		if err := b.env.EtcdPut(ctx, key, b.oldVictim); err != nil {
			return err
		}
		return b.env.StartAPIServer(ctx)
	}},
	{name: "recreate-after", do: func(ctx context.Context, b *bench) error {
		if err := b.env.RestartAPIServer(ctx); err != nil {
			return err
		}
		b.stopWriters()
		return b.recreateVictim(ctx)
	}},
	{name: "etcd-stop", do: func(ctx context.Context, b *bench) error {
		if err := b.env.StopEtcd(ctx); err != nil {
			return err
		}
		sleep(ctx, time.Duration(2000+rand.IntN(8000))*time.Millisecond)
		return b.env.StartEtcd(ctx)
	}},
	{name: "compact-cache", do: compactAndCut},
	{name: "compact-nocache", noCache: true, do: compactAndCut},
	{name: "partition", do: func(ctx context.Context, b *bench) error {
		b.proxy.Partition()
		sleep(ctx, time.Duration(2000+rand.IntN(3000))*time.Millisecond)
		b.proxy.Heal()
		return nil
	}},
	{name: "reset", do: func(ctx context.Context, b *bench) error {
		b.proxy.Reset()
		return nil
	}},
	{name: "truncate", do: func(ctx context.Context, b *bench) error {
		// The cut lands with the server's next write to each connection;
		// the writers keep the events coming until every armed connection
		// has been cut.
		before := b.proxy.Broken()
		n := b.proxy.Truncate()
		deadline := time.Now().Add(10 * time.Second)
		for b.proxy.Broken() < before+int64(n) && time.Now().Before(deadline) {
			sleep(ctx, time.Millisecond)
		}
		return nil
	}},
}

// compactAndCut darkens the proxy so the informers fall behind, lets the
// writers move the server on, compacts etcd past what the informers saw,
// then cuts their connections and lets traffic flow again.
func compactAndCut(ctx context.Context, b *bench) error {
	b.proxy.Partition()
	sleep(ctx, 500*time.Millisecond)
	if err := b.env.CompactEtcd(ctx, 0); err != nil {
		b.proxy.Heal()
		return err
	}
	b.proxy.Cut()
	b.proxy.Heal()
	return nil
}

func sleep(ctx context.Context, d time.Duration) {
	select {
	case <-ctx.Done():
	case <-time.After(d):
	}
}

// bench is one control plane, its proxy, the two informers and the writers.
type bench struct {
	env       *testenv.Env
	proxy     *testenv.Proxy
	direct    *client.Client[*corev1.ConfigMap] // admin, not through the proxy
	objects   int
	informers []*informer
	oldVictim []byte // the victim's earlier incarnation, as etcd stored it

	stopping atomic.Bool // writers finish the write under way, then stop
	writerWG sync.WaitGroup
	writes   atomic.Int64
}

// informer is one library's informer, as the bench sees it.
type informer struct {
	impl    string
	list    func() []*corev1.ConfigMap
	relists atomic.Int64 // full lists: first pages and streaming lists
	errors  atomic.Int64 // errors the library reported
}

func run(ctx context.Context, out io.Writer, trials, objects int, only string) error {
	want := map[string]bool{}
	for _, n := range strings.Split(only, ",") {
		if n != "" {
			want[n] = true
		}
	}
	var results []result
	for _, noCache := range []bool{false, true} {
		var fs []fault
		for _, f := range faults {
			if f.noCache == noCache && (len(want) == 0 || want[f.name]) {
				fs = append(fs, f)
			}
		}
		if len(fs) == 0 {
			continue
		}
		rs, err := runOn(ctx, out, noCache, fs, trials, objects)
		results = append(results, rs...)
		if err != nil {
			return err
		}
	}
	summarize(out, results, trials, objects)
	return nil
}

type result struct {
	fault, impl     string
	catchUp         time.Duration // -1: never caught up
	relists, errors int64
	equalAtEnd      bool
}

// runOn starts a control plane and runs every trial of fs on it, the
// types in turn, trials times.
func runOn(ctx context.Context, out io.Writer, noCache bool, fs []fault, trials, objects int) ([]result, error) {
	opts := testenv.Options{}
	if noCache {
		opts.APIServerArgs = []string{"--watch-cache=false"}
	}
	env, err := testenv.Start(ctx, opts)
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	b := &bench{env: env, objects: objects}
	if b.proxy, err = env.StartProxy(); err != nil {
		return nil, err
	}
	if err := b.setUp(ctx, objects); err != nil {
		return nil, err
	}
	var results []result
	for trial := 1; trial <= trials; trial++ {
		for _, f := range fs {
			rs, err := b.trial(ctx, f)
			if err != nil {
				return results, fmt.Errorf("%s trial %d: %w", f.name, trial, err)
			}
			for _, r := range rs {
				fmt.Fprintf(out, "fault=%s trial=%d impl=%s catchup_s=%.3f relists=%d errors=%d equal=%v writes=%d\n",
					r.fault, trial, r.impl, r.catchUp.Seconds(), r.relists, r.errors, r.equalAtEnd, b.writes.Load())
			}
			results = append(results, rs...)
		}
	}
	return results, nil
}

// setUp creates the namespace and the objects, and starts both informers
// through the proxy.
func (b *bench) setUp(ctx context.Context, objects int) error {
	admin, err := config.Load(config.LoadOptions{Path: b.env.KubeconfigPath})
	if err != nil {
		return err
	}
	rc, err := rest.New(admin, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		return err
	}
	nss, err := client.For[corev1.Namespace](rc, client.Options{})
	if err != nil {
		return err
	}
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		return err
	}
	b.direct = cms.Namespace(namespace)
	for i := range objects {
		if _, err := b.direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i)},
			Data: map[string]string{"n": "0"}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	// The victim: its first incarnation is kept as etcd stored it, for
	// recreate-down; the informers see the second.
	if _, err := b.direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"}, Data: map[string]string{"incarnation": "old"}}, metav1.CreateOptions{}); err != nil {
		return err
	}
	if b.oldVictim, _, err = b.env.EtcdGet(ctx, "/registry/configmaps/"+namespace+"/victim"); err != nil {
		return err
	}
	if err := b.recreateVictim(ctx); err != nil {
		return err
	}

	loom, err := startLoom(ctx, b.proxy.Kubeconfig)
	if err != nil {
		return err
	}
	cg, err := startClientGo(ctx, b.proxy.Kubeconfig)
	if err != nil {
		return err
	}
	b.informers = []*informer{loom, cg}
	return nil
}

// recreateVictim deletes the victim and creates it again, with a new UID.
func (b *bench) recreateVictim(ctx context.Context) error {
	if err := b.direct.Delete(ctx, "victim", metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	_, err := b.direct.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "victim"},
		Data: map[string]string{"incarnation": fmt.Sprint(time.Now().UnixNano())}}, metav1.CreateOptions{})
	return err
}

// startWriters starts four writers that update random objects and create
// and delete a few more, directly (not through the proxy), until
// stopWriters. Errors (the server is down) are retried after a pause. A
// write is never cancelled half-way: a request the server received could
// otherwise land after the LIST the caches are compared with.
func (b *bench) startWriters(ctx context.Context) {
	b.stopping.Store(false)
	wctx := ctx
	for w := range 4 {
		b.writerWG.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), uint64(time.Now().UnixNano())))
			for !b.stopping.Load() && wctx.Err() == nil {
				var err error
				switch k := rnd.IntN(10); {
				case k < 8:
					name := fmt.Sprint("cm-", rnd.IntN(b.objects))
					_, err = b.direct.Patch(wctx, name, "application/merge-patch+json",
						[]byte(fmt.Sprintf(`{"data":{"n":"%d"}}`, rnd.IntN(1e9))), metav1.PatchOptions{})
				case k == 8:
					_, err = b.direct.Create(wctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("churn-", rnd.IntN(20))}}, metav1.CreateOptions{})
				default:
					err = b.direct.Delete(wctx, fmt.Sprint("churn-", rnd.IntN(20)), metav1.DeleteOptions{})
				}
				switch {
				case err == nil:
					b.writes.Add(1)
				case apierrors.IsNotFound(err) || apierrors.IsAlreadyExists(err) || wctx.Err() != nil:
				default:
					time.Sleep(20 * time.Millisecond) // the server is down: try again shortly
				}
			}
		})
	}
}

func (b *bench) stopWriters() {
	b.stopping.Store(true)
	b.writerWG.Wait()
}

// trial runs one fault and measures both informers' catch-up.
func (b *bench) trial(ctx context.Context, f fault) ([]result, error) {
	// Start from caught-up caches.
	if _, err := b.waitEqual(ctx, time.Now(), 2*time.Minute); err != nil {
		return nil, fmt.Errorf("before the fault: %w", err)
	}
	relists := make([]int64, len(b.informers))
	errs := make([]int64, len(b.informers))
	for i, inf := range b.informers {
		relists[i], errs[i] = inf.relists.Load(), inf.errors.Load()
	}
	b.startWriters(ctx)
	sleep(ctx, 300*time.Millisecond) // writes in flight when the fault comes
	if err := f.do(ctx, b); err != nil {
		b.stopWriters()
		return nil, err
	}
	end := time.Now()
	b.stopWriters()
	caught, err := b.waitEqual(ctx, end, time.Minute)
	if err != nil {
		return nil, err
	}
	var rs []result
	for i, inf := range b.informers {
		rs = append(rs, result{fault: f.name, impl: inf.impl, catchUp: caught[i],
			relists: inf.relists.Load() - relists[i], errors: inf.errors.Load() - errs[i], equalAtEnd: caught[i] >= 0})
	}
	return rs, nil
}

// waitEqual takes a consistent LIST (retrying while the server is not
// back), then compares each informer with it every 2 ms until all are
// equal or limit has passed since from. It returns each informer's time
// from from to its first equality, or -1 if it never got there.
func (b *bench) waitEqual(ctx context.Context, from time.Time, limit time.Duration) ([]time.Duration, error) {
	var ref map[string]*corev1.ConfigMap
	for {
		l, err := b.direct.List(ctx, metav1.ListOptions{})
		if err == nil {
			ref = byKey(l.Items)
			break
		}
		if time.Since(from) > limit || ctx.Err() != nil {
			return nil, fmt.Errorf("no LIST from the server: %w", err)
		}
		sleep(ctx, 10*time.Millisecond)
	}
	caught := make([]time.Duration, len(b.informers))
	left := len(b.informers)
	for i := range caught {
		caught[i] = -1
	}
	for left > 0 && time.Since(from) < limit && ctx.Err() == nil {
		for i, inf := range b.informers {
			if caught[i] < 0 && equal(ref, inf.list()) {
				caught[i] = time.Since(from)
				left--
			}
		}
		sleep(ctx, 2*time.Millisecond)
	}
	for i, inf := range b.informers {
		if caught[i] < 0 {
			log.Printf("%s never caught up: %s", inf.impl, describe(ref, inf.list()))
		}
	}
	return caught, ctx.Err()
}

// describe says how a cache differs from the reference LIST.
func describe(ref map[string]*corev1.ConfigMap, cached []*corev1.ConfigMap) string {
	var d []string
	seen := map[string]bool{}
	for _, o := range cached {
		seen[o.Name] = true
		r, ok := ref[o.Name]
		switch {
		case !ok:
			d = append(d, o.Name+" deleted on the server, still cached")
		case r.ResourceVersion != o.ResourceVersion:
			d = append(d, fmt.Sprintf("%s at %s, server %s", o.Name, o.ResourceVersion, r.ResourceVersion))
		case !sameState(r, o):
			d = append(d, o.Name+" differs at the same resourceVersion")
		}
	}
	for k := range ref {
		if !seen[k] {
			d = append(d, k+" missing")
		}
	}
	slices.Sort(d)
	return fmt.Sprintf("%d cached, %d on the server; %d differences: %s", len(cached), len(ref), len(d), strings.Join(d[:min(len(d), 5)], "; "))
}

func byKey(items []*corev1.ConfigMap) map[string]*corev1.ConfigMap {
	m := make(map[string]*corev1.ConfigMap, len(items))
	for _, o := range items {
		m[o.Name] = o
	}
	return m
}

func equal(ref map[string]*corev1.ConfigMap, cached []*corev1.ConfigMap) bool {
	if len(ref) != len(cached) {
		return false
	}
	for _, o := range cached {
		r, ok := ref[o.Name]
		if !ok || r.ResourceVersion != o.ResourceVersion || !sameState(r, o) {
			return false
		}
	}
	return true
}

// sameState compares two ConfigMaps whole, but for apiVersion and kind:
// Loom's decoders set them on objects that arrive one by one (watch events)
// and client-go's do not; they are not part of the object's state.
func sameState(a, b *corev1.ConfigMap) bool {
	if a.TypeMeta != b.TypeMeta {
		a, b = a.DeepCopy(), b.DeepCopy()
		a.TypeMeta, b.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{}
	}
	return equality.Semantic.DeepEqual(a, b)
}

// startLoom starts Loom's informer with its defaults.
func startLoom(ctx context.Context, kubeconfig []byte) (*informer, error) {
	kc, err := config.Parse(kubeconfig, "proxy")
	if err != nil {
		return nil, err
	}
	cfg, err := kc.Resolve(config.Overrides{})
	if err != nil {
		return nil, err
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		return nil, err
	}
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	inf := &informer{impl: "loom"}
	lw := countingLW{ListerWatcher: cache.ListWatch(cms.Namespace(namespace), cache.ListWatchOptions{}), inf: inf}
	i := cache.NewInformer[*corev1.ConfigMap](lw, cache.InformerOptions[*corev1.ConfigMap]{
		Reflector: cache.ReflectorOptions{ErrorHandler: func(error) { inf.errors.Add(1) }},
	})
	inf.list = i.Indexer().List
	go func() { _ = i.Start(ctx) }()
	return inf, nil
}

type countingLW struct {
	cache.ListerWatcher[*corev1.ConfigMap]
	inf *informer
}

func (c countingLW) List(ctx context.Context, o metav1.ListOptions) (*client.List[*corev1.ConfigMap], error) {
	if o.Continue == "" {
		c.inf.relists.Add(1)
	}
	return c.ListerWatcher.List(ctx, o)
}

func (c countingLW) Watch(ctx context.Context, o metav1.ListOptions) (cache.Watch[*corev1.ConfigMap], error) {
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		c.inf.relists.Add(1)
	}
	return c.ListerWatcher.Watch(ctx, o)
}

// startClientGo starts client-go's shared informer with its defaults.
func startClientGo(ctx context.Context, kubeconfig []byte) (*informer, error) {
	cfg, err := clientcmd.RESTConfigFromKubeConfig(kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.ContentType = "application/vnd.kubernetes.protobuf"
	cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf,application/json"
	cfg.QPS = -1 // no client-side rate limit, as Loom by default
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	inf := &informer{impl: "client-go"}
	cms := cs.CoreV1().ConfigMaps(namespace)
	lw := &k8scache.ListWatch{
		ListWithContextFunc: func(ctx context.Context, o metav1.ListOptions) (runtime.Object, error) {
			if o.Continue == "" {
				inf.relists.Add(1)
			}
			return cms.List(ctx, o)
		},
		WatchFuncWithContext: func(ctx context.Context, o metav1.ListOptions) (watch.Interface, error) {
			if o.SendInitialEvents != nil && *o.SendInitialEvents {
				inf.relists.Add(1)
			}
			return cms.Watch(ctx, o)
		},
	}
	i := k8scache.NewSharedIndexInformer(lw, &corev1.ConfigMap{}, 0, k8scache.Indexers{})
	if err := i.SetWatchErrorHandler(func(*k8scache.Reflector, error) { inf.errors.Add(1) }); err != nil {
		return nil, err
	}
	inf.list = func() []*corev1.ConfigMap {
		objs := i.GetStore().List()
		out := make([]*corev1.ConfigMap, len(objs))
		for j, o := range objs {
			out[j] = o.(*corev1.ConfigMap)
		}
		return out
	}
	go i.RunWithContext(ctx)
	return inf, nil
}

// summarize prints, per fault, each informer's median and max catch-up and
// the goal check.
func summarize(out io.Writer, rs []result, trials, objects int) {
	fmt.Fprintf(out, "\n%d trials per type, %d ConfigMaps, %d cores, catch-up in seconds (median / max), relists and errors summed over the trials\n", trials, objects, goruntime.NumCPU())
	fmt.Fprintf(out, "%-16s %-22s %-22s %-8s %-8s %s\n", "fault", "loom", "client-go", "relists", "errors", "goal (median ≤ client-go + 0.2 s, max ≤ 5 s, equal)")
	var order []string
	byFault := map[string]map[string][]result{}
	for _, r := range rs {
		if byFault[r.fault] == nil {
			byFault[r.fault] = map[string][]result{}
			order = append(order, r.fault)
		}
		byFault[r.fault][r.impl] = append(byFault[r.fault][r.impl], r)
	}
	for _, f := range order {
		l, c := stats(byFault[f]["loom"]), stats(byFault[f]["client-go"])
		ok := l.allEqual && l.median <= c.median+0.2 && l.max <= 5
		verdict := "met"
		if !ok {
			verdict = "MISSED"
		}
		fmt.Fprintf(out, "%-16s %-22s %-22s %-8s %-8s %s\n", f,
			fmt.Sprintf("%.3f / %.3f", l.median, l.max), fmt.Sprintf("%.3f / %.3f", c.median, c.max),
			fmt.Sprintf("%d/%d", l.relists, c.relists), fmt.Sprintf("%d/%d", l.errors, c.errors), verdict)
	}
}

type summary struct {
	median, max     float64
	relists, errors int64
	allEqual        bool
}

func stats(rs []result) summary {
	s := summary{allEqual: len(rs) > 0}
	var xs []float64
	for _, r := range rs {
		x := r.catchUp.Seconds()
		if r.catchUp < 0 {
			x = 60 // never: counted as the limit
			s.allEqual = false
		}
		xs = append(xs, x)
		s.relists += r.relists
		s.errors += r.errors
	}
	if len(xs) == 0 {
		return s
	}
	slices.SortFunc(xs, cmp.Compare)
	s.max = xs[len(xs)-1]
	if n := len(xs); n%2 == 1 {
		s.median = xs[n/2]
	} else {
		s.median = (xs[n/2-1] + xs[n/2]) / 2
	}
	return s
}
