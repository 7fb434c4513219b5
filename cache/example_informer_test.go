package cache_test

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// An informer over a ListerWatcher (here a scripted one; in a program,
// cache.ListWatch of a client), a handler, and a read through the
// lister.
func ExampleNewInformer() {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, cache.InformerOptions[*corev1.ConfigMap]{
		Transform: cache.StripManagedFields[*corev1.ConfigMap],
	})
	seen := make(chan string, 10)
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(o *corev1.ConfigMap, initial bool) { seen <- fmt.Sprintf("add %s initial=%v", o.Name, initial) },
		Update: func(old, o *corev1.ConfigMap) {
			seen <- fmt.Sprintf("update %s %s->%s", o.Name, old.ResourceVersion, o.ResourceVersion)
		},
		Delete: func(o *corev1.ConfigMap, unknown bool) { seen <- fmt.Sprintf("delete %s unknown=%v", o.Name, unknown) },
	}, cache.HandlerOptions{})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- inf.Start(ctx) }()

	// Wait until the handler has seen the first list.
	if err := cache.WaitForCacheSync(ctx, reg); err != nil {
		panic(err)
	}
	fmt.Println(<-seen)
	fmt.Println(<-seen)

	lw.send(watch.Modified, cm("a", "11"))
	lw.send(watch.Deleted, cm("b", "12"))
	fmt.Println(<-seen)
	fmt.Println(<-seen)

	a, ok := inf.Indexer().Get("ns/a")
	fmt.Println("cached:", a.Name, a.ResourceVersion, ok)

	cancel()
	fmt.Println("Start returned", <-stopped)
	// Output:
	// add a initial=true
	// add b initial=true
	// update a 1->11
	// delete b unknown=false
	// cached: a 11 true
	// Start returned <nil>
}

// A handler added to a running informer first receives everything
// already cached, with initial=true.
func ExampleInformer_AddHandler() {
	lw := newFeed(list("10", "", cm("a", "1"), cm("b", "2")))
	inf := cache.NewInformer(lw, cache.InformerOptions[*corev1.ConfigMap]{})
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- inf.Start(ctx) }()
	if err := cache.WaitForCacheSync(ctx, inf); err != nil {
		panic(err)
	}

	var got []string
	done := make(chan struct{})
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(o *corev1.ConfigMap, initial bool) {
			got = append(got, fmt.Sprintf("%s initial=%v", o.Name, initial))
			if len(got) == 2 {
				close(done)
			}
		},
	}, cache.HandlerOptions{ResyncPeriod: 10 * time.Minute})
	if err != nil {
		panic(err)
	}
	<-done
	slices.Sort(got) // the cache has no order
	fmt.Println(got)
	reg.Remove()
	cancel()
	<-stopped
	// Output: [a initial=true b initial=true]
}

// The mutation detector, meant for tests, finds a handler that changed a
// shared object instead of a copy.
func ExampleInformer_CheckMutations() {
	lw := newFeed(list("10", "", cm("a", "1")))
	inf := cache.NewInformer(lw, cache.InformerOptions[*corev1.ConfigMap]{
		DetectMutations: true,
		OnMutation:      func(error) {}, // Start returns it too
	})
	done := make(chan struct{})
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Add: func(o *corev1.ConfigMap, _ bool) {
			o.Labels = map[string]string{"bad": "idea"} // should have been o.DeepCopy()
			close(done)
		},
	}, cache.HandlerOptions{}); err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan error)
	go func() { stopped <- inf.Start(ctx) }()
	<-done
	var me *cache.MutationError
	if errors.As(inf.CheckMutations(), &me) {
		fmt.Println("changed in place:", me.Keys)
	}
	cancel()
	fmt.Println("Start reports it:", errors.As(<-stopped, &me))
	// Output:
	// changed in place: [ns/a]
	// Start reports it: true
}

// StripManagedFields as a transform: the cache holds objects without
// managedFields.
func ExampleStripManagedFields() {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{
		Name:          "web",
		ManagedFields: []metav1.ManagedFieldsEntry{{Manager: "kubectl"}},
	}}
	pod, _ = cache.StripManagedFields(pod)
	fmt.Println(len(pod.ManagedFields))
	// Output: 0
}

// Informers share the identical parts of the objects they cache (here
// the default, ShareAuto) and can leave managedFields out while decoding.
// A program that must change cached objects in place, which no reader of
// a cache may do, would turn sharing off: a change to one Pod's container
// would otherwise reach every Pod of its workload.
// It needs a running API server, so it is compiled, not run.
func ExampleSharing() {
	cfg, err := config.Load(config.LoadOptions{InClusterFallback: true})
	if err != nil {
		fmt.Println(err)
		return
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf}) // sharing needs protobuf
	if err != nil {
		fmt.Println(err)
		return
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	inf := cache.NewInformer(cache.ListWatch(pods, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.Pod]{
		Sharing:           cache.ShareAuto, // the default; cache.ShareOff for memory of each object's own
		DropManagedFields: true,
	})
	_ = inf.Start(context.Background())
}

