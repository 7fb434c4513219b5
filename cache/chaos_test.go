package cache_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"math/rand/v2"
	"net"
	"os"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// chaosProxy forwards TCP to the API server and can cut every open
// connection at once, as a flaky network or a load balancer would.
type chaosProxy struct {
	l      net.Listener
	mu     sync.Mutex
	conns  map[net.Conn]struct{}
	closed bool
}

func newChaosProxy(t *testing.T, target string) *chaosProxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &chaosProxy{l: l, conns: map[net.Conn]struct{}{}}
	var wg sync.WaitGroup
	wg.Go(func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				c.Close()
				continue
			}
			p.mu.Lock()
			if p.closed {
				p.mu.Unlock()
				c.Close()
				u.Close()
				return
			}
			p.conns[c], p.conns[u] = struct{}{}, struct{}{}
			p.mu.Unlock()
			wg.Go(func() { io.Copy(u, c); u.Close() })
			wg.Go(func() { io.Copy(c, u); c.Close() })
		}
	})
	t.Cleanup(func() {
		p.mu.Lock()
		p.closed = true
		p.mu.Unlock()
		l.Close()
		p.cut()
		wg.Wait()
	})
	return p
}

// cut closes every open connection; new ones are accepted.
func (p *chaosProxy) cut() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	n := len(p.conns)
	for c := range p.conns {
		c.Close()
	}
	clear(p.conns)
	return n
}

var chaosWidgets = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "chaos.loom.dev", Version: "v1", Resource: "widgets"},
	Kind:       schema.GroupVersionKind{Group: "chaos.loom.dev", Version: "v1", Kind: "Widget"},
	Namespaced: true,
}

const chaosCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.chaos.loom.dev"},
 "spec":{"group":"chaos.loom.dev","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// fingerprint renders "name@resourceVersion" for every object, sorted.
func fingerprint[T client.Object](objs []T) []string {
	out := make([]string, 0, len(objs))
	for _, o := range objs {
		out = append(out, o.GetNamespace()+"/"+o.GetName()+"@"+o.GetResourceVersion())
	}
	sort.Strings(out)
	return out
}

// chaosTrials is 20 by default; `make chaos` sets LOOM_CHAOS_TRIALS=200.
func chaosTrials() int {
	if n, err := strconv.Atoi(os.Getenv("LOOM_CHAOS_TRIALS")); err == nil && n > 0 {
		return n
	}
	return 20
}

// TestInformersSurviveChaos runs a Pod informer and a custom-resource
// informer, through a proxy that cuts connections, while writers create,
// update and delete objects. Each trial injects one fault (kube-apiserver
// kill -9 and restart; etcd compaction then restart, forcing 410 and a
// relist; connection cuts), pauses the writers and checks that each cache
// equals a fresh consistent LIST: same objects at the same
// resourceVersions. A divergence that does not heal, and a deleted object
// still cached, are counted; the goal for both is zero.
func TestInformersSurviveChaos(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	direct := restFor(t, env)
	proxy := newChaosProxy(t, env.URL[len("https://"):])
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	cfg.Host = "https://" + proxy.l.Addr().String()
	viaProxy, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viaProxy.CloseIdleConnections)

	crds, _ := client.For[unstructured.Unstructured](ctx, direct, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}}})
	var crd unstructured.Unstructured
	if err := json.Unmarshal([]byte(chaosCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, _ := client.For[corev1.Pod](ctx, direct, client.Options{})
	pods = pods.Namespace("default")
	widgets, _ := client.For[unstructured.Unstructured](ctx, direct, client.Options{Resource: chaosWidgets})
	widgets = widgets.Namespace("default")
	for {
		if _, err := widgets.List(ctx, metav1.ListOptions{}); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatal(ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}

	podsP, _ := client.For[corev1.Pod](ctx, viaProxy, client.Options{})
	widgetsP, _ := client.For[unstructured.Unstructured](ctx, viaProxy, client.Options{Resource: chaosWidgets})
	fast := cache.ReflectorOptions{InitialBackoff: 20 * time.Millisecond, MaxBackoff: time.Second, MinWatchTimeout: 30 * time.Second}
	podInf := cache.NewInformer(cache.ListWatch(podsP.Namespace("default"), cache.ListWatchOptions{}), cache.InformerOptions[*corev1.Pod]{Reflector: fast, DetectMutations: true})
	widgetInf := cache.NewInformer(cache.ListWatch(widgetsP.Namespace("default"), cache.ListWatchOptions{}), cache.InformerOptions[*unstructured.Unstructured]{Reflector: fast, DetectMutations: true})
	ictx, stop := context.WithCancel(ctx)
	var iwg sync.WaitGroup
	for _, inf := range []cache.Runner{podInf, widgetInf} {
		iwg.Go(func() {
			if err := inf.Start(ictx); err != nil {
				t.Errorf("informer %s: %v", inf.Name(), err)
			}
		})
	}
	defer func() { stop(); iwg.Wait() }()

	// Writers: create, update and delete pods and widgets at random until
	// told to pause.
	var paused atomic.Bool
	var writes atomic.Int64
	wctx, stopWriters := context.WithCancel(ctx)
	var wwg sync.WaitGroup
	for w := range 4 {
		wwg.Go(func() {
			rnd := rand.New(rand.NewPCG(uint64(w), 7))
			for wctx.Err() == nil {
				if paused.Load() {
					time.Sleep(5 * time.Millisecond)
					continue
				}
				name := fmt.Sprint("o", rnd.IntN(30))
				var err error
				if rnd.IntN(2) == 0 {
					switch rnd.IntN(3) {
					case 0:
						_, err = pods.Create(wctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: name},
							Spec: corev1.PodSpec{NodeName: "nowhere", Containers: []corev1.Container{{Name: "c", Image: "x"}}}}, metav1.CreateOptions{})
					case 1:
						_, err = pods.Patch(wctx, name, "application/merge-patch+json", []byte(fmt.Sprintf(`{"metadata":{"labels":{"n":"%d"}}}`, rnd.IntN(1e6))), metav1.PatchOptions{})
					case 2:
						err = pods.Delete(wctx, name, metav1.DeleteOptions{GracePeriodSeconds: new(int64)})
					}
				} else {
					switch rnd.IntN(3) {
					case 0:
						_, err = widgets.Create(wctx, &unstructured.Unstructured{Object: map[string]any{"apiVersion": "chaos.loom.dev/v1", "kind": "Widget",
							"metadata": map[string]any{"name": name}, "spec": map[string]any{"n": int64(rnd.IntN(1e6))}}}, metav1.CreateOptions{})
					case 1:
						_, err = widgets.Patch(wctx, name, "application/merge-patch+json", []byte(fmt.Sprintf(`{"spec":{"n":%d}}`, rnd.IntN(1e6))), metav1.PatchOptions{})
					case 2:
						err = widgets.Delete(wctx, name, metav1.DeleteOptions{})
					}
				}
				if err == nil {
					writes.Add(1)
				} else if !apierrors.IsNotFound(err) && !apierrors.IsAlreadyExists(err) && wctx.Err() == nil {
					time.Sleep(20 * time.Millisecond) // the API server is restarting: try again shortly
				}
			}
		})
	}
	defer func() { stopWriters(); wwg.Wait() }()

	// A second fault source: connection cuts at random moments.
	var cuts atomic.Int64
	cctx, stopCuts := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Go(func() {
		for {
			select {
			case <-cctx.Done():
				return
			case <-time.After(time.Duration(200+rand.IntN(800)) * time.Millisecond):
				if proxy.cut() > 0 {
					cuts.Add(1)
				}
			}
		}
	})
	defer func() { stopCuts(); cwg.Wait() }()

	divergences, lostDeletes := 0, 0
	trials := chaosTrials()
	for trial := range trials {
		switch trial % 3 {
		case 0:
			if err := env.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
		case 1:
			if err := env.CompactEtcd(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if err := env.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
		case 2:
			proxy.cut()
		}
		// Let the writers run on the healed server a moment, then pause them
		// and compare each cache with a fresh consistent list.
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		paused.Store(true)
		d1, l1 := converge(t, "pods", func() ([]string, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return fingerprint(l.Items), nil
		}, func() []string { return fingerprint(podInf.Indexer().List()) })
		d2, l2 := converge(t, "widgets", func() ([]string, error) {
			l, err := widgets.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return fingerprint(l.Items), nil
		}, func() []string { return fingerprint(widgetInf.Indexer().List()) })
		divergences += d1 + d2
		lostDeletes += l1 + l2
		paused.Store(false)
	}
	if err := podInf.CheckMutations(); err != nil {
		t.Error(err)
	}
	t.Logf("%d trials, %d writes, %d connection cuts: %d divergences, %d lost deletes", trials, writes.Load(), cuts.Load(), divergences, lostDeletes)
	if divergences != 0 || lostDeletes != 0 {
		t.Fatalf("%d divergences and %d lost deletes; want 0", divergences, lostDeletes)
	}
}

// converge waits up to a minute for the cache to equal the server. It returns
// 1 divergence if it never does, and how many cached objects the server
// no longer has (lost deletes).
func converge(t *testing.T, what string, server func() ([]string, error), cached func() []string) (divergence, lost int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var want, got []string
	for time.Now().Before(deadline) {
		var err error
		if want, err = server(); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		got = cached()
		if equal(want, got) {
			return 0, 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	names := map[string]bool{}
	for _, w := range want {
		names[nameOf(w)] = true
	}
	for _, g := range got {
		if !names[nameOf(g)] {
			lost++
		}
	}
	t.Errorf("%s: cache never matched the server:\nserver %v\ncache  %v", what, want, got)
	return 1, lost
}

func equal(a, b []string) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func nameOf(fp string) string {
	for i := len(fp) - 1; i >= 0; i-- {
		if fp[i] == '@' {
			return fp[:i]
		}
	}
	return fp
}
