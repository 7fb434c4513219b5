package shard

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
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
	// ObserveMove is called once per object given its bucket label, by
	// the replica that wrote it, with the reason: "new" (it had none) or
	// "bucket" (its label was wrong: its controller owner changed); and
	// once per bucket a shard takes over, by that shard, with the reason
	// "handover".
	ObserveMove(ring, reason string)
	// ObserveObjects is called after each pass over a sharded kind, with
	// the number of its objects each shard holds ("" for unlabelled).
	ObserveObjects(ring, kind string, perShard map[string]int)
	// ObserveDrain is called by a shard that gave buckets up, with the
	// time from its seeing the ring change to its claims being written
	// without them: the time to finish the reconciles in flight.
	ObserveDrain(ring string, d time.Duration)
}

// AssignerOptions configure [NewAssigner]. Ring, Members, Kinds and
// Mapper are required.
type AssignerOptions struct {
	// Ring names the ring.
	Ring string
	// Members is the ring's membership (see NewMembers), started by the
	// caller; the assigner reports its changes.
	Members *Members
	// Kinds are the sharded kinds.
	Kinds []schema.GroupKind
	// Mapper finds the kinds' resources.
	Mapper client.Mapper
	// Namespace limits the assigner to one namespace. Default "": all.
	Namespace string
	// SyncPeriod is the time between passes over every sharded object,
	// which correct wrong bucket labels (an object whose controller owner
	// changed) and count each shard's objects. Default 1 min.
	SyncPeriod time.Duration
	// Workers is the most label writes the assigner has in flight at once.
	// Default 64: a label waits mostly on the API server's write latency.
	Workers int
	// Metrics observes labels and passes. Nil means none.
	Metrics Metrics
	// Logger receives progress messages. Nil means discard.
	Logger *slog.Logger
}

// Assigner gives objects of a ring's sharded kinds their bucket label
// (see BucketLabel) when the assignment webhook did not. It runs on one
// replica, the leader, and never caches the sharded objects: it watches,
// metadata only, the objects that have no bucket label, and labels each;
// every SyncPeriod it lists them all, metadata only and paged, to correct
// wrong labels and count each shard's objects. It writes nothing when the
// ring changes: the shards hand buckets over among themselves (see
// Shard).
type Assigner struct {
	rc   *rest.Client
	opts AssignerOptions
	log  *slog.Logger
}

type kindState struct {
	gk         schema.GroupKind
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
		kinds = append(kinds, &kindState{gk: gk, res: res, c: c})
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
		k.unassigned = cache.NewInformer(cache.ListWatch(c, cache.ListWatchOptions{
			Namespace: a.opts.Namespace, LabelSelector: "!" + BucketLabel(a.opts.Ring),
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
	// The first pass counts each shard's objects: it waits for the ring.
	for !a.opts.Members.HasSynced() {
		select {
		case <-ctx.Done():
			return nil
		case <-time.After(50 * time.Millisecond):
		}
	}
	next := time.Duration(0)
	for {
		t := time.NewTimer(next)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-changes:
			t.Stop()
			if a.opts.Metrics != nil {
				a.opts.Metrics.ObserveRing(a.opts.Ring, len(a.opts.Members.Ring().Members()))
			}
			continue
		case <-t.C:
		}
		next = a.opts.SyncPeriod
		if err := a.pass(ctx, kinds); err != nil && ctx.Err() == nil {
			a.log.Error("pass over the sharded objects failed", "err", err)
			next = time.Second
		}
	}
}

// assign gives an unlabelled object its bucket label.
func (a *Assigner) assign(ctx context.Context, k *kindState, it item) error {
	key := it.name
	if it.namespace != "" {
		key = it.namespace + "/" + key
	}
	o, ok := k.unassigned.Indexer().Get(key)
	if !ok {
		return nil // labelled since, or deleted
	}
	return a.label(ctx, k, o, "new")
}

// label gives o, an object of k, its bucket label, if o has not changed
// since it was seen (the new version is seen in turn); reason is that of
// ObserveMove.
func (a *Assigner) label(ctx context.Context, k *kindState, o *metav1.PartialObjectMetadata, reason string) error {
	labels := map[string]any{BucketLabel(a.opts.Ring): bucketValue(k.gk, o)}
	patch, _ := json.Marshal(map[string]any{"metadata": map[string]any{"labels": labels, "resourceVersion": o.ResourceVersion}})
	_, err := k.c.Namespace(o.Namespace).Patch(ctx, o.Name, types.MergePatchType, patch, metav1.PatchOptions{})
	switch {
	case apierrors.IsConflict(err) || apierrors.IsNotFound(err):
		return nil
	case err != nil:
		return err
	}
	if a.opts.Metrics != nil {
		a.opts.Metrics.ObserveMove(a.opts.Ring, reason)
	}
	return nil
}

// pass lists every sharded object once, corrects wrong bucket labels, and
// counts each shard's objects.
func (a *Assigner) pass(ctx context.Context, kinds []*kindState) error {
	w := newWriters(a.opts.Workers)
	bucket := BucketLabel(a.opts.Ring)
	for _, k := range kinds {
		perShard := map[string]int{}
		c := k.c
		if a.opts.Namespace != "" && k.res.Namespaced {
			c = c.Namespace(a.opts.Namespace)
		}
		err := c.Pages(ctx, metav1.ListOptions{Limit: 500}, func() { clear(perShard) }, func(page *client.List[*metav1.PartialObjectMetadata]) error {
			ring := a.opts.Members.Ring()
			for _, o := range page.Items {
				have, ok := o.Labels[bucket]
				if !ok {
					perShard[""]++
					continue // the watch of unlabelled objects labels it
				}
				b := Bucket(Key(k.gk, o))
				shard, _ := ring.Owner(b)
				perShard[shard]++
				if have != strconv.Itoa(b) {
					w.do(func() error { return a.label(ctx, k, o, "bucket") })
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
	return w.wait()
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
