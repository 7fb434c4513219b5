package cache_test

import (
	"context"
	"errors"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// referencedSetup starts a factory whose Secret client is referenced-only,
// over a REST client that counts the GETs of single Secrets.
func referencedSetup(t *testing.T, env *testenv.Env, ccopts cache.CachedClientOptions) (*cache.CachedClient[*corev1.Secret], *atomic.Int64) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	gets := new(atomic.Int64)
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf, Observer: rest.ObserverFunc(func(_ context.Context, info rest.RequestInfo) {
		if info.Method == "GET" && info.Resource == "secrets" && strings.Count(info.Path, "/secrets/") == 1 {
			gets.Add(1)
		}
	})})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	f := cache.NewFactory(rc, cache.FactoryOptions{})
	cc, err := cache.CachedClientFor[corev1.Secret](f, cache.InformerForOptions{Namespace: "default", ReferencedOnly: true}, ccopts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, stop := context.WithCancel(t.Context())
	var wg sync.WaitGroup
	wg.Go(func() { _ = f.Start(ctx) })
	t.Cleanup(func() { stop(); f.Shutdown(); wg.Wait() })
	if err := f.WaitForCacheSync(t.Context()); err != nil {
		t.Fatal(err)
	}
	return cc, gets
}

func envClient[E any, T interface {
	*E
	client.Object
}](t *testing.T, env *testenv.Env) *client.Client[T] {
	t.Helper()
	c, err := client.For[E, T](restFor(t, env), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func rvOf(o client.Object) uint64 {
	n, _ := strconv.ParseUint(o.GetResourceVersion(), 10, 64)
	return n
}

func secret(name string, n int) *corev1.Secret {
	return &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: "default", Labels: map[string]string{"set": "ref"}},
		Data:       map[string][]byte{"n": []byte(strconv.Itoa(n)), "pad": make([]byte, 4096)},
	}
}

