package cache_test

import (
	"context"
	"fmt"
	"sort"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

func restFor(t *testing.T, env *testenv.Env) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

// state renders name=data for every configmap, sorted, to compare a cache
// with the server.
func state(cms []*corev1.ConfigMap) string {
	var s []string
	for _, cm := range cms {
		if cm.Namespace == "default" && cm.Name != "kube-root-ca.crt" {
			s = append(s, cm.Name+"="+cm.Data["v"])
		}
	}
	sort.Strings(s)
	return fmt.Sprint(s)
}

func TestReflectorFollowsTheServerThroughFaults(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFor(t, env)
	ctx := t.Context()
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	for _, streaming := range []cache.StreamingList{cache.StreamingAuto, cache.StreamingOff} {
		t.Run(fmt.Sprint("streaming=", streaming == cache.StreamingAuto), func(t *testing.T) {
			store := cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{})
			var errsMu sync.Mutex
			var errs []error
			r := cache.NewReflector(cache.ListWatch(cms, cache.ListWatchOptions{}), store, cache.ReflectorOptions{
				Streaming: streaming, PageSize: 7, InitialBackoff: 10 * time.Millisecond, MaxBackoff: 200 * time.Millisecond,
				ErrorHandler: func(err error) { errsMu.Lock(); errs = append(errs, err); errsMu.Unlock() },
			})
			for i := range 20 {
				if _, err := cms.Namespace("default").Apply(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("pre-", i)}, Data: map[string]string{"v": "0"}}, client.ApplyOptions{FieldManager: "t", Force: true}); err != nil {
					t.Fatal(err)
				}
			}
			// start runs the reflector; stop cancels it and waits for Run.
			var cancel context.CancelFunc = func() {}
			var done chan error
			start := func() {
				var rctx context.Context
				rctx, cancel = context.WithCancel(ctx)
				done = make(chan error, 1)
				go func() { done <- r.Run(rctx) }()
			}
			stop := func() {
				cancel()
				if done != nil {
					if err := <-done; err != nil {
						t.Errorf("Run: %v", err)
					}
					done = nil
				}
			}
			defer stop()
			start()

			converged := func(what string) {
				t.Helper()
				wctx, wcancel := context.WithTimeout(ctx, time.Minute)
				defer wcancel()
				for {
					list, err := cms.Namespace("default").List(wctx, metav1.ListOptions{})
					if err == nil {
						want := state(list.Items)
						if got := state(store.List()); got == want && r.HasSynced() {
							return
						}
					}
					select {
					case <-wctx.Done():
						t.Fatalf("%s: cache %s\nserver %v", what, state(store.List()), err)
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
			converged("initial list")
			if st := r.Stats(); (st.StreamingLists > 0) != (streaming == cache.StreamingAuto) {
				t.Fatalf("streaming mode %v but stats %+v", streaming, st)
			}

			write := func(round int) {
				for i := range 5 {
					name := fmt.Sprintf("w-%d-%d", round, i)
					if _, err := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}, Data: map[string]string{"v": "1"}}, metav1.CreateOptions{}); err != nil {
						t.Fatal(err)
					}
				}
				if _, err := cms.Namespace("default").Mutate(ctx, fmt.Sprint("pre-", round), func(cm *corev1.ConfigMap) error { cm.Data["v"] = fmt.Sprint(round); return nil }); err != nil {
					t.Fatal(err)
				}
				if err := cms.Namespace("default").Delete(ctx, fmt.Sprint("pre-", 10+round), metav1.DeleteOptions{}); err != nil {
					t.Fatal(err)
				}
			}
			write(0)
			converged("watch events")

			// kube-apiserver killed: the watch breaks, and resumes from the
			// last resourceVersion. Writes made while it was down arrive.
			if err := env.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			write(1)
			converged("after an API server restart")

			// Compaction plus restart: the old resourceVersion is gone (410),
			// so the reflector lists again. A delete made in between is seen.
			stop()
			lists := r.Stats().Lists
			write(2)
			if err := env.CompactEtcd(ctx, 0); err != nil {
				t.Fatal(err)
			}
			if err := env.RestartAPIServer(ctx); err != nil {
				t.Fatal(err)
			}
			start()
			converged("after compaction (410)")
			if got := r.Stats().Lists; got != lists+1 {
				t.Errorf("lists: %d before compaction, %d after; want exactly one relist", lists, got)
			}
			for i := 0; i < 3; i++ {
				if _, ok := store.Get(fmt.Sprint("default/pre-", 10+i)); ok {
					t.Errorf("deleted pre-%d still cached", 10+i)
				}
			}
			// Clean up for the next subtest.
			stop()
			if err := cms.Namespace("default").DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{}); err != nil {
				t.Fatal(err)
			}
		})
	}
}
