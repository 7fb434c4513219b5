package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"hash/maphash"
	"log/slog"
	"strconv"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/workqueue"
)

// Metrics observes a ring's work; the manager's Prometheus registry
// implements it. Every method may be called concurrently.
type Metrics interface {
	// ObserveRing is called when the live shards change, with their number.
	ObserveRing(ring string, shards int)
	// ObserveMove is called per object given a shard, by the replica that
	// wrote its label, with the reason: "new" (it had none), "dead" (its
	// shard left or died), "drain" (the leader asked a live shard for it),
	// "release" (a live shard handed it over unasked, after a ring change),
	// "owner" (an owned object followed its owner) or "bucket" (an object
	// of a kind selected by bucket had its bucket label set right).
	ObserveMove(ring, reason string)
	// ObserveObjects is called after each pass over a sharded kind, with
	// the number of its objects each shard holds ("" for unassigned).
	ObserveObjects(ring, kind string, perShard map[string]int)
	// ObserveDrain is called by a shard that released a drained object,
	// with the time since the drain began (by the clocks of two replicas).
	ObserveDrain(ring string, d time.Duration)
}

// AssignerOptions configure [NewAssigner]. Ring, Members, Kinds and
// Mapper are required.
type AssignerOptions struct {
	// Ring names the ring.
	Ring string
	// Members is the ring's membership (see NewMembers), started by the
	// caller.
	Members *Members
	// Kinds are the sharded kinds. An object whose controller owner is of
	// one of them follows its owner; any other object is a primary object,
	// which must be reconciled by a sharded controller, since moving it off
	// a live shard waits for that shard to release it. A sharded
	// controller takes the objects it owns (see controller.Owns) along
	// when it releases their owner; the assigner moves at once the owned
	// objects that are left, and moves owned objects off a dead shard
	// before their owners. List owner kinds before the kinds they own:
	// the assigner then leaves the owned objects of a draining owner to
	// that owner's shard.
	Kinds []schema.GroupKind
	// ByBucket, when set, says which of Kinds are selected by bucket (see
	// Shard.ByBucket): the assigner gives their objects the bucket label
	// (BucketLabel) instead of the shard label, and never moves them.
	// Default nil: none.
	ByBucket func(schema.GroupKind) bool
	// Mapper finds the kinds' resources.
	Mapper client.Mapper
	// Namespace limits the assigner to one namespace. Default "": all.
	Namespace string
	// SyncPeriod is the time between passes over every sharded object, to
	// move objects after membership changes that were missed and to count
	// each shard's objects. A pass also runs at each ring change, and
	// again every second while moves it began are under way. Default 1 min.
	SyncPeriod time.Duration
	// Workers is the most label writes the assigner has in flight at once.
	// Default 64: a move waits mostly on the API server's write latency.
	Workers int
	// DrainAfter is how long after a ring change the assigner leaves the
	// objects on a live shard that the ring gives to another to that
	// shard, which releases them itself (a sharded controller watches the
	// ring), before it asks for them with the drain label. Default 30 s.
	DrainAfter time.Duration
	// Metrics observes assignments and moves. Nil means none.
	Metrics Metrics
	// Logger receives progress messages. Nil means discard.
	Logger *slog.Logger
}

// Assigner gives objects of a ring's sharded kinds their shard. It runs on
// one replica, the leader, and never caches the sharded objects:
//
//   - it watches, metadata only, the objects that have no shard label, and
//     labels each with its shard on the ring;
//   - after each ring change (and every SyncPeriod) it lists them, metadata
//     only and paged, and moves the objects whose shard changed: at once
//     from a shard that is gone, through the drain label from a live one;
//     objects owned by an object of a sharded kind move at once.
type Assigner struct {
	rc   *rest.Client
	opts AssignerOptions
	log  *slog.Logger
}

type kindState struct {
	gk         schema.GroupKind
	byBucket   bool // see AssignerOptions.ByBucket
	res        client.Resource
	c          *client.Client[*metav1.PartialObjectMetadata]
	unassigned *cache.Informer[*metav1.PartialObjectMetadata]
}

