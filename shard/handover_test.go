package shard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/loom-k8s/loom/client"
)

var widget = schema.GroupKind{Group: "test.loom.dev", Kind: "Widget"}

// replica is one shard of a test ring: its Lease, its view of the others,
// and its hand-over, all started. listed is the selector of its last
// completed Relist or Narrow; relists counts its Relists.
type replica struct {
	shard   *Shard
	stop    func()
	listed  atomic.Pointer[string]
	relists atomic.Int64
}

func startReplica(t *testing.T, leases *client.Client[*coordinationv1.Lease], ring, id string) *replica {
	t.Helper()
	return startReplicaListing(t, leases, ring, id, nil)
}

// startReplicaListing is startReplica with list, if not nil, called by
// each Relist with the selector it lists; an error from it fails the
// Relist.
func startReplicaListing(t *testing.T, leases *client.Client[*coordinationv1.Lease], ring, id string,
	list func(ctx context.Context, selector string) error) *replica {
	t.Helper()
	members, err := NewMembers(leases, MembersOptions{Ring: ring, Namespace: "default"})
	if err != nil {
		t.Fatal(err)
	}
	member, err := NewMember(leases, MemberOptions{
		Ring: ring, Namespace: "default", Identity: id,
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
	})
	if err != nil {
		t.Fatal(err)
	}
	r := &replica{}
	r.shard, err = New(ShardOptions{
		Ring: ring, Identity: id, Kinds: []schema.GroupKind{widget}, Members: members, Member: member,
		Relist: func(ctx context.Context) error {
			sel := r.shard.Selector()
			if list != nil {
				if err := list(ctx, sel); err != nil {
					return err
				}
			}
			r.listed.Store(&sel)
			r.relists.Add(1)
			return nil
		},
		Narrow: func(_ context.Context, keep func(metav1.Object) bool) error {
			sel := r.shard.Selector()
			if old := r.listed.Load(); old != nil {
				if err := checkNarrow(*old, sel, BucketLabel(ring), keep); err != nil {
					t.Error(err)
				}
			}
			r.listed.Store(&sel)
			return nil
		},
	})
	if err != nil {
		t.Fatal(err)
	}
	stops := []func() error{run(t, members.Start), run(t, member.Start), run(t, r.shard.Start)}
	r.stop = func() {
		// As a manager stops: the hand-over, then the Lease.
		_ = stops[2]()
		_ = stops[1]()
		_ = stops[0]()
	}
	return r
}

// checkNarrow fails unless, for every bucket, next selects a subset of
// what prev does and keep agrees with next.
func checkNarrow(prev, next, label string, keep func(metav1.Object) bool) error {
	ps, err := labels.Parse(prev)
	if err != nil {
		return err
	}
	ns, err := labels.Parse(next)
	if err != nil {
		return err
	}
	for b := range Buckets {
		set := labels.Set{label: strconv.Itoa(b)}
		in := ns.Matches(set)
		if in && !ps.Matches(set) {
			return fmt.Errorf("narrowed from %q to %q, which selects bucket %d anew", prev, next, b)
		}
		if got := keep(&metav1.ObjectMeta{Labels: set}); got != in {
			return fmt.Errorf("keep(bucket %d) = %v, but %q selects it: %v", b, got, next, in)
		}
	}
	return nil
}

// held returns the buckets r holds.
func (r *replica) held() []int {
	var bs []int
	for b, n := range r.shard.Held() {
		if n != 0 {
			bs = append(bs, b)
		}
	}
	return bs
}

// holdsListed reports whether r's last Relist selected every bucket it
// holds.
func (r *replica) holdsListed(t *testing.T) bool {
	p := r.listed.Load()
	if p == nil {
		return false
	}
	sel, err := labels.Parse(*p)
	if err != nil {
		t.Fatal(err)
	}
	for _, b := range r.held() {
		if !sel.Matches(labels.Set{BucketLabel(r.shard.Ring()): strconv.Itoa(b)}) {
			return false
		}
	}
	return true
}

// widgetIn returns a widget whose bucket the ring gives to id.
func widgetIn(ring *Ring, id string) *metav1.ObjectMeta {
	for i := 0; ; i++ {
		o := &metav1.ObjectMeta{Namespace: "ns", Name: "w-" + strconv.Itoa(i)}
		if s, _ := ring.Shard(Key(widget, o)); s == id {
			return o
		}
	}
}

