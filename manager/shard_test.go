package manager_test

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strconv"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

// reconcileLog records which replica reconciles which key, and counts
// reconciles of one key by two replicas at once.
type reconcileLog struct {
	mu       sync.Mutex
	active   map[string]string // key -> replica reconciling it now
	seen     map[string]string // key -> the data value last reconciled
	by       map[string]string // key -> the replica that last reconciled it
	overlaps []string

	// Once check is set, reconciles of an owner whose Secret exists but is
	// not in the replica's cache are recorded in early: an owner that
	// arrived at its new shard before what it owns.
	check   bool
	created map[string]bool // key -> its Secret exists
	early   []string
	step    string         // the step under way, named in early
	perStep map[string]int // early reconciles per step
}

// owned records whether the Secret of key was in the replica's cache.
func (l *reconcileLog) owned(replica, key string, cached bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.check && l.created[key] && !cached {
		l.early = append(l.early, replica+" "+key+" ("+l.step+")")
		l.perStep[l.step]++
	}
}

// made records that the Secret of key exists.
func (l *reconcileLog) made(key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	l.created[key] = true
}

func (l *reconcileLog) start(replica, key string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if other, ok := l.active[key]; ok && other != replica {
		l.overlaps = append(l.overlaps, fmt.Sprintf("%s by %s and %s", key, other, replica))
	}
	l.active[key] = replica
}

func (l *reconcileLog) end(replica, key, value string) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.active[key] == replica {
		delete(l.active, key)
	}
	l.seen[key], l.by[key] = value, replica
}

// replica is one sharded manager of the test.
type replica struct {
	id     string
	mgr    *manager.Manager
	ctrl   *controller.Controller[*corev1.ConfigMap]
	cancel context.CancelFunc
	done   chan error
}

