package manager_test

import (
	"context"
	"net/http"
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

// lonely is a ring of two shards, "a" and "b", in which only "a" runs:
// "b" and the leader are Leases held for an hour by processes that do
// not exist. Nothing but a's controller moves objects.
type lonely struct {
	ns, ring string
	cms      *client.Client[*corev1.ConfigMap]
	secrets  *client.Client[*corev1.Secret]
	names    map[string]string // shard -> a ConfigMap name the ring gives it
	// leaseDuration and renewDeadline are a's shard Lease's. A write of a
	// must end within renewDeadline of the renewal before it (its fence).
	leaseDuration, renewDeadline time.Duration
}

func newLonely(t *testing.T, ns, ring string) *lonely {
	t.Helper()
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	for name, holder := range map[string]string{ring + "-b": "b", ring + "-leader": "elsewhere"} {
		dur, now := int32(3600), metav1.NewMicroTime(time.Now())
		var labels map[string]string
		if holder == "b" {
			labels = map[string]string{shard.RingLabel: ring}
		}
		if _, err := leases.Namespace(ns).Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l := &lonely{ns: ns, ring: ring, names: map[string]string{}, leaseDuration: 3 * time.Second, renewDeadline: 2 * time.Second}
	l.cms, _ = client.For[corev1.ConfigMap](rc, client.Options{})
	l.cms = l.cms.Namespace(ns)
	l.secrets, _ = client.For[corev1.Secret](rc, client.Options{})
	l.secrets = l.secrets.Namespace(ns)
	r := shard.NewRing([]string{"a", "b"}, shard.RingOptions{})
	for i := 0; len(l.names) < 2; i++ {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "cm-" + string(rune('a'+i)), Namespace: ns}}
		s, _ := r.Shard(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, cm))
		if _, ok := l.names[s]; !ok {
			l.names[s] = cm.Name
		}
	}
	return l
}

// create makes a ConfigMap labelled with shard on.
func (l *lonely) create(t *testing.T, name, on string) *corev1.ConfigMap {
	t.Helper()
	cm, err := l.cms.Create(t.Context(), &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{shard.Label(l.ring): on}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return cm
}

// secretOf makes a Secret owned by owner, labelled with shard on.
func (l *lonely) secretOf(t *testing.T, name string, owner *corev1.ConfigMap, on string) {
	t.Helper()
	s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: l.ns, Labels: map[string]string{shard.Label(l.ring): on}}}
	if err := controller.SetControllerReference(owner, s); err != nil {
		t.Fatal(err)
	}
	if _, err := l.secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
}

// on reports whether the Secret name is labelled with shard want.
func (l *lonely) on(t *testing.T, name, want string) func() bool {
	return func() bool {
		s, err := l.secrets.Get(t.Context(), name, metav1.GetOptions{})
		return err == nil && s.Labels[shard.Label(l.ring)] == want
	}
}

