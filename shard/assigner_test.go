package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

// TestPassWritesToTheRingOfTheMoment: a pass that began while a shard was
// live does not move objects onto it once it has left. Here the pass
// moves the objects of a dead shard; its first write is held until the
// shard "leaving", which the pass's ring still holds, is gone from the
// ring. Every later write must give its object the shard "live". Before,
// each object got its shard from the ring the pass began with, so
// replicas that stopped together made a pass move objects onto those
// that had not left yet, and the next pass moved them again.
func TestPassWritesToTheRingOfTheMoment(t *testing.T) {
	const ns, ring, n = "default", "moment", 40
	cfg, plain, leases, members := liveShards(t, ns, ring, "live", "leaving")
	cms, _ := client.For[corev1.ConfigMap](plain, client.Options{})
	cms = cms.Namespace(ns)
	// Objects on a shard with no Lease, half of which the ring with both
	// live shards gives to "leaving".
	both := NewRing([]string{"live", "leaving"}, RingOptions{})
	toLeaving := 0
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("moment-%02d", i), Namespace: ns, Labels: map[string]string{Label(ring): "dead"}}}
		if s, _ := both.Shard(Key(schema.GroupKind{Kind: "ConfigMap"}, cm)); s == "leaving" {
			toLeaving++
		}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if toLeaving < 2 {
		t.Fatalf("only %d of %d objects go to the leaving shard on the first ring; pick other names", toLeaving, n)
	}

	hold := &holdFirstPatch{next: plain.HTTPClient().Transport, held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(hold.let)
	rc, err := rest.New(cfg, rest.Options{Transport: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	a, err := NewAssigner(rc, AssignerOptions{
		Ring: ring, Members: members, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}}, Mapper: discovery.MapperFor(rc),
		Namespace: ns, Workers: 1,
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Start)
	leaveWhileHeld(t, hold.held, hold.let, leases, members, ring, "leaving", "live")
	eventually(t, "every object on the shard live", func() bool {
		l, err := cms.List(t.Context(), metav1.ListOptions{LabelSelector: Label(ring) + "!=live"})
		return err == nil && len(l.Items) == 0
	})
	bodies := hold.sent()
	if len(bodies) < n-1 {
		t.Fatalf("%d label writes after the held one, want at least %d", len(bodies), n-1)
	}
	for _, b := range bodies {
		var ops []jsonPatchOp
		if err := json.Unmarshal([]byte(b), &ops); err != nil {
			t.Fatalf("a label write that is not a JSON patch: %s", b)
		}
		for _, op := range ops {
			if op.Op != "test" && op.Value == "leaving" {
				t.Errorf("after the shard left the ring, a write gave an object to it: %s", b)
			}
		}
	}
}

// holdFirstPatch holds the first PATCH until let is called (held is
// closed when it arrives) and records the bodies of those after it.
type holdFirstPatch struct {
	next          http.RoundTripper
	held, release chan struct{}
	heldOnce      sync.Once
	letOnce       sync.Once
	mu            sync.Mutex
	first         bool
	bodies        []string
}

func (h *holdFirstPatch) RoundTrip(req *http.Request) (*http.Response, error) {
	if req.Method != http.MethodPatch {
		return h.next.RoundTrip(req)
	}
	h.mu.Lock()
	first := !h.first
	h.first = true
	h.mu.Unlock()
	if first {
		h.heldOnce.Do(func() { close(h.held) })
		select {
		case <-h.release:
		case <-req.Context().Done():
			return nil, req.Context().Err()
		}
		return h.next.RoundTrip(req)
	}
	body, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, err
	}
	req.Body = io.NopCloser(bytes.NewReader(body))
	h.mu.Lock()
	h.bodies = append(h.bodies, string(body))
	h.mu.Unlock()
	return h.next.RoundTrip(req)
}

func (h *holdFirstPatch) let() { h.letOnce.Do(func() { close(h.release) }) }

func (h *holdFirstPatch) sent() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	return slices.Clone(h.bodies)
}