// TestHandOver: a shard alone holds every bucket; a second one takes its
// share, but not a bucket with a reconcile in flight on the first until
// that reconcile ends; the two never hold a bucket at once; and when the
// second stops, the first takes everything back. Each holds only buckets
// its informers have listed.
func TestHandOver(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	ring := "handover-" + rand.String(5)
	a := startReplica(t, leases, ring, "a")
	eventually(t, "a holding every bucket", func() bool { return len(a.held()) == Buckets && a.holdsListed(t) })

	ab := NewRing([]string{"a", "b"}, RingOptions{})
	busy := widgetIn(ab, "b")
	end, ok := a.shard.Begin(widget, busy)
	if !ok {
		t.Fatal("a refused a reconcile of a bucket it holds")
	}

	var overlap atomic.Value
	var b *replica
	var bReady atomic.Bool
	sampling, stopSampling := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	wg.Go(func() {
		for sampling.Err() == nil {
			if !bReady.Load() {
				time.Sleep(time.Millisecond)
				continue
			}
			// b first: a bucket does not go back from b to a here, so
			// one that b held before a is seen holding it was held by
			// both at once.
			hb, ha := b.shard.Held(), a.shard.Held()
			for i := range Buckets {
				if hb[i] != 0 && ha[i] != 0 {
					overlap.Store(i)
				}
			}
			time.Sleep(time.Millisecond)
		}
	})
	b = startReplica(t, leases, ring, "b")
	bReady.Store(true)

	busyBucket := Bucket(Key(widget, busy))
	wantB := slices.DeleteFunc(ab.Buckets("b"), func(x int) bool { return x == busyBucket })
	eventually(t, "b holding its buckets but the busy one", func() bool {
		return slices.Equal(b.held(), wantB) && b.holdsListed(t)
	})
	if _, ok := a.shard.Begin(widget, busy); ok {
		t.Fatal("a began a reconcile in a bucket it is giving up")
	}
	if _, ok := a.shard.Begin(widget, widgetIn(ab, "a")); !ok {
		t.Fatal("a refused a reconcile in a bucket it keeps")
	}
	if b.shard.Held()[busyBucket] != 0 {
		t.Fatal("b took the bucket of a reconcile in flight on a")
	}
	end()
	eventually(t, "b holding all its buckets", func() bool { return slices.Equal(b.held(), ab.Buckets("b")) })
	eventually(t, "a holding only its own", func() bool { return slices.Equal(a.held(), ab.Buckets("a")) })
	if n := a.shard.narrows.Load(); n == 0 || a.relists.Load() != 1 {
		t.Fatalf("a narrowed %d times and listed %d times; want it to narrow, and list only at first", n, a.relists.Load())
	}
	stopSampling()
	wg.Wait()
	if i := overlap.Load(); i != nil {
		t.Fatalf("bucket %d was held by both shards at once", i)
	}
	l, err := leases.Get(t.Context(), ring+"-a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := l.Annotations[ClaimsAnnotation]; got != EncodeClaims(ab.Buckets("a")) {
		t.Fatal("a's Lease does not claim exactly its buckets")
	}

	b.stop()
	eventually(t, "a holding every bucket again", func() bool { return len(a.held()) == Buckets && a.holdsListed(t) })
}

