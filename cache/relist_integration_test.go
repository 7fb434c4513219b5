package cache_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// groupedConfigMaps starts a control plane and makes, in namespace ns,
// ConfigMaps cm-0 to cm-5, labelled group=0, 1, 2, 0, 1, 2. create makes
// another.
func groupedConfigMaps(t *testing.T, ns string) (*rest.Client, *client.Client[*corev1.ConfigMap], func(name, group string)) {
	t.Helper()
	env := testenv.New(t, testenv.Options{})
	rc := restFrom(t, env.KubeconfigPath)
	kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", ns)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	create := func(name, group string) {
		t.Helper()
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"group": group}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for n := range 6 {
		create(fmt.Sprint("cm-", n), fmt.Sprint(n%3))
	}
	return rc, cms, create
}

// TestFactoryRelistAgainstAServer checks, on a real API server, that a
// factory's informers follow a KindSelector whose answer changes once
// Factory.Relist returns, that only the informers of the kinds named
// relist, and that the informer goes on watching with the new selector.
func TestFactoryRelistAgainstAServer(t *testing.T) {
	ctx := t.Context()
	rc, _, create := groupedConfigMaps(t, "relist")
	var group atomic.Value
	group.Store("0")
	var asked atomic.Int32
	f := cache.NewFactory(rc, cache.FactoryOptions{
		Namespace: "relist",
		KindSelector: func(gk schema.GroupKind) string {
			if gk.Kind != "ConfigMap" {
				return ""
			}
			asked.Add(1)
			return "group=" + group.Load().(string)
		},
	})
	defer f.Shutdown()
	inf, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := cache.InformerFor[corev1.Secret](f, cache.InformerForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.Start(ctx) }()
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	names := func() []string { return cachedNames(inf) }
	if got := names(); !slices.Equal(got, []string{"cm-0", "cm-3"}) {
		t.Fatalf("group 0 cached %v", got)
	}
	group.Store("1")
	before := asked.Load()
	if err := f.Relist(ctx, schema.GroupKind{Kind: "Secret"}); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"cm-0", "cm-3"}) || asked.Load() != before {
		t.Fatalf("a Relist of Secrets changed the ConfigMaps: %v", got)
	}
	if err := f.Relist(ctx, schema.GroupKind{Kind: "ConfigMap"}); err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"cm-1", "cm-4"}) {
		t.Errorf("after Relist to group 1 the cache holds %v", got)
	}
	if !secrets.HasSynced() {
		t.Error("the Secrets' informer is not synced")
	}
	// The watch after the relist selects group 1: late-2, of group 2, is
	// written first, and late-1 after it. The watch brings events in the
	// order of their writes, so once late-1 is cached the watch has passed
	// late-2's write, and late-2 would be cached already if the watch
	// selected it.
	create("late-2", "2")
	create("late-1", "1")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !slices.Contains(names(), "late-1") {
		if wctx.Err() != nil {
			t.Fatalf("late-1 not cached after a minute; the cache holds %v", names())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := names(); !slices.Equal(got, []string{"cm-1", "cm-4", "late-1"}) {
		t.Errorf("after the watch the cache holds %v, want [cm-1 cm-4 late-1] (late-2 is of group 2)", got)
	}
}

// TestFactoryNarrowAgainstAServer checks, on a real API server, that
// after Factory.Narrow the cache holds only what the narrower selector
// selects, without a second list, and that the watch it resumes from
// where it was uses the new selector: it brings a kept object's changes,
// a new object that matches, and the deletion of an object relabelled
// out of the selection, and nothing of the others.
func TestFactoryNarrowAgainstAServer(t *testing.T) {
	ctx := t.Context()
	rc, cms, create := groupedConfigMaps(t, "narrow")
	var selector atomic.Value
	selector.Store("group in (0,1)")
	f := cache.NewFactory(rc, cache.FactoryOptions{
		Namespace: "narrow",
		KindSelector: func(gk schema.GroupKind) string {
			if gk.Kind != "ConfigMap" {
				return ""
			}
			return selector.Load().(string)
		},
	})
	defer f.Shutdown()
	inf, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var deleted sync.Map
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
		Delete: func(o *corev1.ConfigMap, _ bool) { deleted.Store(o.Name, true) },
	}, cache.HandlerOptions{Inline: true}); err != nil { // called before Narrow returns
		t.Fatal(err)
	}
	go func() { _ = f.Start(ctx) }()
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	names := func() []string { return cachedNames(inf) }
	if got := names(); !slices.Equal(got, []string{"cm-0", "cm-1", "cm-3", "cm-4"}) {
		t.Fatalf("groups 0 and 1 cached %v", got)
	}
	selector.Store("group=1")
	err = f.Narrow(ctx, func(o client.Object) bool { return o.GetLabels()["group"] == "1" }, schema.GroupKind{Kind: "ConfigMap"})
	if err != nil {
		t.Fatal(err)
	}
	if got := names(); !slices.Equal(got, []string{"cm-1", "cm-4"}) {
		t.Errorf("after Narrow to group 1 the cache holds %v", got)
	}
	if _, ok := deleted.Load("cm-0"); !ok {
		t.Error("the handler was not told that cm-0 left")
	}
	if n := cache.InformerReflectorStats(inf).Lists; n != 1 {
		t.Errorf("%d lists, want 1: Narrow does not list", n)
	}

	// The watch goes on from where it was, with the new selector.
	update := func(name string, change func(*corev1.ConfigMap)) {
		t.Helper()
		o, err := cms.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		change(o)
		if _, err := cms.Update(ctx, o, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	update("cm-1", func(o *corev1.ConfigMap) { o.Data = map[string]string{"k": "v"} })
	update("cm-0", func(o *corev1.ConfigMap) { o.Data = map[string]string{"k": "v"} })
	update("cm-4", func(o *corev1.ConfigMap) { o.Labels["group"] = "2" })
	create("late-0", "0")
	create("late-1", "1")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !slices.Equal(names(), []string{"cm-1", "late-1"}) {
		if wctx.Err() != nil {
			t.Fatalf("after the changes the cache holds %v, want [cm-1 late-1]", names())
		}
		time.Sleep(10 * time.Millisecond)
	}
	for {
		o, ok := inf.Indexer().Get("narrow/cm-1")
		if ok && o.Data["k"] == "v" {
			break
		}
		if wctx.Err() != nil {
			t.Fatal("cm-1's update never reached the cache")
		}
		time.Sleep(10 * time.Millisecond)
	}
	if n := cache.InformerReflectorStats(inf).Lists; n != 1 {
		t.Errorf("%d lists after the watch, want 1", n)
	}
}
