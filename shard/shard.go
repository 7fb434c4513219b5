package shard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// ShardOptions configure [New]. Ring and Identity are required.
type ShardOptions struct {
	// Ring names the ring; Identity names this shard in it.
	Ring, Identity string
	// Kinds are the sharded kinds (see AssignerOptions.Kinds).
	Kinds []schema.GroupKind
	// Members, when set, is the ring's membership: Release then hands a
	// drained object straight to its new shard instead of leaving it
	// unassigned for the leader to label. Default nil.
	Members *Members
	// Metrics observes drain times, and the moves of owned objects that
	// follow their owner (see Follow). Nil means none.
	Metrics Metrics
}

// Shard is one replica's side of a ring: which objects it holds, and how
// it releases an object that is moving to another shard. A sharded
// manager gives it to its informers (Selector) and its controllers
// (Draining and Release).
type Shard struct {
	rc   *rest.Client
	opts ShardOptions

	mu      sync.Mutex
	clients map[schema.GroupVersionResource]*client.Client[*metav1.PartialObjectMetadata]

	// reconciled are the sharded kinds that a sharded controller
	// reconciles (see Reconciles); the other sharded kinds are selected
	// by bucket. wanted are the buckets the ring gives this shard, which
	// the informers of those kinds select; covered those that all of them
	// are known to hold (see Want and Covered).
	reconciled []schema.GroupKind
	wanted     []int
	covered    [Buckets]bool
}

// New returns the shard opts describes, which writes through rc.
func New(rc *rest.Client, opts ShardOptions) (*Shard, error) {
	if opts.Identity == "" {
		return nil, fmt.Errorf("%w: ShardOptions.Identity is required", ErrInvalid)
	}
	if err := validate(opts.Ring, opts.Identity); err != nil {
		return nil, err
	}
	return &Shard{rc: rc, opts: opts, clients: map[schema.GroupVersionResource]*client.Client[*metav1.PartialObjectMetadata]{}}, nil
}

// Ring returns the ring's name.
func (s *Shard) Ring() string { return s.opts.Ring }

// Identity returns this shard's identity.
func (s *Shard) Identity() string { return s.opts.Identity }

// Sharded reports whether objects of kind gk are sharded.
func (s *Shard) Sharded(gk schema.GroupKind) bool { return slices.Contains(s.opts.Kinds, gk) }

// Selector returns the label selector of this shard's objects of the
// kinds its controllers reconcile.
func (s *Shard) Selector() string { return Label(s.opts.Ring) + "=" + s.opts.Identity }

// Reconciles records that a sharded controller of this replica reconciles
// objects of kind gk: they carry the shard label, and move from shard to
// shard through it (see Release). A sharded controller calls it as it is
// made, before the manager starts.
func (s *Shard) Reconciles(gk schema.GroupKind) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Contains(s.reconciled, gk) {
		s.reconciled = append(s.reconciled, gk)
	}
}

// ByBucket reports whether objects of kind gk are selected by bucket: gk
// is sharded and no sharded controller reconciles it (see Reconciles). Its
// objects are owned by objects of reconciled kinds, and follow them: each
// carries its owner's bucket in BucketLabel, for good, and each shard's
// informers select the buckets the ring gives it (BucketSelector), so that
// nothing is written when the ring changes.
func (s *Shard) ByBucket(gk schema.GroupKind) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.Sharded(gk) && !slices.Contains(s.reconciled, gk)
}

// BucketSelector returns the label selector of this shard's objects of the
// kinds selected by bucket: those of the buckets the ring gave it at the
// last call of Want (none before it).
func (s *Shard) BucketSelector() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bucketSelector(BucketLabel(s.opts.Ring), s.wanted)
}

// bucketSelector selects the objects whose label l holds one of the
// buckets bs (sorted), in the shorter of the two ways to say it.
func bucketSelector(l string, bs []int) string {
	switch {
	case len(bs) == 0:
		return l + "=none"
	case len(bs) == Buckets:
		return l
	}
	list := func(bs []int) string {
		var b strings.Builder
		for n, x := range bs {
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(x))
		}
		return b.String()
	}
	if len(bs) <= Buckets/2 {
		return l + " in (" + list(bs) + ")"
	}
	others := make([]int, 0, Buckets-len(bs))
	for b, i := 0, 0; b < Buckets; b++ {
		if i < len(bs) && bs[i] == b {
			i++
			continue
		}
		others = append(others, b)
	}
	return l + "," + l + " notin (" + list(others) + ")"
}

// Want takes the buckets the ring gives this shard now as those its
// informers of the kinds selected by bucket must select, and returns them
// and whether they changed. Until Covered is called with them, only the
// buckets both in them and covered before count as covered. The caller
// then lists those informers again (cache.Factory.Relist) and calls
// Covered. Without ShardOptions.Members, no bucket is given.
func (s *Shard) Want() ([]int, bool) {
	var want []int
	if s.opts.Members != nil {
		want = s.opts.Members.Ring().Buckets(s.opts.Identity)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if slices.Equal(want, s.wanted) {
		return want, false
	}
	keep := [Buckets]bool{}
	for _, b := range want {
		keep[b] = s.covered[b]
	}
	s.wanted, s.covered = want, keep
	return want, true
}

// Covered records that the informers of the kinds selected by bucket hold
// the buckets bs, if bs are still those wanted (see Want).
func (s *Shard) Covered(bs []int) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if !slices.Equal(bs, s.wanted) {
		return
	}
	for _, b := range bs {
		s.covered[b] = true
	}
}

