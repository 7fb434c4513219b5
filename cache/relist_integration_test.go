package cache_test

import (
	"context"
	"fmt"
	"slices"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/testenv"
)

// TestFactoryRelistAgainstAServer checks, on a real API server, that a
// factory's informers follow a KindSelector whose answer changes once
// Factory.Relist returns, that only the informers of the kinds named
// relist, and that the informer goes on watching with the new selector.
func TestFactoryRelistAgainstAServer(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFrom(t, env.KubeconfigPath)
	ctx := t.Context()
	kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", "relist")
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace("relist")
	create := func(name, group string) {
		t.Helper()
		_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{"group": group}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}
	for n := range 6 {
		create(fmt.Sprint("cm-", n), fmt.Sprint(n%3))
	}
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
	names := func() []string {
		var ns []string
		for _, o := range inf.Indexer().List() {
			ns = append(ns, o.Name)
		}
		slices.Sort(ns)
		return ns
	}
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
	// The watch after the relist selects group 1.
	create("late-1", "1")
	create("late-2", "2")
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for !slices.Contains(names(), "late-1") {
		if wctx.Err() != nil {
			t.Fatalf("late-1 never cached; the cache holds %v", names())
		}
		time.Sleep(10 * time.Millisecond)
	}
	if got := names(); !slices.Equal(got, []string{"cm-1", "cm-4", "late-1"}) {
		t.Errorf("after the watch the cache holds %v", got)
	}
}
