package cache_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"
	"unsafe"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// kubectlIn runs kubectl against env with stdin, failing the test if it
// fails.
func kubectlIn(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	cmd := exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// configMaps renders n configmaps in namespace ns as a YAML stream, each
// with data v=value and label parity=even|odd.
func configMaps(ns string, names []string, value string) string {
	var b strings.Builder
	for n, name := range names {
		parity := "even"
		if n%2 == 1 {
			parity = "odd"
		}
		fmt.Fprintf(&b, "---\napiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: %s\n  labels:\n    parity: %s\ndata:\n  v: %q\n", name, ns, parity, value)
	}
	return b.String()
}

// history records, per key, what handlers saw, as "add v=0",
// "update v=1", "delete v=2".
type history struct {
	mu     sync.Mutex
	byKey  map[string][]string
	notify chan struct{}
}

func newHistory() *history {
	return &history{byKey: map[string][]string{}, notify: make(chan struct{}, 1)}
}

func (h *history) record(key, line string) {
	h.mu.Lock()
	h.byKey[key] = append(h.byKey[key], line)
	h.mu.Unlock()
	select {
	case h.notify <- struct{}{}:
	default:
	}
}

// waitFor waits until every key's history has the wanted length, or
// ctx ends, and returns the histories.
func (h *history) waitFor(ctx context.Context, want map[string]int) map[string][]string {
	for {
		h.mu.Lock()
		done := true
		for k, n := range want {
			if len(h.byKey[k]) < n {
				done = false
			}
		}
		snapshot := map[string][]string{}
		for k, v := range h.byKey {
			snapshot[k] = slices.Clone(v)
		}
		h.mu.Unlock()
		if done {
			return snapshot
		}
		select {
		case <-ctx.Done():
			return snapshot
		case <-h.notify:
		}
	}
}

func cmHandler(h *history) cache.Handler[*corev1.ConfigMap] {
	return cache.HandlerFuncs[*corev1.ConfigMap]{
		Add:    func(o *corev1.ConfigMap, _ bool) { h.record(o.Name, "add v="+o.Data["v"]) },
		Update: func(_, o *corev1.ConfigMap) { h.record(o.Name, "update v="+o.Data["v"]) },
		Delete: func(o *corev1.ConfigMap, _ bool) { h.record(o.Name, "delete v="+o.Data["v"]) },
	}
}

func restFrom(t *testing.T, kubeconfig string) *rest.Client {
	t.Helper()
	return restWith(t, kubeconfig, rest.Protobuf)
}

func restWith(t *testing.T, kubeconfig string, ct rest.ContentType) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: ct})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