// Covers reports whether this shard's informers of the kinds selected by
// bucket hold the bucket of obj, an object of kind gk: then a controller
// that reconciles obj sees what it owns. It is true when no kind is
// selected by bucket.
func (s *Shard) Covers(gk schema.GroupKind, obj metav1.Object) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	byBucket := false
	for _, k := range s.opts.Kinds {
		if !slices.Contains(s.reconciled, k) {
			byBucket = true
		}
	}
	return !byBucket || s.covered[Bucket(Key(gk, obj))]
}

// Draining reports whether obj, one of this shard's objects, is asked to
// move to another shard.
func (s *Shard) Draining(obj metav1.Object) bool {
	l := obj.GetLabels()
	_, drain := l[DrainLabel(s.opts.Ring)]
	return drain && l[Label(s.opts.Ring)] == s.opts.Identity
}

// Release gives up obj, an object of res that is draining or that the
// ring gives to another shard, if its shard label still names this shard:
// it removes the drain label, if any, and sets the shard label to the
// object's shard on the ring now (see ShardOptions.Members), or removes it
// for the leader to set. Call it instead of reconciling the object, once
// no reconcile of it is in flight and none can begin: a sharded
// controller decides to release in the worker that holds the object's
// key, and reconciles it no more until it leaves this shard's cache. An
// object that has already moved on is not an error.
func (s *Shard) Release(ctx context.Context, res client.Resource, obj metav1.Object) error {
	c, err := s.client(res)
	if err != nil {
		return err
	}
	drain := DrainLabel(s.opts.Ring)
	since := obj.GetLabels()[drain]
	next := jsonPatchOp{Op: "remove", Path: labelPath(Label(s.opts.Ring))}
	if want, ok := s.Next(res.Kind.GroupKind(), obj); ok {
		next = jsonPatchOp{Op: "replace", Path: labelPath(Label(s.opts.Ring)), Value: want}
	}
	ops := []jsonPatchOp{next}
	_, draining := obj.GetLabels()[drain]
	if draining {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: labelPath(drain)})
	}
	ok, err := patchIfShard(ctx, c, obj, s.opts.Ring, s.opts.Identity, ops...)
	if err != nil {
		return fmt.Errorf("shard: release %s/%s: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	switch {
	case !ok || s.opts.Metrics == nil:
	case draining:
		// The leader counted the move when it asked for it.
		if ms, perr := strconv.ParseInt(since, 10, 64); perr == nil {
			s.opts.Metrics.ObserveDrain(s.opts.Ring, time.Since(time.UnixMilli(ms)))
		}
	case next.Op == "replace":
		s.opts.Metrics.ObserveMove(s.opts.Ring, "release")
	}
	return nil
}

// Next returns the shard that obj, an object of kind gk on this shard,
// goes to when released: its shard on the ring now, if that is another
// one. It reports false without ShardOptions.Members, when obj's shard on
// the ring is this one, and when this shard is not on the ring: it has
// not been seen to join yet (a ring without it would give its objects
// away as it starts), or its Lease has expired, and the leader moves its
// objects.
func (s *Shard) Next(gk schema.GroupKind, obj metav1.Object) (string, bool) {
	if s.opts.Members == nil {
		return "", false
	}
	ring := s.opts.Members.Ring()
	if !ring.Has(s.opts.Identity) {
		return "", false
	}
	want, ok := ring.Shard(Key(gk, obj))
	return want, ok && want != s.opts.Identity
}

// Changes returns a channel that receives a value after the ring changes
// (see Members.Changes), or nil without ShardOptions.Members. A sharded
// controller then looks for the objects it must release.
func (s *Shard) Changes() <-chan struct{} {
	if s.opts.Members == nil {
		return nil
	}
	return s.opts.Members.Changes()
}

// Follow moves obj, an object of res owned by an object that this shard is
// releasing to the shard to, along with its owner, if its shard label
// still names this shard. A controller calls it for the objects it owns
// before it releases their owner, so that they are in the new shard's
// cache by the time the owner is reconciled there. An object that has
// moved on is not an error.
func (s *Shard) Follow(ctx context.Context, res client.Resource, obj metav1.Object, to string) error {
	c, err := s.client(res)
	if err != nil {
		return err
	}
	ok, err := patchIfShard(ctx, c, obj, s.opts.Ring, s.opts.Identity, jsonPatchOp{Op: "replace", Path: labelPath(Label(s.opts.Ring)), Value: to})
	if err != nil {
		return fmt.Errorf("shard: move %s/%s with its owner: %w", obj.GetNamespace(), obj.GetName(), err)
	}
	if ok && s.opts.Metrics != nil {
		s.opts.Metrics.ObserveMove(s.opts.Ring, "owner")
	}
	return nil
}

// client returns a metadata client for res.
func (s *Shard) client(res client.Resource) (*client.Client[*metav1.PartialObjectMetadata], error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if c, ok := s.clients[res.Resource]; ok {
		return c, nil
	}
	c, err := client.For[metav1.PartialObjectMetadata](s.rc, client.Options{Resource: res})
	if err != nil {
		return nil, err
	}
	s.clients[res.Resource] = c
	return c, nil
}
