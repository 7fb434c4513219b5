package cache_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"os"
	"sort"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

var chaosWidgets = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "chaos.loom.dev", Version: "v1", Resource: "widgets"},
	Kind:       schema.GroupVersionKind{Group: "chaos.loom.dev", Version: "v1", Kind: "Widget"},
	Namespaced: true,
}

const chaosCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.chaos.loom.dev"},
 "spec":{"group":"chaos.loom.dev","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// snapshot maps "namespace/name" to each object.
func snapshot[T client.Object](objs []T) map[string]T {
	out := make(map[string]T, len(objs))
	for _, o := range objs {
		out[o.GetNamespace()+"/"+o.GetName()] = o
	}
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
// informer, through a proxy that breaks connections, while writers create,
// update and delete objects. Each trial injects one fault (kube-apiserver
// kill -9 and restart; etcd compaction then restart, forcing 410 and a
// relist; connections closed cleanly, reset with RST, or cut halfway
// through a watch event; a partition while the server moves on), pauses
// the writers and checks that each cache equals a fresh consistent LIST,
// whole objects compared. Between trials the proxy also breaks
// connections at random moments, in all three ways. A divergence that does
// not heal, a deleted object still cached, and a cached object changed in
// place (every informer runs the mutation detector) are counted; the goal
// for all three is zero.
func TestInformersSurviveChaos(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	direct := restFor(t, env)
	proxy, err := env.StartProxy()
	if err != nil {
		t.Fatal(err)
	}
	kc, err := config.Parse(proxy.Kubeconfig, "proxy kubeconfig")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := kc.Resolve(config.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	viaProxy, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(viaProxy.CloseIdleConnections)

	crds, _ := client.For[unstructured.Unstructured](direct, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}}})
	var crd unstructured.Unstructured
	if err := json.Unmarshal([]byte(chaosCRD), &crd.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(ctx, &crd, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	pods, _ := client.For[corev1.Pod](direct, client.Options{})
	pods = pods.Namespace("default")
	widgets, _ := client.For[unstructured.Unstructured](direct, client.Options{Resource: chaosWidgets})
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

	podsP, _ := client.For[corev1.Pod](viaProxy, client.Options{})
	widgetsP, _ := client.For[unstructured.Unstructured](viaProxy, client.Options{Resource: chaosWidgets})
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

	// A second fault source: connections broken at random moments, closed
	// cleanly, reset, or cut halfway through what the server sends next.
	var cuts atomic.Int64
	cctx, stopCuts := context.WithCancel(ctx)
	var cwg sync.WaitGroup
	cwg.Go(func() {
		faults := []func() int{proxy.Cut, proxy.Reset, proxy.Truncate}
		for {
			select {
			case <-cctx.Done():
				return
			case <-time.After(time.Duration(200+rand.IntN(800)) * time.Millisecond):
				if faults[rand.IntN(len(faults))]() > 0 {
					cuts.Add(1)
				}
			}
		}
	})
	defer func() { stopCuts(); cwg.Wait() }()

	divergences, lostDeletes := 0, 0
	trials := chaosTrials()
	for trial := range trials {
		switch trial % 6 {
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
			proxy.Cut()
		case 3:
			proxy.Reset()
		case 4:
			proxy.Truncate()
		case 5:
			proxy.Partition()
			time.Sleep(time.Duration(200+rand.IntN(1000)) * time.Millisecond)
			proxy.Heal()
		}
		// Let the writers run on the healed server a moment, then pause them
		// and compare each cache with a fresh consistent list.
		time.Sleep(time.Duration(100+rand.IntN(300)) * time.Millisecond)
		paused.Store(true)
		d1, l1 := converge(t, "pods", func() (map[string]*corev1.Pod, error) {
			l, err := pods.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return snapshot(l.Items), nil
		}, func() map[string]*corev1.Pod { return snapshot(podInf.Indexer().List()) })
		d2, l2 := converge(t, "widgets", func() (map[string]*unstructured.Unstructured, error) {
			l, err := widgets.List(ctx, metav1.ListOptions{})
			if err != nil {
				return nil, err
			}
			return snapshot(l.Items), nil
		}, func() map[string]*unstructured.Unstructured { return snapshot(widgetInf.Indexer().List()) })
		divergences += d1 + d2
		lostDeletes += l1 + l2
		paused.Store(false)
	}
	mutations := 0
	for _, inf := range []interface{ CheckMutations() error }{podInf, widgetInf} {
		var me *cache.MutationError
		if err := inf.CheckMutations(); errors.As(err, &me) {
			mutations += len(me.Keys)
			t.Error(err)
		} else if err != nil {
			t.Error(err)
		}
	}
	t.Logf("%d trials, %d writes, %d connections broken at random: %d divergences, %d lost deletes, %d mutations", trials, writes.Load(), cuts.Load(), divergences, lostDeletes, mutations)
	if divergences != 0 || lostDeletes != 0 {
		t.Fatalf("%d divergences and %d lost deletes; want 0", divergences, lostDeletes)
	}
}

// converge waits up to a minute for the cache to equal the server, whole
// objects compared (apimachinery's semantic equality). It returns 1
// divergence if it never does, and how many cached objects the server no
// longer has (lost deletes).
func converge[T client.Object](t *testing.T, what string, server func() (map[string]T, error), cached func() map[string]T) (divergence, lost int) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	var want, got map[string]T
	for time.Now().Before(deadline) {
		var err error
		if want, err = server(); err != nil {
			time.Sleep(50 * time.Millisecond)
			continue
		}
		got = cached()
		if len(diff(want, got)) == 0 {
			return 0, 0
		}
		time.Sleep(50 * time.Millisecond)
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			lost++
		}
	}
	t.Errorf("%s: cache never matched the server; differences:\n%s", what, strings.Join(diff(want, got), "\n"))
	return 1, lost
}

// withoutKind returns obj, or for a typed object a copy with its apiVersion
// and kind cleared: Loom's decoders set them on objects that come one by
// one (watch events) and not on the items of a list, and they are not part
// of the object's state.
func withoutKind[T client.Object](obj T) runtime.Object {
	if _, ok := any(obj).(*unstructured.Unstructured); ok {
		return obj
	}
	c := obj.DeepCopyObject()
	c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
	return c
}

// diff describes each object that differs between the server's list and
// the cache.
func diff[T client.Object](want, got map[string]T) []string {
	var out []string
	for k, w := range want {
		g, ok := got[k]
		switch {
		case !ok:
			out = append(out, "missing from the cache: "+k)
		case !equality.Semantic.DeepEqual(withoutKind(w), withoutKind(g)):
			wj, _ := json.Marshal(w)
			gj, _ := json.Marshal(g)
			out = append(out, fmt.Sprintf("%s differs:\n  server %s\n  cache  %s", k, wj, gj))
		}
	}
	for k := range got {
		if _, ok := want[k]; !ok {
			out = append(out, "deleted on the server, still cached: "+k)
		}
	}
	sort.Strings(out)
	return out
}