// NewAssigner returns an Assigner that reads and labels objects through rc.
func NewAssigner(rc *rest.Client, opts AssignerOptions) (*Assigner, error) {
	if err := validate(opts.Ring, ""); err != nil {
		return nil, err
	}
	if opts.Members == nil || opts.Mapper == nil || len(opts.Kinds) == 0 {
		return nil, fmt.Errorf("%w: AssignerOptions.Members, Kinds and Mapper are required", ErrInvalid)
	}
	if opts.SyncPeriod <= 0 {
		opts.SyncPeriod = time.Minute
	}
	if opts.Workers <= 0 {
		opts.Workers = 64
	}
	if opts.DrainAfter <= 0 {
		opts.DrainAfter = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Assigner{rc: rc, opts: opts, log: log.With("ring", opts.Ring)}, nil
}

// NeedLeaderElection reports that the assigner runs on the leader only.
func (a *Assigner) NeedLeaderElection() bool { return true }

// item is a key of the queue of unassigned objects.
type item struct {
	kind            int
	namespace, name string
}

// Start assigns until ctx ends, then returns nil. It fails when a kind's
// resource cannot be found.
func (a *Assigner) Start(ctx context.Context) error {
	var kinds []*kindState
	for _, gk := range a.opts.Kinds {
		res, err := a.opts.Mapper.RESTMapping(ctx, gk)
		if err != nil {
			return fmt.Errorf("shard: assigner: %s: %w", gk, err)
		}
		c, err := client.For[metav1.PartialObjectMetadata](a.rc, client.Options{Resource: res})
		if err != nil {
			return fmt.Errorf("shard: assigner: %s: %w", gk, err)
		}
		kinds = append(kinds, &kindState{gk: gk, res: res, c: c, byBucket: a.opts.ByBucket != nil && a.opts.ByBucket(gk)})
	}
	queue := workqueue.New(workqueue.Options[item]{Name: "shard-assigner-" + a.opts.Ring})
	ctx, cancel := context.WithCancel(ctx)
	var wg sync.WaitGroup
	defer wg.Wait()
	defer queue.ShutDown()
	defer cancel()
	for i, k := range kinds {
		c := k.c
		if a.opts.Namespace != "" && k.res.Namespaced {
			c = c.Namespace(a.opts.Namespace)
		}
		unassigned := "!" + Label(a.opts.Ring)
		if k.byBucket {
			unassigned = "!" + BucketLabel(a.opts.Ring)
		}
		k.unassigned = cache.NewInformer(cache.ListWatch(c, cache.ListWatchOptions{
			Namespace: a.opts.Namespace, LabelSelector: unassigned,
		}), cache.InformerOptions[*metav1.PartialObjectMetadata]{Name: "unassigned " + k.res.Resource.Resource, Logger: a.log})
		enqueue := func(o *metav1.PartialObjectMetadata) { queue.Add(item{i, o.Namespace, o.Name}) }
		_, err := k.unassigned.AddHandler(cache.HandlerFuncs[*metav1.PartialObjectMetadata]{
			Add:    func(o *metav1.PartialObjectMetadata, _ bool) { enqueue(o) },
			Update: func(_, o *metav1.PartialObjectMetadata) { enqueue(o) },
		}, cache.HandlerOptions{Inline: true})
		if err != nil {
			return err
		}
		wg.Go(func() { _ = k.unassigned.Start(ctx) })
	}
	for range a.opts.Workers {
		wg.Go(func() {
			for {
				it, ok := queue.Get()
				if !ok {
					return
				}
				if err := a.assign(ctx, kinds[it.kind], it); err != nil && ctx.Err() == nil {
					a.log.Debug("could not assign", "kind", kinds[it.kind].gk, "object", it.namespace+"/"+it.name, "err", err)
					queue.AddRateLimited(it)
				} else {
					queue.Forget(it)
				}
				queue.Done(it)
			}
		})
	}

	changes := a.opts.Members.Changes()
	for !a.opts.Members.HasSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	next := time.Duration(0)
	changed := time.Now() // of the ring
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changes:
			t.Stop()
			changed = time.Now()
			ring := a.opts.Members.Ring()
			if a.opts.Metrics != nil {
				a.opts.Metrics.ObserveRing(a.opts.Ring, len(ring.Members()))
			}
			// Objects that waited for a shard to exist can be labelled now.
			for i, k := range kinds {
				for _, o := range k.unassigned.Indexer().List() {
					queue.Add(item{i, o.Namespace, o.Name})
				}
			}
		case <-t.C:
		}
		drain := time.Since(changed) >= a.opts.DrainAfter
		pending, err := a.pass(ctx, kinds, drain)
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			a.log.Error("pass over the sharded objects failed", "err", err)
			next = time.Second
		case pending && !drain:
			// The shards release what they must; look again when it is
			// time to ask for what is left.
			next = a.opts.DrainAfter - time.Since(changed)
		case pending:
			next = time.Second
		default:
			next = a.opts.SyncPeriod
		}
	}
}