// TestClaimsOfOthers: a shard takes no bucket that a live Lease claims,
// nor any while a live Lease's claims cannot be read; it takes the
// buckets of a Lease that expired (by its own clock) or was deleted.
func TestClaimsOfOthers(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	ring := "others-" + rand.String(5)
	lease := func(id, claims string, seconds int32) {
		holder, now := id, metav1.NewMicroTime(time.Now())
		if _, err := leases.Create(t.Context(), &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{
				Name: ring + "-" + id, Labels: map[string]string{RingLabel: ring},
				Annotations: map[string]string{ClaimsAnnotation: claims},
			},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &holder, LeaseDurationSeconds: &seconds, RenewTime: &now},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	all := NewRing([]string{"x"}, RingOptions{}).Buckets("x")
	lease("garbled", "not-a-bitmap", 3600)
	lease("dying", EncodeClaims(all), 4)
	s := startReplica(t, leases, ring, "s")
	eventually(t, "s claiming its buckets", func() bool {
		l, err := leases.Get(t.Context(), ring+"-s", metav1.GetOptions{})
		return err == nil && l.Annotations[ClaimsAnnotation] != "" && l.Annotations[ClaimsAnnotation] != EncodeClaims(nil)
	})
	looked := s.shard.looks.Load()
	eventually(t, "s to read the others' claims three times more, or take a bucket", func() bool {
		return s.shard.looks.Load() >= looked+3 || len(s.held()) > 0
	})
	if n := len(s.held()); n != 0 {
		t.Fatalf("s took %d buckets that live Leases claim", n)
	}
	eventually(t, "the dying shard off the ring", func() bool {
		return !slices.Contains(s.shard.opts.Members.Ring().Members(), "dying")
	})
	if err := leases.Delete(t.Context(), ring+"-garbled", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "s holding every bucket", func() bool { return len(s.held()) == Buckets })
}

// TestReleaseWaitsForReconciles: a held bucket that the ring gives away
// is given up at once when idle; with a reconcile in flight it refuses new
// ones and is given up once that reconcile ends; and when the ring gives
// it back first, it is simply kept, accepting reconciles again.
func TestReleaseWaitsForReconciles(t *testing.T) {
	s, err := New(ShardOptions{Ring: "r", Identity: "a", Kinds: []schema.GroupKind{widget}})
	if err != nil {
		t.Fatal(err)
	}
	ab := NewRing([]string{"a", "b"}, RingOptions{})
	// Two widgets in different buckets that the ring of a and b gives b.
	var idle, busy *metav1.ObjectMeta
	for i := 0; busy == nil; i++ {
		o := &metav1.ObjectMeta{Namespace: "ns", Name: "w-" + strconv.Itoa(i)}
		switch sh, _ := ab.Shard(Key(widget, o)); {
		case sh != "b":
		case idle == nil:
			idle = o
		case Bucket(Key(widget, o)) != Bucket(Key(widget, idle)):
			busy = o
		}
	}
	all := NewRing([]string{"a"}, RingOptions{}).Buckets("a")
	s.release(all)
	for _, b := range all {
		s.takes++
		s.held[b] = s.takes
	}
	end, ok := s.Begin(widget, busy)
	if !ok {
		t.Fatal("Begin refused a held bucket")
	}
	gone, waiting := s.release(ab.Buckets("a"))
	if want := len(all) - len(ab.Buckets("a")) - 1; gone != want || !waiting {
		t.Fatalf("release gave up %d buckets (waiting %v), want %d and a wait", gone, waiting, want)
	}
	if _, ok := s.Begin(widget, busy); ok {
		t.Fatal("Begin accepted a bucket being given up")
	}
	if _, ok := s.Begin(widget, idle); ok {
		t.Fatal("Begin accepted a bucket given up")
	}
	// The ring gives everything back before the reconcile ends.
	if gone, waiting := s.release(all); gone != 0 || waiting {
		t.Fatalf("release with every bucket wanted gave up %d (waiting %v)", gone, waiting)
	}
	end()
	end, ok = s.Begin(widget, busy)
	if !ok {
		t.Fatal("a bucket the ring gave back before it went refuses reconciles")
	}
	end()
	// Given away again, it goes at once: it is idle.
	if gone, waiting := s.release(ab.Buckets("a")); gone != 1 || waiting {
		t.Fatalf("release of the idle bucket: gave up %d (waiting %v), want 1", gone, waiting)
	}
}

// TestRingChangeStopsList: a shard whose list is under way when the ring
// changes so that it gives the shard other buckets stops that list and
// lists what the new ring gives it, as replicas that start together see
// each other join one after another. After three lists stopped in a row,
// the next one runs to its end whatever the ring does.
func TestRingChangeStopsList(t *testing.T) {
	leases := leaseClient(t, "").Namespace("default")
	ring := "stoplist-" + rand.String(5)
	a := startReplica(t, leases, ring, "a")
	eventually(t, "a holding every bucket", func() bool { return len(a.held()) == Buckets && a.holdsListed(t) })

	sel := func(ids ...string) string {
		return bucketSelector(BucketLabel(ring), NewRing(ids, RingOptions{}).Buckets("b"))
	}
	// b's lists go on until stopped, or until release is closed.
	release := make(chan struct{})
	var mu sync.Mutex
	var listing string   // the selector of the list under way
	var stopped []string // the selectors of the lists stopped
	b := startReplicaListing(t, leases, ring, "b", func(ctx context.Context, s string) error {
		mu.Lock()
		listing = s
		mu.Unlock()
		select {
		case <-ctx.Done():
			mu.Lock()
			stopped = append(stopped, s)
			mu.Unlock()
			return ctx.Err()
		case <-release:
			return nil
		}
	})
	waitListing := func(s string, stops int) {
		t.Helper()
		eventually(t, "b listing "+s, func() bool {
			mu.Lock()
			defer mu.Unlock()
			return listing == s && len(stopped) == stops
		})
	}
	waitListing(sel("a", "b"), 0)

	c := startReplica(t, leases, ring, "c")
	waitListing(sel("a", "b", "c"), 1)
	d := startReplica(t, leases, ring, "d")
	waitListing(sel("a", "b", "c", "d"), 2)
	d.stop()
	waitListing(sel("a", "b", "c"), 3)

	// Three lists were stopped in a row: this one goes on.
	seen := b.shard.listChanges.Load()
	c.stop()
	eventually(t, "b to see c leave during its list", func() bool { return b.shard.listChanges.Load() > seen })
	mu.Lock()
	got := len(stopped)
	mu.Unlock()
	if got != 3 {
		t.Fatalf("%d lists stopped, want 3: the fourth in a row was stopped too", got)
	}
	if len(b.held()) != 0 {
		t.Fatal("b took buckets before any list of its claims ended")
	}
	close(release)
	ab := NewRing([]string{"a", "b"}, RingOptions{})
	eventually(t, "b holding its share of a and b", func() bool {
		return slices.Equal(b.held(), ab.Buckets("b")) && b.holdsListed(t)
	})
}