// TestShardedManagers runs replicas of one sharded manager, each
// reconciling the ConfigMaps of its shard and owning a Secret per
// ConfigMap, through the sequence 1 -> 3 -> 2 replicas (one leaves
// gracefully), with a shard that joins and dies on the way. After each
// step every object carries its bucket, each replica's informers hold the
// objects of its buckets only (owned Secrets with their owners), the
// latest change of every ConfigMap is reconciled by its shard, and no key
// is ever reconciled by two replicas at once.
func TestShardedManagers(t *testing.T) {
	const n = 90
	ns := "shard-test"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	secrets, _ := client.For[corev1.Secret](rc, client.Options{})
	secrets = secrets.Namespace(ns)
	for i := range n {
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{Name: "cm-" + strconv.Itoa(i), Labels: map[string]string{"test": "shard"}},
			Data:       map[string]string{"v": "0"},
		}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
	}

	log := &reconcileLog{active: map[string]string{}, seen: map[string]string{}, by: map[string]string{}, created: map[string]bool{}, perStep: map[string]int{}}
	step := func(name string) {
		log.mu.Lock()
		log.step = name
		log.mu.Unlock()
	}
	kinds := []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Secret"}}
	start := func(id string) *replica {
		mgr, err := manager.New(manager.Options{
			Config: &c, Namespace: ns, Logger: testLogger(t, id),
			LeaderElection: manager.LeaderElection{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond},
			Sharding: manager.Sharding{
				Ring: "test", Namespace: ns, Kinds: kinds, Identity: id, SyncPeriod: 2 * time.Second,
				LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond,
			},
		})
		if err != nil {
			t.Fatal(err)
		}
		live, _ := client.For[corev1.Secret](mgr.REST(), client.Options{})
		cached := manager.CachedClient[corev1.Secret](mgr)
		reconcile := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
			key := cm.Namespace + "/" + cm.Name
			log.start(id, key)
			defer log.end(id, key, cm.Data["v"])
			_, err := cached.Get(ctx, cm.Namespace, cm.Name)
			log.owned(id, key, err == nil)
			time.Sleep(25 * time.Millisecond) // widen the window an overlap would need
			s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: cm.Name, Namespace: cm.Namespace, Labels: map[string]string{"test": cm.Labels["test"]}}}
			if err := controller.SetControllerReference(cm, s); err != nil {
				return controller.Result{}, err
			}
			if _, err := live.Create(ctx, s, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
				return controller.Result{}, err
			}
			log.made(key)
			return controller.Result{}, nil
		}
		ctrl := controller.New[corev1.ConfigMap](mgr, reconcile, controller.Options{Workers: 4})
		ctrl.Owns(manager.CachedClient[corev1.Secret](mgr))
		ctx, cancel := context.WithCancel(context.Background())
		r := &replica{id: id, mgr: mgr, ctrl: ctrl, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- mgr.Start(ctx) }()
		t.Cleanup(func() { r.stop(t) })
		return r
	}

	// settled checks the step's invariants for the live replicas; why
	// says what was still missing.
	var why string
	t.Cleanup(func() {
		if t.Failed() {
			t.Logf("last unmet condition: %s", why)
		}
	})
	settled := func(value string, rs ...*replica) func() bool {
		ids := make([]string, len(rs))
		for i, r := range rs {
			ids[i] = r.id
		}
		ring := shard.NewRing(ids, shard.RingOptions{})
		return func() bool {
			all, err := cms.List(t.Context(), metav1.ListOptions{LabelSelector: "test=shard"})
			if err != nil {
				why = err.Error()
				return false
			}
			want := map[string]int{}
			for _, cm := range all.Items {
				key := shard.Key(schema.GroupKind{Kind: "ConfigMap"}, cm)
				s, _ := ring.Shard(key)
				if got := cm.Labels[shard.BucketLabel("test")]; got != strconv.Itoa(shard.Bucket(key)) {
					why = fmt.Sprintf("%s is in bucket %q, not %d", cm.Name, got, shard.Bucket(key))
					return false
				}
				want[s]++
				log.mu.Lock()
				key = cm.Namespace + "/" + cm.Name
				seen, by := log.seen[key], log.by[key]
				log.mu.Unlock()
				if seen != value || by != s {
					why = fmt.Sprintf("%s: last reconcile saw %q, by %q", cm.Name, seen, by)
					return false
				}
			}
			sl, err := secrets.List(t.Context(), metav1.ListOptions{LabelSelector: "test=shard"})
			if err != nil || len(sl.Items) != n {
				why = fmt.Sprintf("secrets: %v, %d", err, len(sl.Items))
				return false
			}
			// Secrets carry their owner's bucket; each replica caches the
			// Secrets of its owners' buckets.
			wantSecrets := map[string]int{}
			for _, s := range sl.Items {
				b := shard.Bucket(shard.Key(schema.GroupKind{Kind: "Secret"}, s))
				if got := s.Labels[shard.BucketLabel("test")]; got != strconv.Itoa(b) {
					why = fmt.Sprintf("secret %s is in bucket %q, not %d", s.Name, got, b)
					return false
				}
				owner, _ := ring.Owner(b)
				wantSecrets[owner]++
			}
			for _, r := range rs {
				got := 0
				for _, s := range manager.CachedClient[corev1.Secret](r.mgr).Informer().Indexer().List() {
					if s.Labels["test"] == "shard" {
						got++
					}
				}
				if got != wantSecrets[r.id] {
					why = fmt.Sprintf("replica %s caches %d Secrets, not %d", r.id, got, wantSecrets[r.id])
					return false
				}
			}
			// Every replica also holds the namespace's kube-root-ca.crt, or not.
			for _, r := range rs {
				if got := len(r.ctrl.Informer().Indexer().List()) - holdsRootCA(r); got != want[r.id] {
					why = fmt.Sprintf("replica %s caches %d ConfigMaps, not %d", r.id, got, want[r.id])
					return false
				}
			}
			return true
		}
	}
	update := func(value string) {
		for i := range n {
			name := "cm-" + strconv.Itoa(i)
			for {
				cm, err := cms.Get(t.Context(), name, metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				cm.Data["v"] = value
				if _, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{}); err == nil {
					break
				} else if !apierrors.IsConflict(err) {
					t.Fatal(err)
				}
			}
		}
	}

	// Keep changing the ConfigMaps while replicas come and go, so that
	// reconciles are under way whenever an object moves.
	bumpCtx, stopBumps := context.WithCancel(t.Context())
	bumped := make(chan struct{})
	go func() {
		defer close(bumped)
		for i := 0; bumpCtx.Err() == nil; i++ {
			cm, err := cms.Get(bumpCtx, "cm-"+strconv.Itoa(i%n), metav1.GetOptions{})
			if err != nil {
				continue
			}
			cm.Data["bump"] = strconv.Itoa(i)
			_, _ = cms.Update(bumpCtx, cm, metav1.UpdateOptions{})
		}
	}()
	defer func() { stopBumps(); <-bumped }()

	a := start("a")
	eventually(t, "one replica to hold and reconcile everything", settled("0", a))
	update("1")
	eventually(t, "one replica to reconcile every change", settled("1", a))
	// From here on every Secret has its bucket: an owner that moves should
	// find its Secret in its new shard's cache, since a shard reconciles
	// an owner only once its informers hold the owner's bucket. The
	// Secret's informer and the owner's are separate watches, so a rare
	// owner can still come before a Secret created late.
	log.mu.Lock()
	log.check = true
	log.mu.Unlock()

	step("1 -> 3")
	b, cr := start("b"), start("c")
	eventually(t, "three replicas to share the objects", settled("1", a, b, cr))
	for _, r := range []*replica{a, b, cr} {
		if got := len(r.ctrl.Informer().Indexer().List()); got < n/3*8/10 || got > n/3*125/100 {
			t.Errorf("replica %s holds %d of %d ConfigMaps, outside 0.8-1.25 of a third", r.id, got, n)
		}
	}
	step("updates with 3")
	update("2")
	eventually(t, "three replicas to reconcile every change", settled("2", a, b, cr))

	// A shard that joins, claims its buckets and dies without leaving:
	// its Lease is never renewed. Its buckets are taken by no one until
	// its Lease expires, and then by the live shards.
	step("ghost")
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	withGhost := shard.NewRing([]string{"a", "b", "c", "ghost"}, shard.RingOptions{})
	ghost, dur, now := "ghost", int32(3), metav1.NewMicroTime(time.Now())
	if _, err := leases.Namespace(ns).Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{
			Name: "test-ghost", Labels: map[string]string{shard.RingLabel: "test"},
			Annotations: map[string]string{shard.ClaimsAnnotation: shard.EncodeClaims(withGhost.Buckets("ghost"))},
		},
		Spec: coordinationv1.LeaseSpec{HolderIdentity: &ghost, LeaseDurationSeconds: &dur, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the live shards to give the ghost its buckets", func() bool {
		for _, r := range []*replica{a, b, cr} {
			held := r.mgr.Shard().Held()
			for _, x := range withGhost.Buckets("ghost") {
				if held[x] != 0 {
					return false
				}
			}
		}
		return true
	})
	eventually(t, "the buckets of the dead shard to be taken", settled("2", a, b, cr))

	step("3 -> 2")
	b.stop(t)
	eventually(t, "two replicas to take over the leaving one's objects", settled("2", a, cr))
	update("3")
	eventually(t, "two replicas to reconcile every change", settled("3", a, cr))

	log.mu.Lock()
	defer log.mu.Unlock()
	if len(log.overlaps) > 0 {
		t.Errorf("%d overlapping reconciles, such as %s", len(log.overlaps), log.overlaps[0])
	}
	// Owners are counted, not their reconciles: an owner whose Secret
	// comes late is reconciled again at each of the test's changes to it,
	// as many times as the machine's load lets the changes run meanwhile.
	// Without the hand-over, most of the 60 owners that move do so.
	early := map[string]int{} // "replica key (step)" -> its reconciles
	for _, e := range log.early {
		early[e]++
	}
	if len(early) > n/10 {
		t.Errorf("%d owners reached their shard before their Secret (at most %d allowed for watch races), such as %s", len(early), n/10, log.early[0])
	}
	t.Logf("%d owners reached their shard before their Secret (%d reconciles of them), per step %v: %v", len(early), len(log.early), log.perStep, early)
}

// stop stops the replica gracefully, once.
func (r *replica) stop(t *testing.T) {
	t.Helper()
	if r.cancel == nil {
		return
	}
	r.cancel()
	r.cancel = nil
	select {
	case err := <-r.done:
		if err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("replica %s: %v", r.id, err)
		}
	case <-time.After(time.Minute):
		t.Errorf("replica %s did not stop", r.id)
	}
}

// testLogger logs to the test's output when LOOM_TEST_LOG is set.
func testLogger(t *testing.T, id string) *slog.Logger {
	if os.Getenv("LOOM_TEST_LOG") == "" {
		return nil
	}
	return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug})).With("replica", id)
}

// holdsRootCA is 1 if the replica caches the namespace's kube-root-ca.crt
// ConfigMap (made by kube-controller-manager, sharded like the others).
func holdsRootCA(r *replica) int {
	for _, cm := range r.ctrl.Informer().Indexer().List() {
		if cm.Name == "kube-root-ca.crt" {
			return 1
		}
	}
	return 0
}