// assign labels an unassigned object with its shard on the ring now.
func (a *Assigner) assign(ctx context.Context, k *kindState, it item) error {
	o, ok := k.unassigned.Lister().Namespace(it.namespace).Get(it.name)
	if !ok {
		return nil // assigned since, or deleted
	}
	var labels map[string]any
	if k.byBucket {
		labels = bucketLabels(a.opts.Ring, k.gk, o)
	} else {
		want, ok := a.opts.Members.Ring().Shard(Key(k.gk, o))
		if !ok {
			return nil // no live shard: retried when the ring changes
		}
		labels = map[string]any{Label(a.opts.Ring): want}
		if _, draining := o.Labels[DrainLabel(a.opts.Ring)]; draining {
			labels[DrainLabel(a.opts.Ring)] = nil
		}
	}
	// The resourceVersion makes the patch fail if the object changed since
	// it was seen unassigned; the new version comes through the watch.
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "resourceVersion": o.ResourceVersion}})
	_, err := k.c.Namespace(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if a.opts.Metrics != nil {
		a.opts.Metrics.ObserveMove(a.opts.Ring, "new")
	}
	return nil
}

// bucketLabels are the labels of o, an object of gk selected by bucket, as
// a merge patch: its bucket, and no shard or drain label.
func bucketLabels(ring string, gk schema.GroupKind, o metav1.Object) map[string]any {
	labels := map[string]any{BucketLabel(ring): strconv.Itoa(Bucket(Key(gk, o)))}
	for _, l := range []string{Label(ring), DrainLabel(ring)} {
		if _, ok := o.GetLabels()[l]; ok {
			labels[l] = nil
		}
	}
	return labels
}

// fixBucket gives o, an object of a kind selected by bucket whose bucket
// label is wrong (its controller owner changed) or that still has a shard
// label, its bucket label, if o has not changed since it was listed.
func (a *Assigner) fixBucket(ctx context.Context, k *kindState, o *metav1.PartialObjectMetadata) error {
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": bucketLabels(a.opts.Ring, k.gk, o), "resourceVersion": o.ResourceVersion}})
	_, err := k.c.Namespace(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
		return nil // the next pass looks again
	}
	if err == nil && a.opts.Metrics != nil {
		a.opts.Metrics.ObserveMove(a.opts.Ring, "bucket")
	}
	return err
}

