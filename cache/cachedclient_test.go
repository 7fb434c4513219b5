package cache_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"path"
	"strconv"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// TestReadYourWrites: 1,000 update-then-cached-read pairs; every read
// returns at least the resourceVersion just written.
func TestReadYourWrites(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFor(t, env)
	ctx := t.Context()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	live = live.Namespace("default")
	inf := cache.NewInformer(cache.ListWatch(live, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.ConfigMap]{})
	cc, err := cache.NewCachedClient(live, inf, cache.CachedClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = inf.Start(ictx) })
	defer func() { stop(); wg.Wait() }()
	if err := cache.WaitForCacheSync(ctx, inf); err != nil {
		t.Fatal(err)
	}

	cm, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "ryw", Namespace: "default"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	stale := 0 // reads a plain lister would have got wrong
	for i := 1; i <= 1000; i++ {
		next := cm.DeepCopy()
		next.Data["n"] = strconv.Itoa(i)
		if cm, err = cc.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if plain, ok := inf.Indexer().Get("default/ryw"); !ok || plain.ResourceVersion != cm.ResourceVersion {
			stale++
		}
		got, err := cc.Get(ctx, "default", "ryw")
		if err != nil {
			t.Fatalf("read %d: %v", i, err)
		}
		if got.Data["n"] != strconv.Itoa(i) || got.ResourceVersion != cm.ResourceVersion {
			t.Fatalf("read %d after write %s got n=%s at %s", i, cm.ResourceVersion, got.Data["n"], got.ResourceVersion)
		}
	}
	t.Logf("1000 update-then-read pairs held; a plain cache read right after the write was stale %d times", stale)

	// The object a read returns is the cache's own: writing it is refused,
	// writing a copy is not.
	shared, err := cc.Get(ctx, "default", "ryw")
	if err != nil {
		t.Fatal(err)
	}
	shared.Data["n"] = "changed in place" // the mistake the check is for
	if _, err := cc.Update(ctx, shared, metav1.UpdateOptions{}); !errors.Is(err, cache.ErrCachedObject) {
		t.Fatalf("Update of the cache's own object: %v, want ErrCachedObject", err)
	}
	if _, err := cc.Create(ctx, shared, metav1.CreateOptions{}); !errors.Is(err, cache.ErrCachedObject) {
		t.Fatalf("Create from the cache's own object: %v, want ErrCachedObject", err)
	}
	if live, err := live.Get(ctx, "ryw", metav1.GetOptions{}); err != nil || live.Data["n"] != "1000" {
		t.Fatalf("the server has n=%q (%v) after refused writes, want 1000", live.Data["n"], err)
	}
	if cm, err = cc.Update(ctx, shared.DeepCopy(), metav1.UpdateOptions{}); err != nil {
		t.Fatalf("Update of a copy: %v", err)
	}

	if err := cc.Delete(ctx, cm, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cc.Get(ctx, "default", "ryw"); !apierrors.IsNotFound(err) {
		t.Fatalf("read after delete: %v, want NotFound", err)
	}

	// The client forgets each write once the cache shows it: after 200
	// objects created, updated and deleted, it remembers none.
	for i := range 200 {
		name := "gone-" + strconv.Itoa(i)
		c, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default"}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		c.Data = map[string]string{"x": "y"}
		if _, err := cc.Update(ctx, c, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := cc.Delete(ctx, c, metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	deadline := time.Now().Add(time.Minute)
	for cache.CachedClientPending(cc) > 0 && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if n := cache.CachedClientPending(cc); n != 0 {
		t.Errorf("the client still remembers %d writes the cache has shown", n)
	}
}

// TestReadYourWritesFailsRatherThanLies: with the informer stopped, a read
// after a write returns a StaleCacheError, not the old object.
func TestReadYourWritesFailsRatherThanLies(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFor(t, env)
	ctx := t.Context()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	live = live.Namespace("default")
	inf := cache.NewInformer(cache.ListWatch(live, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.ConfigMap]{})
	cc, err := cache.NewCachedClient(live, inf, cache.CachedClientOptions{Wait: 300 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	// The informer never runs: its cache stays empty.
	if _, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "lonely", Namespace: "default"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	_, err = cc.Get(ctx, "default", "lonely")
	var se *cache.StaleCacheError
	if !errors.As(err, &se) || !errors.Is(err, cache.ErrStaleCache) || se.Key != "default/lonely" {
		t.Fatalf("got %v; want a StaleCacheError for default/lonely", err)
	}
}

// TestDeleteSeenBeforeItsResponse: a Delete whose watch event reaches the
// cache before its response leaves nothing to wait for; one whose event
// comes after has reads wait for it. The server here answers a DELETE
// only once the test has decided which comes first.
func TestDeleteSeenBeforeItsResponse(t *testing.T) {
	cm := func(name, rv string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name, ResourceVersion: rv}}
	}
	feed := newFeed(&client.List[*corev1.ConfigMap]{ListMeta: metav1.ListMeta{ResourceVersion: "3"}, Items: []*corev1.ConfigMap{cm("before", "2"), cm("after", "3")}})
	inf := cache.NewInformer[*corev1.ConfigMap](feed, cache.InformerOptions[*corev1.ConfigMap]{})
	var cc *cache.CachedClient[*corev1.ConfigMap]
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		name := path.Base(r.URL.Path)
		if r.Method != http.MethodDelete {
			http.Error(w, "unexpected "+r.Method, http.StatusMethodNotAllowed)
			return
		}
		if name == "before" {
			// The watch event beats the response: answer only once the
			// client has seen it.
			feed.send(watch.Deleted, cm(name, "4"))
			for deadline := time.Now().Add(time.Minute); !cache.CachedClientSawDelete(cc, "default/"+name); {
				if time.Now().After(deadline) {
					t.Error("the client never saw the delete's watch event")
					break
				}
				time.Sleep(time.Millisecond)
			}
		}
		w.Header().Set("Content-Type", "application/json")
		_, _ = io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Success"}`)
	}))
	defer srv.Close()
	rc, err := rest.New(config.Config{Host: srv.URL}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	live = live.Namespace("default")
	if cc, err = cache.NewCachedClient(live, inf, cache.CachedClientOptions{Wait: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = inf.Start(ctx) })
	defer func() { stop(); wg.Wait() }()
	if err := cache.WaitForCacheSync(ctx, inf); err != nil {
		t.Fatal(err)
	}

	if err := cc.Delete(ctx, cm("before", ""), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := cache.CachedClientPending(cc); n != 0 {
		t.Errorf("after a delete the cache saw before its response, the client waits for %d writes, want 0", n)
	}
	if _, err := cc.Get(ctx, "default", "before"); !apierrors.IsNotFound(err) {
		t.Errorf("read after the delete: %v, want NotFound", err)
	}

	if err := cc.Delete(ctx, cm("after", ""), metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if n := cache.CachedClientPending(cc); n != 1 {
		t.Errorf("after a delete the cache has not seen, the client waits for %d writes, want 1", n)
	}
	// The cache still has the object: a read fails rather than return it.
	var stale *cache.StaleCacheError
	if _, err := cc.Get(ctx, "default", "after"); !errors.As(err, &stale) {
		t.Errorf("read before the cache saw the delete: %v, want a StaleCacheError", err)
	}
	feed.send(watch.Deleted, cm("after", "5"))
	for deadline := time.Now().Add(time.Minute); ; {
		_, err := cc.Get(ctx, "default", "after")
		if apierrors.IsNotFound(err) {
			break
		}
		if !errors.As(err, &stale) || time.Now().After(deadline) {
			t.Fatalf("read once the watch sent the delete: %v, want NotFound", err)
		}
	}
}

// TestCachedClientBeforeWrite: the hook sees, and may change, what Create
// and Update send; its error stops the write.
func TestCachedClientBeforeWrite(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFor(t, env)
	ctx := t.Context()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	live = live.Namespace("default")
	inf := cache.NewInformer(cache.ListWatch(live, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.ConfigMap]{})
	refused := errors.New("refused by the hook")
	cc, err := cache.NewCachedClient(live, inf, cache.CachedClientOptions{BeforeWrite: func(_ context.Context, obj client.Object) error {
		if obj.GetName() == "refused" {
			return refused
		}
		obj.SetLabels(map[string]string{"stamped": "yes"})
		return nil
	}})
	if err != nil {
		t.Fatal(err)
	}
	out, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "stamped", Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if out.Labels["stamped"] != "yes" {
		t.Errorf("created with labels %v, want the hook's", out.Labels)
	}
	if _, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "refused", Namespace: "default"}}, metav1.CreateOptions{}); !errors.Is(err, refused) {
		t.Errorf("Create = %v, want the hook's error", err)
	}
	if _, err := live.Get(ctx, "refused", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("Get of the refused ConfigMap = %v, want NotFound", err)
	}
	out.Labels = nil
	if out, err = cc.Update(ctx, out, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if out.Labels["stamped"] != "yes" {
		t.Errorf("updated with labels %v, want the hook's", out.Labels)
	}
}

// TestCachedClientByIndex reads ConfigMaps of two namespaces, filed by a
// label's value without their namespace, by index through the client, as
// a reconciler that takes a client.IndexedReader does.
func TestCachedClientByIndex(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	rc := restFor(t, env)
	ctx := t.Context()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	for _, ns := range []string{"idx-a", "idx-b"} {
		nsc, _ := client.For[corev1.Namespace](rc, client.Options{})
		if _, err := nsc.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	inf := cache.NewInformer(cache.ListWatch(live, cache.ListWatchOptions{}), cache.InformerOptions[*corev1.ConfigMap]{})
	cc, err := cache.NewCachedClient(live, inf, cache.CachedClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if err := cc.AddIndexer("app", func(cm *corev1.ConfigMap) ([]string, error) {
		if v, ok := cm.Labels["app"]; ok {
			return []string{v}, nil
		}
		return nil, nil
	}); err != nil {
		t.Fatal(err)
	}
	ictx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	wg.Go(func() { _ = inf.Start(ictx) })
	defer func() { stop(); wg.Wait() }()
	if err := cache.WaitForCacheSync(ctx, inf); err != nil {
		t.Fatal(err)
	}
	for _, c := range []struct{ ns, name, app string }{{"idx-a", "one", "web"}, {"idx-a", "two", "db"}, {"idx-b", "three", "web"}} {
		if _, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: c.ns, Name: c.name, Labels: map[string]string{"app": c.app}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// Get waits for the cache to hold this client's write.
		if _, err := cc.Get(ctx, c.ns, c.name); err != nil {
			t.Fatal(err)
		}
	}
	var r client.IndexedReader[*corev1.ConfigMap] = cc
	for _, c := range []struct {
		ns   string
		want int
	}{{"idx-a", 1}, {"idx-b", 1}, {"", 2}} {
		got, err := r.ByIndex(ctx, c.ns, "app", "web")
		if err != nil {
			t.Fatal(err)
		}
		if len(got) != c.want {
			t.Errorf("ByIndex(%q, app, web): %d objects, want %d", c.ns, len(got), c.want)
		}
		for _, cm := range got {
			if c.ns != "" && cm.Namespace != c.ns {
				t.Errorf("ByIndex(%q, app, web) returned %s/%s", c.ns, cm.Namespace, cm.Name)
			}
		}
	}
	if _, err := r.ByIndex(ctx, "idx-a", "nope", "web"); !errors.Is(err, cache.ErrNoSuchIndex) {
		t.Errorf("an unknown index: got %v, want ErrNoSuchIndex", err)
	}
}