// TestPassSeesShardsLeaveDuringIt: a pass judges each page of objects by
// the ring of the moment the page arrives. Here the pass's first list is
// held until the shard "gone", live when the pass began, has left the
// ring; its objects must then move in that same pass. Before, a pass
// counted as live every shard that was live when it began, so when
// replicas stopped one after another its objects waited for the next
// pass, which began only once this one had made all its writes.
func TestPassSeesShardsLeaveDuringIt(t *testing.T) {
	const ns, ring, n = "shard-during", "during", 12
	// A namespace of its own: the assigner labels every object of the
	// kind there that has no label of its ring.
	cfg, plain, leases, members := liveShards(t, ns, ring, "stay", "gone")
	cms, _ := client.For[corev1.ConfigMap](plain, client.Options{})
	cms = cms.Namespace(ns)
	for i := range n {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("during-%02d", i), Namespace: ns, Labels: map[string]string{Label(ring): "gone"}}}
		if _, err := cms.Create(t.Context(), cm, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	hold := &holdFirstList{next: plain.HTTPClient().Transport, held: make(chan struct{}), release: make(chan struct{})}
	t.Cleanup(hold.let)
	rc, err := rest.New(cfg, rest.Options{Transport: hold})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	log := &passLog{}
	a, err := NewAssigner(rc, AssignerOptions{
		Ring: ring, Members: members, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}}, Mapper: discovery.MapperFor(rc),
		Namespace: ns, Metrics: log,
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Start)
	leaveWhileHeld(t, hold.held, hold.let, leases, members, ring, "gone", "stay")
	eventually(t, "every object on the shard that stays", func() bool {
		l, err := cms.List(t.Context(), metav1.ListOptions{LabelSelector: Label(ring) + "=gone"})
		return err == nil && len(l.Items) == 0
	})
	eventually(t, "a second pass", func() bool { return log.passes() >= 2 })
	if got := log.movesBeforeSecondPass(); got != n {
		t.Errorf("%d of the %d objects of the shard that left during the first pass moved in it, want all", got, n)
	}
}

// holdFirstList holds the first list of ConfigMaps that selects no label
// (a pass's; the watch of unassigned objects selects one) until let is
// called; held is closed when it arrives.
type holdFirstList struct {
	next          http.RoundTripper
	held, release chan struct{}
	once, letOnce sync.Once
}

func (h *holdFirstList) RoundTrip(req *http.Request) (*http.Response, error) {
	q := req.URL.Query()
	if req.Method == http.MethodGet && strings.HasSuffix(req.URL.Path, "/configmaps") && q.Get("labelSelector") == "" && q.Get("watch") == "" {
		first := false
		h.once.Do(func() { first = true })
		if first {
			close(h.held)
			select {
			case <-h.release:
			case <-req.Context().Done():
				return nil, req.Context().Err()
			}
		}
	}
	return h.next.RoundTrip(req)
}

func (h *holdFirstList) let() { h.letOnce.Do(func() { close(h.release) }) }

// passLog counts the assigner's passes (one ConfigMap kind: one
// ObserveObjects per pass) and the moves off shards that are gone made
// before the second pass's listing ended.
type passLog struct {
	mu          sync.Mutex
	n           int // passes whose listing has ended
	movesBefore int // moves seen while n < 2
}

func (p *passLog) ObserveRing(string, int)            {}
func (p *passLog) ObserveDrain(string, time.Duration) {}
func (p *passLog) ObserveMove(_, reason string) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if reason == "dead" && p.n < 2 {
		p.movesBefore++
	}
}

func (p *passLog) ObserveObjects(string, string, map[string]int) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.n++
}

func (p *passLog) passes() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.n
}

func (p *passLog) movesBeforeSecondPass() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.movesBefore
}