// TestReferencedOnly: a referenced-only Secret client holds nothing in
// full until a read, fetches an object once, serves later reads from what
// it holds, lets go of it when the watch reports a change or a delete,
// and gives handlers metadata.
func TestReferencedOnly(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	live := envClient[corev1.Secret](t, env).Namespace("default")
	for i := range 5 {
		if _, err := live.Create(ctx, secret("ref-"+strconv.Itoa(i), 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cc, gets := referencedSetup(t, env, cache.CachedClientOptions{})
	var events atomic.Int64
	var notMeta atomic.Value
	if _, err := cc.AddObjectHandler(cache.HandlerFuncs[client.Object]{Update: func(_, o client.Object) {
		if _, ok := o.(*metav1.PartialObjectMetadata); !ok {
			notMeta.Store(o)
		}
		events.Add(1)
	}}, cache.HandlerOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(func() bool { return len(cc.Metadata().Indexer().List()) >= 5 })
	if n := cc.Held(); n != 0 {
		t.Fatalf("held %d full objects before any read", n)
	}

	got, err := cc.Get(ctx, "default", "ref-1")
	if err != nil || string(got.Data["n"]) != "0" || len(got.Data["pad"]) != 4096 {
		t.Fatalf("first read: %v, %v", got, err)
	}
	for range 10 {
		if _, err := cc.Get(ctx, "default", "ref-1"); err != nil {
			t.Fatal(err)
		}
	}
	if g, h := gets.Load(), cc.Held(); g != 1 || h != 1 {
		t.Fatalf("after 11 reads of one Secret: %d GETs and %d held, want 1 and 1", g, h)
	}

	// A change reported by the watch lets the held object go; the next
	// read fetches the new one.
	changed := got.DeepCopy()
	changed.Data["n"] = []byte("1")
	changed, err = live.Update(ctx, changed, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	eventually(func() bool { return events.Load() > 0 })
	if o := notMeta.Load(); o != nil {
		t.Fatalf("a handler was given %T, want *metav1.PartialObjectMetadata", o)
	}
	if n := cc.Held(); n != 0 {
		t.Fatalf("held %d after the watch reported a change, want 0", n)
	}
	got, err = cc.Get(ctx, "default", "ref-1")
	if err != nil || string(got.Data["n"]) != "1" || got.ResourceVersion != changed.ResourceVersion {
		t.Fatalf("read after change: %v %v", got, err)
	}
	if g := gets.Load(); g != 2 {
		t.Fatalf("%d GETs, want 2", g)
	}

	// Writes through the client are read back, as with a full cache.
	next := got.DeepCopy()
	next.Data["n"] = []byte("2")
	if _, err := cc.Update(ctx, got, metav1.UpdateOptions{}); !errors.Is(err, cache.ErrCachedObject) {
		t.Fatalf("update of the held object: %v, want ErrCachedObject", err)
	}
	wrote, err := cc.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got, err = cc.Get(ctx, "default", "ref-1"); err != nil || rvOf(got) < rvOf(wrote) {
		t.Fatalf("read after own write at %s: %v %v", wrote.ResourceVersion, got, err)
	}

	// List selects on metadata and returns full objects.
	all, err := cc.List(ctx, "default", labels.SelectorFromSet(labels.Set{"set": "ref"}))
	if err != nil || len(all) != 5 {
		t.Fatalf("List: %d objects, %v", len(all), err)
	}
	for _, s := range all {
		if len(s.Data["pad"]) != 4096 {
			t.Fatalf("List returned %s without its data", s.Name)
		}
	}

	// A delete lets go, and the read reports NotFound.
	if err := live.Delete(ctx, "ref-1", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(func() bool { _, ok := cc.Metadata().Indexer().Get("default/ref-1"); return !ok })
	if _, err := cc.Get(ctx, "default", "ref-1"); !apierrors.IsNotFound(err) {
		t.Fatalf("read after delete: %v, want NotFound", err)
	}
	if n := cc.Held(); n != 4 {
		t.Fatalf("held %d after the delete, want the 4 left", n)
	}

	// Full-object indexes cannot be kept; metadata ones can.
	if err := cc.AddIndexer("x", func(*corev1.Secret) ([]string, error) { return nil, nil }); !errors.Is(err, cache.ErrReferencedOnly) {
		t.Fatalf("AddIndexer: %v, want ErrReferencedOnly", err)
	}
	if cc.Informer() != nil {
		t.Fatal("a referenced-only client has a full informer")
	}
}

// TestReferencedEviction: objects no read asked for within EvictAfter are
// let go; their metadata stays.
func TestReferencedEviction(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	live := envClient[corev1.Secret](t, env).Namespace("default")
	for _, name := range []string{"old", "new"} {
		if _, err := live.Create(ctx, secret(name, 0), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cc, _ := referencedSetup(t, env, cache.CachedClientOptions{EvictAfter: 200 * time.Millisecond})
	eventually(func() bool { return len(cc.Metadata().Indexer().List()) >= 2 })
	if _, err := cc.Get(ctx, "default", "old"); err != nil {
		t.Fatal(err)
	}
	// Reading "new" again and again keeps it, and the sweeps these reads
	// make let "old" go.
	eventually(func() bool {
		if _, err := cc.Get(ctx, "default", "new"); err != nil {
			t.Fatal(err)
		}
		return cc.Held() == 1
	})
	if _, err := cc.Get(ctx, "default", "old"); err != nil {
		t.Fatalf("an evicted object must be fetched again: %v", err)
	}
}

// TestReferencedNeverOlderThanMetadata: while a writer updates a Secret
// 300 times, readers that note the cached metadata's resourceVersion and
// then read the object never get an older one, nor data that does not
// belong to the version they got.
func TestReferencedNeverOlderThanMetadata(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	live := envClient[corev1.Secret](t, env).Namespace("default")
	s, err := live.Create(ctx, secret("racy", 0), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc, gets := referencedSetup(t, env, cache.CachedClientOptions{})
	eventually(func() bool { _, ok := cc.Metadata().Indexer().Get("default/racy"); return ok })

	written := sync.Map{} // resourceVersion -> n
	written.Store(s.ResourceVersion, "0")
	done := make(chan struct{})
	var reads, older atomic.Int64
	var wg sync.WaitGroup
	for range 4 {
		wg.Go(func() {
			for {
				select {
				case <-done:
					return
				default:
				}
				m, ok := cc.Metadata().Indexer().Get("default/racy")
				if !ok {
					t.Error("metadata gone")
					return
				}
				got, err := cc.Get(ctx, "default", "racy")
				if err != nil {
					t.Error(err)
					return
				}
				reads.Add(1)
				if rvOf(got) < rvOf(m) {
					older.Add(1)
					t.Errorf("read %s after the cache's metadata had %s", got.ResourceVersion, m.ResourceVersion)
				}
				if n, ok := written.Load(got.ResourceVersion); ok && n.(string) != string(got.Data["n"]) {
					t.Errorf("version %s read with n=%s, written with n=%s", got.ResourceVersion, got.Data["n"], n)
				}
			}
		})
	}
	for i := 1; i <= 300; i++ {
		next := s.DeepCopy()
		next.Data["n"] = []byte(strconv.Itoa(i))
		if s, err = live.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		written.Store(s.ResourceVersion, strconv.Itoa(i))
	}
	eventually(func() bool {
		m, _ := cc.Metadata().Indexer().Get("default/racy")
		return m != nil && m.ResourceVersion == s.ResourceVersion
	})
	close(done)
	wg.Wait()
	got, err := cc.Get(ctx, "default", "racy")
	if err != nil || string(got.Data["n"]) != "300" {
		t.Fatalf("last read: %v %v", got, err)
	}
	t.Logf("%d reads during 300 updates, %d GETs, %d older than the metadata", reads.Load(), gets.Load(), older.Load())
}
