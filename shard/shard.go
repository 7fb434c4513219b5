package shard

import (
	"context"
	"fmt"
	"slices"
	"strconv"
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

// Selector returns the label selector of this shard's objects.
func (s *Shard) Selector() string { return Label(s.opts.Ring) + "=" + s.opts.Identity }

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