// liveShards creates in ns (made first, unless it is "default")
// hour-long Leases of ring for the shards ids. It returns the admin's
// config, a client on it, the Leases' client, and started Members that
// see every one of the shards live.
func liveShards(t *testing.T, ns, ring string, ids ...string) (config.Config, *rest.Client, *client.Client[*coordinationv1.Lease], *Members) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.CloseIdleConnections)
	if ns != "default" {
		nss, _ := client.For[corev1.Namespace](plain, client.Options{})
		if _, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	leases, _ := client.For[coordinationv1.Lease](plain, client.Options{})
	leases = leases.Namespace(ns)
	for _, id := range ids {
		holder, dur, now := id, int32(3600), metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: ring + "-" + id, Labels: map[string]string{RingLabel: ring}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	members, err := NewMembers(leases, MembersOptions{Ring: ring, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	eventually(t, "every shard on the ring", func() bool { return slices.Equal(members.Ring().Members(), slices.Sorted(slices.Values(ids))) })
	return cfg, plain, leases, members
}

// leaveWhileHeld waits for held (the assigner's request held back), then
// deletes the Lease of the shard gone, waits until members see only
// stays, and calls let to let the request go.
func leaveWhileHeld(t *testing.T, held <-chan struct{}, let func(), leases *client.Client[*coordinationv1.Lease], members *Members, ring, gone, stays string) {
	t.Helper()
	select {
	case <-held:
	case <-time.After(time.Minute):
		t.Fatal("the assigner sent nothing to hold")
	}
	if err := leases.Delete(t.Context(), ring+"-"+gone, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ring without the shard that left", func() bool { return slices.Equal(members.Ring().Members(), []string{stays}) })
	let()
}

// TestAssignerLabelsBucketKinds: for a kind selected by bucket, the
// assigner gives an object without a bucket label its owner's bucket
// (with no live shard needed), and its pass corrects a wrong bucket and
// removes a shard label left from before; it never gives such objects a
// shard label.
func TestAssignerLabelsBucketKinds(t *testing.T) {
	const ns, ring = "bucket-kinds", "bk"
	_, plain, _, members := liveShards(t, ns, ring, "one")
	secrets, _ := client.For[corev1.Secret](plain, client.Options{})
	secrets = secrets.Namespace(ns)
	cms, _ := client.For[corev1.ConfigMap](plain, client.Options{})
	owner, err := cms.Namespace(ns).Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "owner"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	yes := true
	ref := []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID, Controller: &yes}}
	secretGK := schema.GroupKind{Kind: "Secret"}
	for name, labels := range map[string]map[string]string{
		"unlabelled": nil,
		"wrong":      {BucketLabel(ring): "9999"},
		"old":        {Label(ring): "gone", BucketLabel(ring): "0"},
	} {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels, OwnerReferences: ref}}
		if _, err := secrets.Create(t.Context(), s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	want := strconv.Itoa(Bucket(Key(secretGK, &metav1.ObjectMeta{Namespace: ns, Name: "x", OwnerReferences: ref})))
	if want != strconv.Itoa(Bucket(Key(schema.GroupKind{Kind: "ConfigMap"}, owner))) {
		t.Fatal("an owned object's bucket is not its owner's")
	}
	a, err := NewAssigner(plain, AssignerOptions{
		Ring: ring, Members: members, Kinds: []schema.GroupKind{secretGK}, Mapper: discovery.MapperFor(plain),
		Namespace: ns, SyncPeriod: time.Second, ByBucket: func(gk schema.GroupKind) bool { return gk == secretGK },
	})
	if err != nil {
		t.Fatal(err)
	}
	run(t, a.Start)
	eventually(t, "every Secret in its owner's bucket, with no shard label", func() bool {
		l, err := secrets.List(t.Context(), metav1.ListOptions{})
		if err != nil {
			return false
		}
		n := 0
		for _, s := range l.Items {
			if s.OwnerReferences == nil {
				continue
			}
			_, shardLabel := s.Labels[Label(ring)]
			if s.Labels[BucketLabel(ring)] != want || shardLabel {
				return false
			}
			n++
		}
		return n == 3
	})
}