// StoreReader reads a store, such as an informer's cache
// (inf.Indexer()): by name, and by label selector through the label
// index, in one namespace or all. A missing object is a NotFound error,
// as from the API server.
func ExampleStoreReader() {
	store := cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{})
	_ = store.Add(cmIn("prod", "web", "1", map[string]string{"app": "web"}))
	_ = store.Add(cmIn("prod", "db", "2", map[string]string{"app": "db"}))
	_ = store.Add(cmIn("dev", "web", "3", map[string]string{"app": "web"}))
	r := cache.StoreReader(store)
	ctx := context.Background()

	web, _ := r.List(ctx, "", labels.SelectorFromSet(labels.Set{"app": "web"}))
	fmt.Println("web everywhere:", len(web))
	inProd, _ := r.List(ctx, "prod", nil)
	fmt.Println("in prod:", len(inProd))
	db, err := r.Get(ctx, "prod", "db")
	fmt.Println(db.Name, err)
	_, err = r.Get(ctx, "dev", "db")
	fmt.Println(apierrors.IsNotFound(err))
	// Output:
	// web everywhere: 2
	// in prod: 2
	// db <nil>
	// true
}

// A factory shares informers between the parts of a program, starts
// them, and reports why one cannot sync. It needs a running API server, so it is compiled, not run.
func ExampleNewFactory() {
	ctx := context.Background()
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		fmt.Println(err)
		return
	}
	f := cache.NewFactory(rc, cache.FactoryOptions{Namespace: "default", Resync: 10 * time.Minute,
		Transform: cache.StripManagedFields[client.Object]})
	pods, err := cache.InformerFor[corev1.Pod](f, cache.InformerForOptions{})
	if err != nil {
		fmt.Println(err)
		return
	}
	if _, err := pods.AddHandler(cache.HandlerFuncs[*corev1.Pod]{
		Add: func(p *corev1.Pod, _ bool) { fmt.Println("pod", p.Name) },
	}, cache.HandlerOptions{}); err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	go func() { _ = f.Start(ctx) }() // runs the informers until ctx ends
	if err := f.WaitForCacheSync(ctx); err != nil {
		var se *cache.SyncError
		if errors.As(err, &se) && apierrors.IsForbidden(err) {
			fmt.Println("no RBAC to list", se.Informer)
		}
		fmt.Println(err)
		return
	}
	running, _ := pods.Indexer().Select("default", labels.SelectorFromSet(labels.Set{"app": "web"}))
	fmt.Println(len(running), "web pods")
}

// A custom resource's informer is stopped when its definition goes
// away, and a new one is made if it comes back. Its factory and informer
// need a running API server, so it is compiled, not run.
func ExampleFactory_StopInformer() {
	var f *cache.Factory              // made with NewFactory
	var widgets cache.Runner          // an informer of f, from InformerFor
	crdDeleted := make(chan struct{}) // from a watch on CustomResourceDefinitions
	go func() {
		<-crdDeleted
		f.StopInformer(widgets) // its handlers get no more calls
	}()
}

// When a selector only narrows (a shard that gave some of its buckets
// away), Narrow lets go of the objects that no longer match and watches
// on from where it was: the server sends nothing again. Here a scripted
// ListerWatcher serves the selector of the moment.
func ExampleInformer_Narrow() {
	lw := &selectingLW{groups: map[string][]*corev1.ConfigMap{
		"a or b": {cm("a1", "1"), cm("b1", "2"), cm("b2", "3")},
		"b":      {cm("b1", "2"), cm("b2", "3")},
	}}
	lw.selector.Store("a or b")
	inf := cache.NewInformer[*corev1.ConfigMap](lw, cache.InformerOptions[*corev1.ConfigMap]{
		Reflector: cache.ReflectorOptions{Streaming: cache.StreamingOff},
	})
	reg, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Delete: func(o *corev1.ConfigMap, unknown bool) { fmt.Println("delete", o.Name, "unknown:", unknown) },
	}, cache.HandlerOptions{Inline: true})
	if err != nil {
		panic(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go func() { _ = inf.Start(ctx) }()
	if err := cache.WaitForCacheSync(ctx, reg); err != nil {
		panic(err)
	}

	lw.selector.Store("b")
	if err := inf.Narrow(ctx, func(o *corev1.ConfigMap) bool { return o.Name != "a1" }); err != nil {
		panic(err)
	}
	fmt.Println("cached:", cachedNames(inf), "lists:", lw.lists.Load())
	// Output:
	// delete a1 unknown: true
	// cached: [b1 b2] lists: 1
}