// start runs replica "a", a manager whose ConfigMap controller owns
// Secrets, over transport (nil: the default); reconciled receives the
// names it reconciles.
func (l *lonely) start(t *testing.T, transport http.RoundTripper) (reconciled chan string) {
	t.Helper()
	c := cfg(t)
	mgr, err := manager.New(manager.Options{
		Config: &c, Namespace: l.ns, Logger: testLogger(t, "a"), Transport: transport,
		Sharding: manager.Sharding{
			Ring: l.ring, Namespace: l.ns, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Secret"}}, Identity: "a",
			LeaseDuration: l.leaseDuration, RenewDeadline: l.renewDeadline, RetryPeriod: 300 * time.Millisecond,
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	reconciled = make(chan string, 16)
	ctrl := controller.New[corev1.ConfigMap](mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		select {
		case reconciled <- cm.Name:
		default:
		}
		return controller.Result{}, nil
	}, controller.Options{})
	ctrl.Owns(manager.CachedClient[corev1.Secret](mgr))
	ctx, cancel := context.WithCancel(context.Background())
	rep := &replica{id: "a", mgr: mgr, ctrl: ctrl, cancel: cancel, done: make(chan error, 1)}
	go func() { rep.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { rep.stop(t) })
	return reconciled
}

// TestShardedStrayFollowsItsOwner checks that an owned object reaching a
// shard's cache after its owner has left that shard (a reconcile created
// it just before the owner was released, and its watch event came late)
// follows the owner at once, moved by the shard that holds it.
func TestShardedStrayFollowsItsOwner(t *testing.T) {
	l := newLonely(t, "shard-stray", "stray")
	l.create(t, l.names["a"], "a")
	gone := l.create(t, l.names["b"], "b") // left "a" before the test begins
	reconciled := l.start(t, nil)
	select {
	case name := <-reconciled:
		if name != l.names["a"] {
			t.Fatalf("replica a reconciled %s, which is not on its shard", name)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("replica a did not reconcile its ConfigMap")
	}
	// a's controller may start before a sees itself on the ring, which
	// then holds b only; it must not give its objects away meanwhile
	// (shard.TestNextOnlyOnTheRing checks this without the race).
	if cm, err := l.cms.Get(t.Context(), l.names["a"], metav1.GetOptions{}); err != nil || cm.Labels[shard.Label(l.ring)] != "a" {
		t.Fatalf("a's ConfigMap: %v, labels %v; want it kept on a", err, cm.GetLabels())
	}
	kept, err := l.cms.Get(t.Context(), l.names["a"], metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// The late owned object: still labelled with "a", owned by the
	// ConfigMap that has moved to "b". And one that stays: owned by the
	// ConfigMap that "a" holds.
	l.secretOf(t, "late", gone, "a")
	l.secretOf(t, "kept", kept, "a")
	eventually(t, "the late Secret to follow its owner to shard b", l.on(t, "late", "b"))
	// "kept" was created after "late", and reached the cache with it:
	// both have been seen once "late" has moved.
	if !l.on(t, "kept", "a")() {
		t.Error("the Secret of a's own ConfigMap left a")
	}
}

// TestShardedStrayFollowsAnOwnerBeingReleased checks the same while the
// owner is still in the old shard's cache: its release has looked for
// what it owns and is writing its label (held here), when the owned
// object arrives. The object must move while the write is held: a
// release that fails is retried, and the retry finds the object in the
// cache, so a move after that proves nothing.
func TestShardedStrayFollowsAnOwnerBeingReleased(t *testing.T) {
	l := newLonely(t, "shard-stray-held", "held")
	l.leaseDuration, l.renewDeadline = time.Minute, 50*time.Second // the fence lets the held write wait
	owner := l.create(t, l.names["b"], "a")                        // on a, and the ring gives it to b
	c := cfg(t)
	base, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	hold := &holdPatches{next: base.HTTPClient().Transport, path: "/configmaps/" + owner.Name, held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(hold.let)
	l.start(t, hold)
	select {
	case <-hold.held:
	case <-time.After(2 * time.Minute):
		t.Fatal("replica a did not release the ConfigMap that the ring gives to b")
	}
	l.secretOf(t, "late", owner, "a")
	eventually(t, "the late Secret to follow its owner, being released, to shard b", l.on(t, "late", "b"))
	if hold.returned.Load() {
		t.Fatal("the Secret moved only after the owner's held release had ended (failed and retried)")
	}
	hold.let()
	eventually(t, "the owner to reach b", func() bool {
		cm, err := l.cms.Get(t.Context(), owner.Name, metav1.GetOptions{})
		return err == nil && cm.Labels[shard.Label(l.ring)] == "b"
	})
}

// holdPatches holds the PATCH requests whose path ends with path until
// let is called; held is closed when the first arrives, and returned is
// set when one ends.
type holdPatches struct {
	next          http.RoundTripper
	path          string
	held, release chan struct{}
	returned      atomic.Bool
	heldOnce      sync.Once
	letOnce       sync.Once
}

func (h *holdPatches) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method == http.MethodPatch && strings.HasSuffix(req.URL.Path, h.path) {
		h.heldOnce.Do(func() { close(h.held) })
		defer h.returned.Store(true)
		select {
		case <-h.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
	}
	return h.next.RoundTrip(req)
}

func (h *holdPatches) let() { h.letOnce.Do(func() { close(h.release) }) }
