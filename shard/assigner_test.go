package shard

import (
	"bytes"
	"encoding/json"
	"fmt"
	"io"
	"net/http"
	"slices"
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
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	plain, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(plain.CloseIdleConnections)
	leases, _ := client.For[coordinationv1.Lease](plain, client.Options{})
	leases = leases.Namespace(ns)
	for _, id := range []string{"live", "leaving"} {
		holder, dur, now := id, int32(3600), metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: ring + "-" + id, Labels: map[string]string{RingLabel: ring}},
			Spec:       coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &dur, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
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

	members, err := NewMembers(leases, MembersOptions{Ring: ring, Namespace: ns})
	if err != nil {
		t.Fatal(err)
	}
	run(t, members.Start)
	eventually(t, "both shards on the ring", func() bool { return slices.Equal(members.Ring().Members(), []string{"leaving", "live"}) })

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
	select {
	case <-hold.held:
	case <-time.After(time.Minute):
		t.Fatal("the assigner made no label write")
	}
	if err := leases.Delete(t.Context(), ring+"-leaving", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the ring without the shard that left", func() bool { return slices.Equal(members.Ring().Members(), []string{"live"}) })
	hold.let()
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
