// Package cache compares Loom's cache.Store with client-go's Indexer on
// label-selector lists over 100,000 cached Pods.
//
// The client-go side is what a generated lister does: a cache.NewIndexer
// with the namespace index, read through corev1listers.PodLister, whose
// List(selector) scans every object with selector.Matches and whose
// Pods(ns).List(selector) scans the namespace's objects. The Loom side is
// cache.Store.Select, which starts from the smallest index set. Both
// stores hold the same *corev1.Pod pointers and answer the same
// selectors; TestSelectorListAgrees checks they return the same pods.
//
// Run with: cd bench && go test ./cache -run '^$' -bench SelectorList -benchmem -count 5
package cache

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"runtime"
	"slices"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
	corev1listers "k8s.io/client-go/listers/core/v1"
	cgcache "k8s.io/client-go/tools/cache"

	"github.com/loom-k8s/loom/cache"
)

const (
	corpusPods = 100_000
	apps       = 100 // 1,000 pods each: app=X matches 1%
	namespaces = 20
)

var tiers = []string{"frontend", "backend", "cache", "worker"}

// corpusPod returns pod i of the corpus: app app-NNN (i % apps), in
// namespace team-NN (app % namespaces), from one of two ReplicaSets
// (version v1 or v2, each with its pod-template-hash), with the usual
// recommended labels.
func corpusPod(i int) *corev1.Pod {
	app := i % apps
	rs := (i / apps) % 2 // two ReplicaSets per app, half the pods each
	appName := fmt.Sprintf("app-%03d", app)
	hash := fmt.Sprintf("%08x", uint32(app*7919+rs*104729))[:8]
	env := "prod"
	if app%3 == 0 {
		env = "staging"
	}
	lbls := map[string]string{
		"app":                          appName,
		"tier":                         tiers[app%len(tiers)],
		"version":                      fmt.Sprintf("v%d", rs+1),
		"pod-template-hash":            hash,
		"environment":                  env,
		"app.kubernetes.io/name":       appName,
		"app.kubernetes.io/part-of":    fmt.Sprintf("system-%d", app%10),
		"app.kubernetes.io/managed-by": "helm",
	}
	if i%50 == 0 {
		lbls["canary"] = "true"
	}
	name := fmt.Sprintf("%s-%s-%05d", appName, hash, i/apps)
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{
			Name:              name,
			Namespace:         fmt.Sprintf("team-%02d", app%namespaces),
			UID:               types.UID(fmt.Sprintf("uid-%08d", i)),
			ResourceVersion:   fmt.Sprint(1000 + i),
			CreationTimestamp: metav1.Unix(1_700_000_000+int64(i), 0),
			Labels:            lbls,
			OwnerReferences: []metav1.OwnerReference{{
				APIVersion: "apps/v1", Kind: "ReplicaSet", Name: appName + "-" + hash,
				UID: types.UID("rs-" + hash),
			}},
		},
		Spec: corev1.PodSpec{
			NodeName: fmt.Sprintf("node-%03d", i%500),
			Containers: []corev1.Container{{
				Name:  "main",
				Image: "registry.example.com/" + appName + ":1.0",
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{
					corev1.ResourceCPU:    resource.MustParse("100m"),
					corev1.ResourceMemory: resource.MustParse("128Mi"),
				}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: fmt.Sprintf("10.%d.%d.%d", i>>16&255, i>>8&255, i&255)},
	}
}

type stores struct {
	pods   []*corev1.Pod
	cg     cgcache.Indexer
	lister corev1listers.PodLister
	loom   *cache.Store[*corev1.Pod]
}

var (
	storesOnce sync.Once
	shared     stores
)

// buildStores fills both stores with the same corpus, once per process.
func buildStores(tb testing.TB) *stores {
	storesOnce.Do(func() {
		s := stores{pods: make([]*corev1.Pod, corpusPods)}
		for i := range s.pods {
			s.pods[i] = corpusPod(i)
		}
		s.cg = cgcache.NewIndexer(cgcache.MetaNamespaceKeyFunc,
			cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
		s.lister = corev1listers.NewPodLister(s.cg)
		s.loom = cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
		for _, p := range s.pods {
			if err := s.cg.Add(p); err != nil {
				panic(err)
			}
			if err := s.loom.Add(p); err != nil {
				panic(err)
			}
		}
		shared = s
	})
	return &shared
}

type selCase struct {
	name      string
	namespace string // "" for a cluster-wide lister.List
	selector  string
}

var selCases = []selCase{
	// One app of 100: 1% of the pods.
	{"eq-1pct", "", "app=app-042"},
	// Set-based: three apps, their v2 ReplicaSet only: 1.5%.
	{"set-based", "", "app in (app-010,app-011,app-012),version notin (v1)"},
	// A namespaced lister: one namespace holds 5% of the pods.
	{"ns-eq", "team-02", "app=app-042"},
	// Two equalities, one of them broad (tier=cache is 25%).
	{"eq-and-eq", "", "tier=cache,environment=staging"},
	// No requirement the index can use: both sides scan everything.
	{"negative-only", "", "canary!=true,environment!=staging"},
}

func (c selCase) parse(tb testing.TB) labels.Selector {
	sel, err := labels.Parse(c.selector)
	if err != nil {
		tb.Fatal(err)
	}
	return sel
}

func listClientGo(s *stores, c selCase, sel labels.Selector) ([]*corev1.Pod, error) {
	if c.namespace == "" {
		return s.lister.List(sel)
	}
	return s.lister.Pods(c.namespace).List(sel)
}

func listLoom(s *stores, c selCase, sel labels.Selector) ([]*corev1.Pod, error) {
	return s.loom.Select(c.namespace, sel)
}

// TestSelectorListAgrees checks that both sides return the same pods for
// every benchmarked selector, so that the benchmark compares equal work.
func TestSelectorListAgrees(t *testing.T) {
	if testing.Short() {
		t.Skip("builds a 100k-pod corpus")
	}
	s := buildStores(t)
	for _, c := range selCases {
		sel := c.parse(t)
		a, err := listClientGo(s, c, sel)
		if err != nil {
			t.Fatal(err)
		}
		b, err := listLoom(s, c, sel)
		if err != nil {
			t.Fatal(err)
		}
		ka, kb := podKeys(a), podKeys(b)
		if len(ka) == 0 || !slices.Equal(ka, kb) {
			t.Errorf("%s: client-go %d pods, Loom %d pods, equal=%v", c.name, len(ka), len(kb), slices.Equal(ka, kb))
		}
		t.Logf("%s: %d pods match (%.2f%%)", c.name, len(ka), 100*float64(len(ka))/corpusPods)
	}
}

func podKeys(pods []*corev1.Pod) []string {
	out := make([]string, len(pods))
	for i, p := range pods {
		out[i] = p.Namespace + "/" + p.Name
	}
	slices.Sort(out)
	return out
}

func BenchmarkSelectorList(b *testing.B) {
	s := buildStores(b)
	impls := []struct {
		name string
		list func(*stores, selCase, labels.Selector) ([]*corev1.Pod, error)
	}{{"client-go", listClientGo}, {"loom", listLoom}}
	for _, c := range selCases {
		sel := c.parse(b)
		for _, impl := range impls {
			b.Run(c.name+"/"+impl.name, func(b *testing.B) {
				b.ReportAllocs()
				n := 0
				for b.Loop() {
					pods, err := impl.list(s, c, sel)
					if err != nil {
						b.Fatal(err)
					}
					n = len(pods)
				}
				b.ReportMetric(float64(n), "pods/op")
			})
		}
	}
}

// BenchmarkStoreHeap reports the live heap each store adds per cached
// pod, beyond the pods themselves (which both share): keys, the item
// map, the namespace index and, for Loom, the label index.
func BenchmarkStoreHeap(b *testing.B) {
	pods := make([]*corev1.Pod, corpusPods)
	for i := range pods {
		pods[i] = corpusPod(i)
	}
	build := map[string]func() any{
		"client-go": func() any {
			ix := cgcache.NewIndexer(cgcache.MetaNamespaceKeyFunc,
				cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
			for _, p := range pods {
				_ = ix.Add(p)
			}
			return ix
		},
		"loom": func() any {
			s := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
			for _, p := range pods {
				_ = s.Add(p)
			}
			return s
		},
	}
	for _, name := range []string{"client-go", "loom"} {
		b.Run(name, func(b *testing.B) {
			var perPod float64
			for b.Loop() {
				before := liveHeap()
				st := build[name]()
				perPod = float64(liveHeap()-before) / corpusPods
				runtime.KeepAlive(st)
			}
			b.ReportMetric(perPod, "B/pod")
		})
	}
	runtime.KeepAlive(pods)
}

func liveHeap() uint64 {
	runtime.GC()
	runtime.GC()
	var m runtime.MemStats
	runtime.ReadMemStats(&m)
	return m.HeapAlloc
}

// BenchmarkGetByKey reads pods by key, cycling through the corpus in a
// shuffled order: client-go's Indexer.GetByKey (which returns an
// interface{} the caller asserts) against Loom's Store.Get.
func BenchmarkGetByKey(b *testing.B) {
	s := buildStores(b)
	keys := make([]string, len(s.pods))
	for i, p := range s.pods {
		keys[i] = p.Namespace + "/" + p.Name
	}
	rand.New(rand.NewPCG(1, 2)).Shuffle(len(keys), func(i, j int) { keys[i], keys[j] = keys[j], keys[i] })
	b.Run("get/client-go", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			obj, ok, err := s.cg.GetByKey(keys[i%len(keys)])
			if !ok || err != nil || obj.(*corev1.Pod) == nil {
				b.Fatal("missing")
			}
			i++
		}
	})
	b.Run("get/loom", func(b *testing.B) {
		b.ReportAllocs()
		i := 0
		for b.Loop() {
			p, ok := s.loom.Get(keys[i%len(keys)])
			if !ok || p == nil {
				b.Fatal("missing")
			}
			i++
		}
	})
}

// BenchmarkWrite measures the write side, which the label index makes
// more expensive: Update of a stored pod by a copy with the same labels
// (a status change, the common case), Update by a copy whose
// pod-template-hash and version changed (a rollout), and Replace of the
// whole 100k corpus (a relist).
func BenchmarkWrite(b *testing.B) {
	s := buildStores(b)
	same := make([]*corev1.Pod, len(s.pods))
	rolled := make([]*corev1.Pod, len(s.pods))
	for i, p := range s.pods {
		c := *p
		c.ResourceVersion += "0"
		same[i] = &c
		r := *p
		r.Labels = maps.Clone(p.Labels)
		r.Labels["pod-template-hash"] = "rolled"
		r.Labels["version"] = "v3"
		rolled[i] = &r
	}
	cg := cgcache.NewIndexer(cgcache.MetaNamespaceKeyFunc,
		cgcache.Indexers{cgcache.NamespaceIndex: cgcache.MetaNamespaceIndexFunc})
	loom := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
	cgList := make([]any, len(s.pods))
	for i, p := range s.pods {
		cgList[i] = p
	}
	if err := cg.Replace(cgList, "1"); err != nil {
		b.Fatal(err)
	}
	if err := loom.Replace(s.pods); err != nil {
		b.Fatal(err)
	}
	for _, w := range []struct {
		name string
		objs []*corev1.Pod
	}{{"update-same-labels", same}, {"update-new-labels", rolled}} {
		b.Run(w.name+"/client-go", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				// Alternate between the original and the copy so that
				// every update is a change.
				p := w.objs[i%len(w.objs)]
				if (i/len(w.objs))%2 == 1 {
					p = s.pods[i%len(w.objs)]
				}
				_ = cg.Update(p)
				i++
			}
		})
		b.Run(w.name+"/loom", func(b *testing.B) {
			b.ReportAllocs()
			i := 0
			for b.Loop() {
				p := w.objs[i%len(w.objs)]
				if (i/len(w.objs))%2 == 1 {
					p = s.pods[i%len(w.objs)]
				}
				_ = loom.Update(p)
				i++
			}
		})
	}
	b.Run("replace-100k/client-go", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = cg.Replace(cgList, "1")
		}
	})
	b.Run("replace-100k/loom", func(b *testing.B) {
		b.ReportAllocs()
		for b.Loop() {
			_ = loom.Replace(s.pods)
		}
	})
}
