package manager_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"regexp"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

// TestShardedOwnerWaitsForItsBucket checks that a replica does not
// reconcile an owner that reaches its cache before its informers of every
// sharded kind hold the owner's bucket: the ring gives replica "a" b's
// buckets when "b" leaves, and a's list of those buckets' Secrets is held
// while the list of their ConfigMaps brings the owner. The reconcile must
// wait for the Secrets' list, and then find the owner's Secret.
func TestShardedOwnerWaitsForItsBucket(t *testing.T) {
	const ns, ring = "shard-cover", "cover"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	leases = leases.Namespace(ns)
	// "b" and the leader are held for an hour by processes that do not
	// exist; b claims no bucket.
	for name, holder := range map[string]string{ring + "-b": "b", ring + "-leader": "elsewhere"} {
		dur, now := int32(3600), metav1.NewMicroTime(time.Now())
		var labels map[string]string
		if holder == "b" {
			labels = map[string]string{shard.RingLabel: ring}
		}
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	secrets, _ := client.For[corev1.Secret](rc, client.Options{})
	secrets = secrets.Namespace(ns)
	// mine is a's from the start; moving is b's until b leaves.
	both := shard.NewRing([]string{"a", "b"}, shard.RingOptions{})
	names := map[string]string{}
	for i := 0; len(names) < 2; i++ {
		name := "cm-" + strconv.Itoa(i)
		s, _ := both.Shard(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, &metav1.ObjectMeta{Namespace: ns, Name: name}))
		if _, ok := names[s]; !ok {
			names[s] = name
		}
	}
	mine, moving := names["a"], names["b"]
	for on, name := range map[string]string{"a": mine, "b": moving} {
		b := strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, &metav1.ObjectMeta{Namespace: ns, Name: name})))
		if _, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.BucketLabel(ring): b, "on": on}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	owner, err := cms.Get(t.Context(), moving, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: moving, Namespace: ns}}
	if err := controller.SetControllerReference(owner, sec); err != nil {
		t.Fatal(err)
	}
	sec.Labels = map[string]string{shard.BucketLabel(ring): strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "Secret"}, sec)))}
	if _, err := secrets.Create(t.Context(), sec, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	hold := &holdBucketLists{next: rc.HTTPClient().Transport, label: shard.BucketLabel(ring), resource: "/secrets", held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(hold.let)
	mgr, err := manager.New(manager.Options{
		Config: &c, Namespace: ns, Logger: testLogger(t, "a"), Transport: hold,
		Sharding: manager.Sharding{
			Ring: ring, Namespace: ns, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Secret"}}, Identity: "a",
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	cached := manager.CachedClient[corev1.Secret](mgr)
	var reconciled sync.Map // name -> whether its Secret was cached, at the last reconcile
	ctrl := controller.New[corev1.ConfigMap](mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		_, err := cached.Get(ctx, cm.Namespace, cm.Name)
		reconciled.Store(cm.Name, err == nil)
		return controller.Result{}, nil
	}, controller.Options{})
	ctrl.Owns(cached)
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{id: "a", mgr: mgr, ctrl: ctrl, cancel: cancel, done: make(chan error, 1)}
	go func() { rep.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { rep.stop(t) })

	eventually(t, "replica a to reconcile its own ConfigMap", func() bool {
		_, ok := reconciled.Load(mine)
		return ok
	})
	// Every call of the reconciler, refused or not, counts as a success.
	calls := func() int {
		rec := httptest.NewRecorder()
		mgr.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
		m := regexp.MustCompile(`controller_runtime_reconcile_total\{controller="configmap",result="success"\} ([0-9]+)`).FindStringSubmatch(rec.Body.String())
		if m == nil {
			return 0
		}
		n, _ := strconv.Atoi(m[1])
		return n
	}
	before := calls()
	hold.armed.Store(true)
	if err := leases.Delete(t.Context(), ring+"-b", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-hold.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("replica a did not list the Secrets of its new buckets")
	}
	// The owner reaches a's cache through the list of ConfigMaps; a must
	// not reconcile it while the list of Secrets is held.
	eventually(t, "the owner in replica a's cache", func() bool {
		_, ok := ctrl.Informer().Indexer().Get(ns + "/" + moving)
		return ok
	})
	eventually(t, "replica a to take the owner's key from its queue", func() bool { return calls() > before })
	if hadSecret, ok := reconciled.Load(moving); ok {
		t.Fatalf("the owner was reconciled while its bucket's Secrets were being listed (its Secret cached: %v)", hadSecret)
	}
	if mgr.Shard().Held()[shard.Bucket(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, owner))] != 0 {
		t.Fatal("replica a took the owner's bucket before its Secrets were listed")
	}
	hold.let()
	eventually(t, "replica a to reconcile the owner after the list", func() bool {
		_, ok := reconciled.Load(moving)
		return ok
	})
	if hadSecret, _ := reconciled.Load(moving); !hadSecret.(bool) {
		t.Error("the owner's reconcile did not find its Secret in the cache")
	}
}

// holdBucketLists holds, once armed, the requests for resource that list
// or watch by label, until let is called; held is closed when the first
// arrives.
type holdBucketLists struct {
	next          http.RoundTripper
	label         string
	resource      string
	armed         atomic.Bool
	held, release chan struct{}
	heldOnce      sync.Once
	letOnce       sync.Once
}

func (h *holdBucketLists) RoundTrip(req *http.Request) (*http.Response, error) {
	if h.armed.Load() && req.Method == http.MethodGet && strings.Contains(req.URL.Path, h.resource) && strings.Contains(req.URL.Query().Get("labelSelector"), h.label) {
		h.heldOnce.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.next.RoundTrip(req)
}

func (h *holdBucketLists) let() { h.letOnce.Do(func() { close(h.release) }) }