// pass lists every sharded object once and moves those on the wrong
// shard; it asks live shards for theirs with the drain label only when
// askDrain is set. pending reports moves still under way.
func (a *Assigner) pass(ctx context.Context, kinds []*kindState, askDrain bool) (pending bool, err error) {
	ring := a.opts.Members.Ring()
	if len(ring.Members()) == 0 {
		return false, nil
	}
	sharded := map[schema.GroupKind]bool{}
	for _, k := range kinds {
		sharded[k.gk] = true
	}
	label, drain := Label(a.opts.Ring), DrainLabel(a.opts.Ring)
	w := newWriters(a.opts.Workers)
	// draining holds (hashes of) the UIDs of the objects on a live shard
	// that must move: their shard takes along the objects they own that it
	// holds, before it releases them (see Shard.Follow), so the pass leaves
	// those alone. An owner must be listed before what it owns for this:
	// Kinds in that order.
	draining := map[uint64]struct{}{}
	seed := maphash.MakeSeed()
	// Objects that own others move off a dead shard after them, at the
	// end of the pass, so that their new shard holds what they own by the
	// time it reconciles them. ownerMoves holds those moves.
	var ownerMoves []func() error
	for _, k := range kinds {
		perShard := map[string]int{}
		c := k.c
		if a.opts.Namespace != "" && k.res.Namespaced {
			c = c.Namespace(a.opts.Namespace)
		}
		err := c.Pages(ctx, metav1.ListOptions{Limit: 500}, func() { clear(perShard) }, func(page *client.List[*metav1.PartialObjectMetadata]) error {
			// Each page is judged by the ring of the moment it arrives,
			// not the one the pass began with: replicas that stop
			// together leave one after another, and a pass begun after
			// the first left would otherwise count the others live until
			// its end, and leave their objects to the next pass.
			ring = a.opts.Members.Ring()
			if k.byBucket {
				bucket := BucketLabel(a.opts.Ring)
				for _, o := range page.Items {
					have, ok := o.Labels[bucket]
					if !ok {
						perShard[""]++
						continue // the watch of unassigned objects labels it
					}
					want := strconv.Itoa(Bucket(Key(k.gk, o)))
					shard, _ := ring.Owner(Bucket(Key(k.gk, o)))
					perShard[shard]++
					if _, labelled := o.Labels[label]; have != want || labelled {
						w.do(func() error { return a.fixBucket(ctx, k, o) })
					}
				}
				return nil
			}
			for _, o := range page.Items {
				have := o.Labels[label]
				perShard[have]++
				if have == "" {
					continue // the watch of unassigned objects labels it
				}
				want, _ := ring.Shard(Key(k.gk, o))
				_, isDraining := o.Labels[drain]
				if have == want {
					continue
				}
				owned := ownedBySharded(o, sharded)
				if !ring.Has(have) {
					if owned {
						w.do(func() error { return a.moveNow(ctx, k, o, have, isDraining, "dead") })
					} else {
						ownerMoves = append(ownerMoves, func() error { return a.moveNow(ctx, k, o, have, isDraining, "dead") })
					}
					continue
				}
				if owned {
					if _, ok := draining[maphash.String(seed, string(metav1.GetControllerOf(o).UID))]; ok {
						pending = true // its owner's shard takes it along
						continue
					}
					// The owner is where it belongs, or its controller did
					// not take this one along: owned objects have no
					// reconciles of their own to hand over, so it moves at
					// once.
					w.do(func() error { return a.moveNow(ctx, k, o, have, isDraining, "owner") })
					continue
				}
				pending = true
				draining[maphash.String(seed, string(o.UID))] = struct{}{}
				if askDrain && !isDraining {
					w.do(func() error { return a.startDrain(ctx, k, o, have) })
				}
			}
			return nil
		})
		if err != nil {
			w.fail(fmt.Errorf("list %s: %w", k.res.Resource.Resource, err))
			continue
		}
		if a.opts.Metrics != nil {
			a.opts.Metrics.ObserveObjects(a.opts.Ring, k.gk.String(), perShard)
		}
	}
	w.wg.Wait() // what the owners own has moved
	for _, move := range ownerMoves {
		w.do(move)
	}
	return pending, w.wait()
}

// writers runs label writes, a bounded number at once, and gathers their
// errors.
type writers struct {
	sem  chan struct{}
	wg   sync.WaitGroup
	mu   sync.Mutex
	errs []error
}

func newWriters(n int) *writers { return &writers{sem: make(chan struct{}, n)} }

// do runs fn once fewer than n writes are in flight.
func (w *writers) do(fn func() error) {
	w.sem <- struct{}{}
	w.wg.Go(func() {
		defer func() { <-w.sem }()
		w.fail(fn())
	})
}