// TestInformersAgainstAServer runs informers made by a Factory against a
// real kube-apiserver, with kubectl as the independent writer, then
// checks that shutting the factory down leaves no goroutine behind.
func TestInformersAgainstAServer(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ignore := goleak.IgnoreCurrent() // testenv's own goroutines
	rc := restFrom(t, env.KubeconfigPath)
	ctx := t.Context()
	f := cache.NewFactory(rc, cache.FactoryOptions{
		Namespace: "informers",
		Reflector: cache.ReflectorOptions{InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
		Transform: cache.StripManagedFields[client.Object],
	})
	// A second factory, without the transform.
	untransformed := cache.NewFactory(rc, cache.FactoryOptions{Namespace: "informers"})
	defer untransformed.Shutdown()
	kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", "informers")
	clients := []*rest.Client{rc}

	t.Run("kubectl writes are seen in order per key", func(t *testing.T) {
		cms, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{})
		if err != nil {
			t.Fatal(err)
		}
		again, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{})
		if err != nil || again != cms {
			t.Fatalf("same options gave another informer (%v)", err)
		}
		live, err := client.For[corev1.ConfigMap](rc, client.Options{})
		if err != nil {
			t.Fatal(err)
		}
		res, err := live.Resource(ctx)
		if err != nil {
			t.Fatal(err)
		}
		metas, err := cache.InformerFor[metav1.PartialObjectMetadata](untransformed, cache.InformerForOptions{Resource: res})
		if err != nil {
			t.Fatal(err)
		}
		h := newHistory()
		reg, err := cms.AddHandler(cmHandler(h), cache.HandlerOptions{})
		if err != nil {
			t.Fatal(err)
		}
		metaKeys := newHistory()
		if _, err := metas.AddHandler(cache.HandlerFuncs[*metav1.PartialObjectMetadata]{
			Add:    func(o *metav1.PartialObjectMetadata, _ bool) { metaKeys.record(o.Name, "add") },
			Update: func(_, o *metav1.PartialObjectMetadata) { metaKeys.record(o.Name, "update") },
			Delete: func(o *metav1.PartialObjectMetadata, _ bool) { metaKeys.record(o.Name, "delete") },
		}, cache.HandlerOptions{}); err != nil {
			t.Fatal(err)
		}
		go func() { _ = f.Start(ctx) }()
		go func() { _ = untransformed.Start(ctx) }()
		if err := f.WaitForCacheSync(ctx); err != nil {
			t.Fatal(err)
		}
		if err := untransformed.WaitForCacheSync(ctx); err != nil {
			t.Fatal(err)
		}
		eventually(reg.HasSynced)

		var names, deleted []string
		for n := range 12 {
			names = append(names, fmt.Sprint("cm-", n))
			if n%3 == 0 {
				deleted = append(deleted, fmt.Sprint("cm-", n))
			}
		}
		kubectlIn(t, env.KubeconfigPath, configMaps("informers", names, "0"), "create", "-f", "-")
		kubectlIn(t, env.KubeconfigPath, configMaps("informers", names, "1"), "replace", "-f", "-")
		kubectlIn(t, env.KubeconfigPath, configMaps("informers", names, "2"), "apply", "--server-side", "--force-conflicts", "-f", "-")
		kubectlIn(t, env.KubeconfigPath, "", append([]string{"delete", "configmap", "-n", "informers", "--wait=false"}, deleted...)...)
		kubectlIn(t, env.KubeconfigPath, configMaps("informers", deleted, "3"), "create", "-f", "-")

		want := map[string][]string{}
		lengths := map[string]int{}
		for _, name := range names {
			want[name] = []string{"add v=0", "update v=1", "update v=2"}
			if slices.Contains(deleted, name) {
				want[name] = append(want[name], "delete v=2", "add v=3")
			}
			lengths[name] = len(want[name])
		}
		wctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		got := h.waitFor(wctx, lengths)
		for _, name := range names {
			if !slices.Equal(got[name], want[name]) {
				t.Errorf("%s: handler saw %q, want %q", name, got[name], want[name])
			}
		}
		// The metadata-only informer saw the same sequence of kinds.
		gotMeta := metaKeys.waitFor(wctx, lengths)
		for _, name := range names {
			var kinds []string
			for _, line := range want[name] {
				kinds = append(kinds, strings.Fields(line)[0])
			}
			if !slices.Equal(gotMeta[name], kinds) {
				t.Errorf("%s: metadata handler saw %q, want %q", name, gotMeta[name], kinds)
			}
		}

		// The listers read the same state as the server, by label.
		odd, err := cms.Indexer().Select("informers", labels.SelectorFromSet(labels.Set{"parity": "odd"}))
		if err != nil {
			t.Fatal(err)
		}
		if len(odd) != 6 {
			t.Errorf("lister: %d odd configmaps, want 6", len(odd))
		}
		for _, name := range names {
			o, ok := cms.Indexer().Get("informers/" + name)
			m, mok := metas.Indexer().Get("informers/" + name)
			if !ok || !mok || o.ResourceVersion != m.ResourceVersion {
				t.Errorf("%s: typed cache (%v) and metadata cache (%v) disagree", name, ok, mok)
				continue
			}
			if len(o.ManagedFields) != 0 {
				t.Errorf("%s: managedFields kept despite the transform", name)
			}
			if len(m.ManagedFields) == 0 {
				t.Errorf("%s: the untransformed metadata informer has no managedFields", name)
			}
		}
	})

	t.Run("a missing CRD fails WaitForCacheSync at once, and its informer can be stopped", func(t *testing.T) {
		res := client.Resource{
			Resource:   schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
			Kind:       schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"},
			Namespaced: true,
		}
		widgets, err := cache.InformerFor[unstructured.Unstructured](f, cache.InformerForOptions{Resource: res})
		if err != nil {
			t.Fatal(err)
		}
		// The factory runs: a new informer starts at once.
		err = f.WaitForCacheSync(ctx)
		var se *cache.SyncError
		if !apierrors.IsNotFound(err) || !errors.As(err, &se) || se.Informer != widgets.Name() {
			t.Fatalf("WaitForCacheSync = %v; want a SyncError for %s that is NotFound", err, widgets.Name())
		}
		if !f.StopInformer(widgets) || f.StopInformer(widgets) {
			t.Fatal("StopInformer should find the informer once")
		}
		if err := f.WaitForCacheSync(ctx); err != nil {
			t.Fatalf("after stopping the widget informer: %v", err)
		}

		// The CRD appears: a new informer for the same options works.
		kubectlIn(t, env.KubeconfigPath, widgetCRD, "apply", "-f", "-")
		kubectlIn(t, env.KubeconfigPath, "", "wait", "--for=condition=Established", "crd/widgets.example.com")
		kubectlIn(t, env.KubeconfigPath, "apiVersion: example.com/v1\nkind: Widget\nmetadata:\n  name: w1\n  namespace: informers\n", "apply", "-f", "-")
		again, err := cache.InformerFor[unstructured.Unstructured](f, cache.InformerForOptions{Resource: res})
		if err != nil {
			t.Fatal(err)
		}
		if again == widgets {
			t.Fatal("a stopped informer was handed out again")
		}
		// The discovery of a new CRD takes a moment to reach every
		// handler of the server: NotFound may still be reported for a
		// short while, so wait for it to pass.
		deadline, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for {
			err := f.WaitForCacheSync(deadline)
			if err == nil {
				break
			}
			if deadline.Err() != nil {
				t.Fatalf("widgets never synced: %v", err)
			}
			time.Sleep(100 * time.Millisecond)
		}
		if _, ok := again.Indexer().Get("informers/w1"); !ok {
			t.Fatal("w1 not cached")
		}
	})

	t.Run("RBAC Forbidden surfaces from WaitForCacheSync within seconds", func(t *testing.T) {
		kc, err := env.UserKubeconfig("nobody")
		if err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(t.TempDir(), "kubeconfig")
		if err := os.WriteFile(path, kc, 0o600); err != nil {
			t.Fatal(err)
		}
		urc := restFrom(t, path)
		clients = append(clients, urc)
		uf := cache.NewFactory(urc, cache.FactoryOptions{})
		defer uf.Shutdown()
		pods, err := cache.InformerFor[corev1.Pod](uf, cache.InformerForOptions{})
		if err != nil {
			t.Fatal(err)
		}
		go func() { _ = uf.Start(ctx) }()
		// A deadline far beyond "seconds": the error must come from the
		// server's answer, not from the deadline.
		wctx, cancel := context.WithTimeout(ctx, 5*time.Minute)
		defer cancel()
		err = uf.WaitForCacheSync(wctx)
		var se *cache.SyncError
		var re *cache.ReflectorError
		switch {
		case err == nil:
			t.Fatal("synced without RBAC")
		case errors.Is(err, context.DeadlineExceeded):
			t.Fatalf("waited out the deadline: %v", err)
		case !apierrors.IsForbidden(err), !errors.As(err, &se), !errors.As(err, &re):
			t.Fatalf("WaitForCacheSync = %v; want a SyncError wrapping a Forbidden ReflectorError", err)
		case se.Informer != pods.Name() || !strings.Contains(err.Error(), "pods.v1"):
			t.Fatalf("error names %q, want %q: %v", se.Informer, pods.Name(), err)
		}
		t.Logf("WaitForCacheSync: %v", err)
	})

	t.Run("identical parts are shared, and a write to a shared part is caught", func(t *testing.T) {
		kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", "sharing")
		kubectlIn(t, env.KubeconfigPath, configMaps("sharing", []string{"a", "b", "c", "d", "e"}, "same"), "apply", "-f", "-")
		jrc := restWith(t, env.KubeconfigPath, rest.JSON)
		clients = append(clients, jrc)
		for _, tc := range []struct {
			wire    *rest.Client
			sharing cache.Sharing
			shared  bool
		}{{rc, cache.ShareAuto, true}, {rc, cache.ShareOff, false}, {jrc, cache.ShareAuto, true}, {jrc, cache.ShareOff, false}} {
			live, err := client.For[corev1.ConfigMap](tc.wire, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			var mu sync.Mutex
			var reported []error
			inf := cache.NewInformer(cache.ListWatch(live.Namespace("sharing"), cache.ListWatchOptions{}), cache.InformerOptions[*corev1.ConfigMap]{
				Sharing: tc.sharing, DetectMutations: true, MutationCheckPeriod: time.Hour,
				OnMutation: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() },
			})
			defer startSynced(ctx, t, inf)()
			get := func(name string) *corev1.ConfigMap {
				cm, ok := inf.Indexer().Get("sharing/" + name)
				if !ok {
					t.Fatalf("%s not cached", name)
				}
				return cm
			}
			// All five have the same data; a, c and e the same labels
			// (parity even). The first object to hold a part holds one
			// of its own: a part goes to the table when it is met a
			// second time. So c and e share theirs.
			c, e := get("c"), get("e")
			shared := reflect.ValueOf(c.Data).UnsafePointer() == reflect.ValueOf(e.Data).UnsafePointer() &&
				reflect.ValueOf(c.Labels).UnsafePointer() == reflect.ValueOf(e.Labels).UnsafePointer()
			if shared != tc.shared {
				t.Fatalf("%s, sharing %d: data and labels shared: %t, want %t", tc.wire.ContentType(), tc.sharing, shared, tc.shared)
			}
			// The write reaches every object holding c's data.
			var want []string
			for _, name := range []string{"a", "b", "c", "d", "e"} {
				if reflect.ValueOf(get(name).Data).UnsafePointer() == reflect.ValueOf(c.Data).UnsafePointer() {
					want = append(want, "sharing/"+name)
				}
			}
			if tc.shared && len(want) < 3 || !tc.shared && len(want) != 1 {
				t.Fatalf("%s, sharing %d: %v hold c's data", tc.wire.ContentType(), tc.sharing, want)
			}
			c.Data["v"] = "changed in place" // forbidden: the cache is read-only
			var me *cache.MutationError
			err = inf.CheckMutations()
			if !errors.As(err, &me) || !slices.Equal(me.Keys, want) {
				t.Fatalf("%s, sharing %d: CheckMutations = %v, want a MutationError for %v", tc.wire.ContentType(), tc.sharing, err, want)
			}
			// Writes do not send the change into another object: not the
			// cached object itself, nor a copy of it made after the
			// change, through a plain client or a CachedClient. An object
			// whose parts are its own, or a copy whose data was replaced,
			// is written.
			cc, err := cache.NewCachedClient(live.Namespace("sharing"), inf, cache.CachedClientOptions{})
			if err != nil {
				t.Fatal(err)
			}
			for _, name := range []string{"a", "b", "d", "e"} {
				holds := slices.Contains(want, "sharing/"+name)
				for _, w := range []struct {
					how     string
					inCache bool
					write   func() error
				}{
					{"the cached object, through a client", false, func() error {
						_, err := live.Namespace("sharing").Update(ctx, get(name), metav1.UpdateOptions{})
						return err
					}},
					{"a copy, through a cached client", true, func() error {
						_, err := cc.Update(ctx, get(name).DeepCopy(), metav1.UpdateOptions{})
						return err
					}},
					{"a copy, through a client", true, func() error {
						_, err := live.Namespace("sharing").Update(ctx, get(name).DeepCopy(), metav1.UpdateOptions{})
						return err
					}},
				} {
					err := w.write()
					var sce *client.SharedChangedError
					switch {
					case !holds && err != nil:
						t.Errorf("%s, sharing %d: write of %s (%s), which holds no changed part: %v", tc.wire.ContentType(), tc.sharing, name, w.how, err)
					case holds && (!errors.As(err, &sce) || !errors.Is(err, client.ErrSharedChanged) || sce.Path != ".Data" || sce.InCache != w.inCache || sce.Key != "sharing/"+name):
						t.Errorf("%s, sharing %d: write of %s (%s) = %v; want a SharedChangedError at .Data (in the cache: %t)", tc.wire.ContentType(), tc.sharing, name, w.how, err, w.inCache)
					}
				}
			}
			// A copy whose data is its own again is written, through
			// either client.
			for _, name := range want {
				name = strings.TrimPrefix(name, "sharing/")
				if name == "c" {
					continue
				}
				for how, write := range map[string]func(*corev1.ConfigMap) error{
					"client": func(cm *corev1.ConfigMap) error {
						_, err := live.Namespace("sharing").Update(ctx, cm, metav1.UpdateOptions{})
						return err
					},
					"cached client": func(cm *corev1.ConfigMap) error { _, err := cc.Update(ctx, cm, metav1.UpdateOptions{}); return err },
				} {
					cm := get(name).DeepCopy()
					cm.Data = map[string]string{"v": "same"}
					if err := write(cm); err != nil {
						t.Errorf("%s, sharing %d: write of %s with data of its own, through a %s: %v", tc.wire.ContentType(), tc.sharing, name, how, err)
					}
				}
			}
			c.Data["v"] = "same" // undone, for the informers after this one
		}
	})

	t.Run("unstructured objects share identical nested values over JSON", func(t *testing.T) {
		jrc := restWith(t, env.KubeconfigPath, rest.JSON)
		clients = append(clients, jrc)
		live, err := client.For[unstructured.Unstructured](jrc, client.Options{Resource: client.Resource{
			Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Namespaced: true,
			Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}})
		if err != nil {
			t.Fatal(err)
		}
		for _, tc := range []struct {
			sharing cache.Sharing
			shared  bool
		}{{cache.ShareAuto, true}, {cache.ShareOff, false}} {
			var mu sync.Mutex
			var reported []error
			inf := cache.NewInformer(cache.ListWatch(live.Namespace("sharing"), cache.ListWatchOptions{}), cache.InformerOptions[*unstructured.Unstructured]{
				Sharing: tc.sharing, DetectMutations: true, MutationCheckPeriod: time.Hour, DropManagedFields: true,
				OnMutation: func(err error) { mu.Lock(); reported = append(reported, err); mu.Unlock() },
			})
			defer startSynced(ctx, t, inf)()
			get := func(name string) map[string]any {
				u, ok := inf.Indexer().Get("sharing/" + name)
				if !ok {
					t.Fatalf("%s not cached", name)
				}
				return u.Object
			}
			c, e := get("c"), get("e") // as above: the first object met, a, holds its own parts
			md := func(o map[string]any) map[string]any { return o["metadata"].(map[string]any) }
			if _, ok := md(c)["managedFields"]; ok {
				t.Errorf("sharing %d: managedFields cached with DropManagedFields", tc.sharing)
			}
			ptr := func(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }
			shared := ptr(c["data"]) == ptr(e["data"]) && ptr(md(c)["labels"]) == ptr(md(e)["labels"])
			if shared != tc.shared {
				t.Fatalf("sharing %d: data and labels shared: %t, want %t", tc.sharing, shared, tc.shared)
			}
			var want []string // every object holding the data written
			for _, name := range []string{"a", "b", "c", "d", "e"} {
				if ptr(get(name)["data"]) == ptr(c["data"]) {
					want = append(want, "sharing/"+name)
				}
			}
			if tc.shared && len(want) < 3 || !tc.shared && len(want) != 1 {
				t.Fatalf("sharing %d: %v hold the data of c", tc.sharing, want)
			}
			c["data"].(map[string]any)["v"] = "changed in place" // forbidden: the cache is read-only
			var me *cache.MutationError
			err := inf.CheckMutations()
			if !errors.As(err, &me) || !slices.Equal(me.Keys, want) {
				t.Fatalf("sharing %d: CheckMutations = %v, want a MutationError for %v", tc.sharing, err, want)
			}
			// A write of a cached object holding the changed data, or of
			// a copy of it, is refused; one holding data of its own is
			// not.
			for _, name := range []string{"a", "b", "d", "e"} {
				u, _ := inf.Indexer().Get("sharing/" + name)
				for _, w := range []struct {
					obj     *unstructured.Unstructured
					inCache bool
				}{{u, false}, {u.DeepCopy(), true}} {
					_, err := live.Namespace("sharing").Update(ctx, w.obj, metav1.UpdateOptions{})
					var sce *client.SharedChangedError
					if holds := slices.Contains(want, "sharing/"+name); holds != (err != nil) ||
						holds && (!errors.As(err, &sce) || sce.Path != `.Object["data"]` || sce.InCache != w.inCache) {
						t.Errorf("sharing %d: write of %s (a copy: %t), which holds the changed data: %t: %v", tc.sharing, name, w.inCache, holds, err)
					}
				}
			}
			c["data"].(map[string]any)["v"] = "same" // undone
		}
	})

	t.Run("a relist takes unchanged objects from the cache without decoding them", func(t *testing.T) {
		kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", "relist")
		names := []string{"a", "b", "c", "d"}
		kubectlIn(t, env.KubeconfigPath, configMaps("relist", names, "1"), "apply", "-f", "-")
		for _, tc := range []struct {
			ct        rest.ContentType
			streaming bool
		}{{rest.Protobuf, false}, {rest.JSON, false}, {rest.Protobuf, true}, {rest.JSON, true}} {
			ct := tc.ct
			c := restWith(t, env.KubeconfigPath, ct)
			clients = append(clients, c)
			live, err := client.For[corev1.ConfigMap](c, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			lw := &relistOnce[*corev1.ConfigMap]{ListerWatcher: cache.ListWatch(live, cache.ListWatchOptions{Namespace: "relist"}), release: make(chan struct{}), streaming: tc.streaming}
			ro := cache.ReflectorOptions{Streaming: cache.StreamingOff} // lists, and then watches
			if tc.streaming {
				ro.Streaming = cache.StreamingAuto // a streaming list, which goes on as the watch
			}
			var transforms atomic.Int64
			inf := cache.NewInformer(lw, cache.InformerOptions[*corev1.ConfigMap]{
				Reflector: ro,
				Transform: func(cm *corev1.ConfigMap) (*corev1.ConfigMap, error) {
					transforms.Add(1)
					return cm, nil
				},
			})
			stop := startSynced(ctx, t, inf)
			before := map[string]*corev1.ConfigMap{}
			for _, n := range names {
				before[n], _ = inf.Indexer().Get("relist/" + n)
			}
			// b changes, and the informer hears of it only by listing
			// again: a held-up watch fails with 410 Gone once released
			// (so b changes first); a streaming list's watch gets a 410
			// instead of the next event, b's change (so release first).
			// (An annotation: fields the first writer owns keep their
			// owner, so its managed-fields blob does not change.)
			b := before["b"].DeepCopy()
			b.Annotations["relist"] = fmt.Sprint(ct, tc.streaming)
			if tc.streaming {
				close(lw.release)
			}
			if _, err := live.Update(ctx, b, metav1.UpdateOptions{}); err != nil {
				stop()
				t.Fatal(err)
			}
			if !tc.streaming {
				close(lw.release)
			}
			eventually(func() bool {
				got, _ := inf.Indexer().Get("relist/b")
				return got.Annotations["relist"] == fmt.Sprint(ct, tc.streaming)
			})
			relisted := lw.list(1)
			if len(relisted) != len(names) {
				stop()
				t.Fatalf("%s, streaming %v: the relist brought %d objects", ct, tc.streaming, len(relisted))
			}
			for _, cm := range relisted {
				if undecoded := cm == before[cm.Name]; undecoded != (cm.Name != "b") {
					t.Errorf("%s, streaming %v: relisted %s is the cached object: %v", ct, tc.streaming, cm.Name, undecoded)
				}
			}
			// b's new version was decoded with the cached one at hand: the
			// managed-fields blobs that did not change are the cached
			// version's, not copies.
			kept := 0
			for _, e := range relistedB(relisted).ManagedFields {
				for _, o := range before["b"].ManagedFields {
					if e.FieldsV1 != nil && o.FieldsV1 != nil && string(e.FieldsV1.Raw) == string(o.FieldsV1.Raw) {
						if unsafe.SliceData(e.FieldsV1.Raw) != unsafe.SliceData(o.FieldsV1.Raw) {
							t.Errorf("%s, streaming %v: b's unchanged blob of %s is a copy", ct, tc.streaming, e.Manager)
						}
						kept++
					}
				}
			}
			if kept == 0 {
				t.Errorf("%s, streaming %v: no managed-fields blob of b is unchanged: %v", ct, tc.streaming, before["b"].ManagedFields)
			}
			// Transformed: the four listed first, then b's new version.
			if n := transforms.Load(); n != int64(len(names)+1) {
				t.Errorf("%s, streaming %v: %d transforms, want %d", ct, tc.streaming, n, len(names)+1)
			}
			stop()
		}
	})

	t.Run("an update takes unchanged parts from the cached version", func(t *testing.T) {
		kubectlIn(t, env.KubeconfigPath, "", "create", "namespace", "update")
		for _, ct := range []rest.ContentType{rest.Protobuf, rest.JSON} {
			// An object of its own per wire, with a data key of its own,
			// so that no other object has its managed-fields blobs: an
			// unchanged blob of the update can only come from the cached
			// version.
			name := "solo-" + ct.String()
			kubectlIn(t, env.KubeconfigPath, fmt.Sprintf("apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: %s\n  namespace: update\ndata:\n  %s: x\n", name, name), "apply", "-f", "-")
			c := restWith(t, env.KubeconfigPath, ct)
			clients = append(clients, c)
			live, err := client.For[corev1.ConfigMap](c, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			inf := cache.NewInformer(cache.ListWatch(live, cache.ListWatchOptions{Namespace: "update", FieldSelector: "metadata.name=" + name}), cache.InformerOptions[*corev1.ConfigMap]{})
			stop := startSynced(ctx, t, inf)
			before, _ := inf.Indexer().Get("update/" + name)
			cm := before.DeepCopy()
			if cm.Annotations == nil {
				cm.Annotations = map[string]string{}
			}
			cm.Annotations["update"] = "1"
			if _, err := live.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
				stop()
				t.Fatal(err)
			}
			var after *corev1.ConfigMap
			eventually(func() bool {
				after, _ = inf.Indexer().Get("update/" + name)
				return after.Annotations["update"] == "1"
			})
			kept := 0
			for _, e := range after.ManagedFields {
				for _, o := range before.ManagedFields {
					if e.FieldsV1 != nil && o.FieldsV1 != nil && string(e.FieldsV1.Raw) == string(o.FieldsV1.Raw) {
						if unsafe.SliceData(e.FieldsV1.Raw) != unsafe.SliceData(o.FieldsV1.Raw) {
							t.Errorf("%s: the unchanged blob of %s is a copy", ct, e.Manager)
						}
						kept++
					}
				}
			}
			if kept == 0 {
				t.Errorf("%s: no managed-fields blob is unchanged: %v", ct, before.ManagedFields)
			}
			stop()
		}
	})

	f.Shutdown()
	untransformed.Shutdown()
	if _, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{}); !errors.Is(err, cache.ErrFactoryShutdown) {
		t.Errorf("InformerFor after Shutdown: %v", err)
	}
	// The informers' watches are closed, but an HTTP/2 connection
	// becomes idle only once the server has acknowledged the end of its
	// streams; until then CloseIdleConnections leaves it open. So close
	// idle connections until their goroutines are gone: a goroutine of
	// an informer would not go away this way.
	for range 500 {
		for _, c := range clients {
			c.CloseIdleConnections()
		}
		if goleak.Find(ignore) == nil {
			break
		}
		time.Sleep(10 * time.Millisecond)
	}
	goleak.VerifyNone(t, ignore)
}

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.com
spec:
  group: example.com
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget}
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        x-kubernetes-preserve-unknown-fields: true
`

// relistedB returns the relisted ConfigMap b.
func relistedB(relisted []*corev1.ConfigMap) *corev1.ConfigMap {
	for _, cm := range relisted {
		if cm.Name == "b" {
			return cm
		}
	}
	return &corev1.ConfigMap{}
}

// relistOnce makes a reflector list again once release is closed. With
// paginated lists it holds up the first watch until then, and fails it
// with 410 Gone. With streaming, where a list goes on as the watch, the
// first event after release becomes a 410 ERROR event. It keeps the items
// of each list: a paginated list's, or the ADDED events of a streaming
// one.
type relistOnce[T any] struct {
	cache.ListerWatcher[T]
	release   chan struct{}
	streaming bool

	mu      sync.Mutex
	watches int
	expired bool // the 410 was sent
	lists   [][]T
}

func (l *relistOnce[T]) List(ctx context.Context, opts metav1.ListOptions) (*client.List[T], error) {
	page, err := l.ListerWatcher.List(ctx, opts)
	if err == nil {
		l.mu.Lock()
		l.lists = append(l.lists, slices.Clone(page.Items))
		l.mu.Unlock()
	}
	return page, err
}

func (l *relistOnce[T]) Watch(ctx context.Context, opts metav1.ListOptions) (cache.Watch[T], error) {
	l.mu.Lock()
	l.watches++
	n := l.watches
	l.mu.Unlock()
	if n == 1 && !l.streaming {
		select {
		case <-l.release:
			return nil, apierrors.NewResourceExpired("held up, then expired")
		case <-ctx.Done():
			return nil, ctx.Err()
		}
	}
	w, err := l.ListerWatcher.Watch(ctx, opts)
	if err != nil || !l.streaming {
		return w, err
	}
	list := -1 // the list this watch streams, if it does
	if opts.SendInitialEvents != nil && *opts.SendInitialEvents {
		l.mu.Lock()
		l.lists = append(l.lists, nil)
		list = len(l.lists) - 1
		l.mu.Unlock()
	}
	return &heldWatch[T]{Watch: w, l: l, list: list}, nil
}

// heldWatch is a watch of a streaming relistOnce.
type heldWatch[T any] struct {
	cache.Watch[T]
	l    *relistOnce[T]
	list int
}

func (h *heldWatch[T]) Next() (rest.Event[T], error) {
	ev, err := h.Watch.Next()
	if err != nil {
		return ev, err
	}
	h.l.mu.Lock()
	defer h.l.mu.Unlock()
	select {
	case <-h.l.release:
		if !h.l.expired {
			h.l.expired = true
			return rest.Event[T]{Type: watch.Error, Status: &metav1.Status{Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "held up, then expired"}}, nil
		}
	default:
	}
	if ev.Type == watch.Added && h.list >= 0 {
		h.l.lists[h.list] = append(h.l.lists[h.list], ev.Object)
	}
	return ev, nil
}

// list returns the items of list n.
func (l *relistOnce[T]) list(n int) []T {
	l.mu.Lock()
	defer l.mu.Unlock()
	if n >= len(l.lists) {
		return nil
	}
	return l.lists[n]
}

// startSynced starts inf and waits until it has synced, failing t (with
// inf stopped) if it does not. stop stops inf and waits for its Start to
// return.
func startSynced[T client.Object](ctx context.Context, t *testing.T, inf *cache.Informer[T]) (stop func()) {
	t.Helper()
	ctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- inf.Start(ctx) }()
	stop = func() { cancel(); <-done }
	if err := cache.WaitForCacheSync(ctx, inf); err != nil {
		stop()
		t.Fatal(err)
	}
	return stop
}
