package cache_test

import (
	"context"
	"fmt"
	"slices"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

func pod(ns, name, node string, lbls map[string]string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, Labels: lbls},
		Spec:       corev1.PodSpec{NodeName: node},
	}
}

func podNames(pods []*corev1.Pod) []string {
	var out []string
	for _, p := range pods {
		out = append(out, p.Namespace+"/"+p.Name)
	}
	slices.Sort(out)
	return out
}

// A cache of pods needs no key function: pods are filed by
// namespace/name, indexed by namespace, and by label for Select.
func ExampleNewStore() {
	pods := cache.NewStore(cache.StoreOptions[*corev1.Pod]{
		Indexers: cache.Indexers[*corev1.Pod]{
			"node": func(p *corev1.Pod) ([]string, error) { return []string{p.Spec.NodeName}, nil },
		},
	})
	_ = pods.Add(pod("default", "web-1", "node-a", map[string]string{"app": "web"}))
	_ = pods.Add(pod("default", "web-2", "node-b", map[string]string{"app": "web"}))
	_ = pods.Add(pod("kube-system", "dns", "node-a", map[string]string{"app": "dns"}))

	p, ok := pods.Get("default/web-1")
	fmt.Println(p.Name, ok)
	onA, _ := pods.ByIndex("node", "node-a")
	fmt.Println(podNames(onA))
	inDefault, _ := pods.ByIndex(cache.NamespaceIndex, "default")
	fmt.Println(podNames(inDefault))
	// Output:
	// web-1 true
	// [default/web-1 kube-system/dns]
	// [default/web-1 default/web-2]
}

// Select answers a label selector from the label index: here from the
// objects with app=web, or app in (web, dns), not from a scan.
func ExampleStore_Select() {
	pods := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
	_ = pods.Add(pod("default", "web-1", "", map[string]string{"app": "web", "tier": "frontend"}))
	_ = pods.Add(pod("default", "web-2", "", map[string]string{"app": "web", "tier": "frontend", "canary": "true"}))
	_ = pods.Add(pod("default", "db-1", "", map[string]string{"app": "db", "tier": "backend"}))
	_ = pods.Add(pod("other", "web-1", "", map[string]string{"app": "web"}))

	web, _ := pods.Select("", labels.SelectorFromSet(labels.Set{"app": "web"}))
	fmt.Println(podNames(web))
	sel, _ := labels.Parse("app in (web,db),!canary")
	stable, _ := pods.Select("default", sel)
	fmt.Println(podNames(stable))
	// Output:
	// [default/web-1 default/web-2 other/web-1]
	// [default/db-1 default/web-1]
}

// Indexes can be added after construction; objects already stored are
// filed in them.
func ExampleStore_AddIndexers() {
	pods := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
	_ = pods.Add(pod("default", "web-1", "node-a", nil))
	err := pods.AddIndexers(cache.Indexers[*corev1.Pod]{
		"node": func(p *corev1.Pod) ([]string, error) { return []string{p.Spec.NodeName}, nil },
	})
	keys, _ := pods.IndexKeys("node", "node-a")
	fmt.Println(err, keys, pods.ListIndexFuncValues("node"))
	// Output:
	// <nil> [default/web-1] [node-a]
}

// How an informer uses a DeltaFIFO: the reflector writes a list and
// watch events; the informer pops each key's deltas and applies them to
// its Store, which is the DeltaFIFO's KnownObjects. When a relist no
// longer has an object, the DeltaFIFO queues a tombstone for it.
func ExampleDeltaFIFO_Replace() {
	store := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
	fifo := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[*corev1.Pod]{KnownObjects: store})
	apply := func(key string, deltas []cache.Delta[*corev1.Pod]) error {
		for _, d := range deltas {
			fmt.Printf("%s %s unknown=%v\n", key, d.Type, d.FinalStateUnknown)
			if d.Type == cache.Deleted {
				_ = store.Delete(d.Object)
			} else {
				_ = store.Update(d.Object)
			}
		}
		return nil
	}
	ctx := context.Background()

	// The initial list.
	_ = fifo.Replace([]*corev1.Pod{pod("default", "a", "", nil), pod("default", "b", "", nil)})
	for !fifo.HasSynced() {
		_ = fifo.Pop(ctx, apply)
	}
	// The watch breaks; b is deleted meanwhile; the relist lacks it.
	_ = fifo.Replace([]*corev1.Pod{pod("default", "a", "", nil)})
	for fifo.Len() > 0 {
		_ = fifo.Pop(ctx, apply)
	}
	fmt.Println(store.ListKeys())
	// Output:
	// default/a Replaced unknown=false
	// default/b Replaced unknown=false
	// default/a Replaced unknown=false
	// default/b Deleted unknown=true
	// [default/a]
}

// Resync re-delivers every object of the consumer's store that has no
// pending delta, as a Sync delta.
func ExampleDeltaFIFO_Resync() {
	store := cache.NewStore(cache.StoreOptions[*corev1.Pod]{})
	_ = store.Add(pod("default", "a", "", nil))
	fifo := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[*corev1.Pod]{KnownObjects: store})
	_ = fifo.Resync()
	_ = fifo.Pop(context.Background(), func(key string, deltas []cache.Delta[*corev1.Pod]) error {
		fmt.Println(key, deltas[0].Type)
		return nil
	})
	// Output:
	// default/a Sync
}

func ExampleMetaNamespaceKey() {
	key, _ := cache.MetaNamespaceKey(pod("default", "web-1", "", nil))
	ns, name, _ := cache.SplitKey(key)
	fmt.Println(key, ns, name)
	node, _ := cache.MetaNamespaceKey(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "node-1"}})
	fmt.Printf("%q\n", node)
	// Output:
	// default/web-1 default web-1
	// "node-1"
}

func ExampleSplitKey() {
	ns, name, err := cache.SplitKey("kube-system/coredns")
	fmt.Println(ns, name, err)
	_, _, err = cache.SplitKey("a/b/c")
	fmt.Println(err)
	// Output:
	// kube-system coredns <nil>
	// cache: key "a/b/c": malformed key
}

// Index finds the objects that share an index value with a probe object,
// which need not be stored: here the pods on the same node as a new pod.
func ExampleStore_Index() {
	pods := cache.NewStore(cache.StoreOptions[*corev1.Pod]{
		Indexers: cache.Indexers[*corev1.Pod]{
			"node": func(p *corev1.Pod) ([]string, error) { return []string{p.Spec.NodeName}, nil },
		},
	})
	_ = pods.Add(pod("default", "a", "node-1", nil))
	_ = pods.Add(pod("default", "b", "node-2", nil))
	_ = pods.Add(pod("other", "c", "node-1", nil))
	neighbours, _ := pods.Index("node", pod("default", "new", "node-1", nil))
	fmt.Println(podNames(neighbours))
	// Output:
	// [default/a other/c]
}