func (w *writers) fail(err error) {
	if err == nil {
		return
	}
	w.mu.Lock()
	w.errs = append(w.errs, err)
	w.mu.Unlock()
}

// wait waits for the writes and returns their errors, joined.
func (w *writers) wait() error {
	w.wg.Wait()
	w.mu.Lock()
	defer w.mu.Unlock()
	return errors.Join(w.errs...)
}

// ownedBySharded reports whether o's controller owner is of a sharded kind.
func ownedBySharded(o metav1.Object, sharded map[schema.GroupKind]bool) bool {
	ref := metav1.GetControllerOf(o)
	if ref == nil {
		return false
	}
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && sharded[schema.GroupKind{Group: gv.Group, Kind: ref.Kind}]
}

// jsonPatchOp is one operation of a JSON patch.
type jsonPatchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// labelPath is the JSON pointer of a label.
func labelPath(l string) string {
	return "/metadata/labels/" + strings.NewReplacer("~", "~0", "/", "~1").Replace(l)
}

// patchLabels applies ops after checking that the shard label is still
// have; a failed check (the object moved on) is not an error.
func (a *Assigner) patchLabels(ctx context.Context, k *kindState, o metav1.Object, have string, ops ...jsonPatchOp) (bool, error) {
	return patchIfShard(ctx, k.c, o, a.opts.Ring, have, ops...)
}

// patchIfShard patches o's labels with ops, if its shard label is still
// have; it reports whether it did.
func patchIfShard(ctx context.Context, c *client.Client[*metav1.PartialObjectMetadata], o metav1.Object, ring, have string, ops ...jsonPatchOp) (bool, error) {
	all := append([]jsonPatchOp{{Op: "test", Path: labelPath(Label(ring)), Value: have}}, ops...)
	patch, _ := json.Marshal(all)
	_, err := c.Namespace(o.GetNamespace()).Patch(ctx, o.GetName(), types.JSONPatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsInvalid(err) || apierrors.IsNotFound(err) || apierrors.IsConflict(err):
		return false, nil // the test failed: someone moved it first; or it is gone
	case err != nil:
		return false, err
	}
	return true, nil
}

// moveNow moves o off the shard have at once, to its shard on the ring as
// it is when the write starts. A pass can take longer than the ring stays
// the same: when several replicas leave together, their Leases go one
// after another, and the shard the pass's ring gave an object may be the
// next to go. moveNow leaves o alone when the ring has no shard for it,
// gives it have, or (for a move off a shard that was gone) has have back:
// a pass after the ring's change looks at it again.
func (a *Assigner) moveNow(ctx context.Context, k *kindState, o metav1.Object, have string, draining bool, reason string) error {
	ring := a.opts.Members.Ring()
	want, ok := ring.Shard(Key(k.gk, o))
	if !ok || want == have || reason == "dead" && ring.Has(have) {
		return nil
	}
	return a.move(ctx, k, o, have, want, draining, reason)
}

// move gives o the shard want at once.
func (a *Assigner) move(ctx context.Context, k *kindState, o metav1.Object, have, want string, draining bool, reason string) error {
	ops := []jsonPatchOp{{Op: "replace", Path: labelPath(Label(a.opts.Ring)), Value: want}}
	if draining {
		ops = append(ops, jsonPatchOp{Op: "remove", Path: labelPath(DrainLabel(a.opts.Ring))})
	}
	ok, err := a.patchLabels(ctx, k, o, have, ops...)
	if ok && a.opts.Metrics != nil {
		a.opts.Metrics.ObserveMove(a.opts.Ring, reason)
	}
	return err
}

// startDrain asks o's live shard to release it.
func (a *Assigner) startDrain(ctx context.Context, k *kindState, o metav1.Object, have string) error {
	since := strconv.FormatInt(time.Now().UnixMilli(), 10)
	ok, err := a.patchLabels(ctx, k, o, have, jsonPatchOp{Op: "add", Path: labelPath(DrainLabel(a.opts.Ring)), Value: since})
	if ok && a.opts.Metrics != nil {
		a.opts.Metrics.ObserveMove(a.opts.Ring, "drain")
	}
	return err
}
