package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/tracing"
	"github.com/loom-k8s/loom/workqueue"
)

// Options configure [New]. The zero value is valid.
type Options struct {
	// Name names the controller in logs and metrics. Default: the
	// lower-case name of the reconciled type, such as "foo".
	Name string
	// For chooses which objects of the reconciled type the controller's
	// informer holds (namespace, selectors), and for
	// *unstructured.Unstructured or *metav1.PartialObjectMetadata, their
	// Resource (required then). Default: every object of the type.
	For cache.InformerForOptions
	// Workers is the number of keys reconciled in parallel. Zero means 1.
	Workers int
	// NoPriority queues every key an event brings at normal priority,
	// first in, first out. Default false: keys of an informer's initial
	// list and of resyncs go in at workqueue.PriorityLow, so that a change
	// seen while a backlog drains is reconciled before it.
	NoPriority bool
	// Timeout bounds each reconcile through its context. Zero means no
	// bound beyond the controller's context.
	Timeout time.Duration
	// RateLimiter decides how long a failed key waits before its next
	// attempt. Nil means workqueue.DefaultLimiter: per-key exponential
	// backoff from 5 ms to 1000 s, with an overall 10 qps / 100 burst.
	RateLimiter workqueue.RateLimiter[Request]
	// QueueMetrics receives the work queue's metrics. Nil means none.
	QueueMetrics workqueue.MetricsProvider
	// Metrics observes every reconcile. Nil means none.
	Metrics Metrics
	// Logger receives a line per failed reconcile (an error; an info line
	// for a 409 Conflict, which is routine), and one per reconcile at debug
	// level, with the controller, the key and a reconcile ID. Nil means
	// discard. The lines of a reconcile are logged with its context, so a
	// handler from tracing.LogHandler adds its trace and span IDs.
	Logger *slog.Logger
	// Tracing, when its Provider is set, makes a span per watch event that
	// queues keys and a span per reconcile (see package tracing). The
	// zero value is off.
	Tracing tracing.Options
	// Partition, set by a sharded manager to this replica's shard of a
	// ring (package shard), gives the controller a part of its kind's
	// objects. A controller of a partitioned kind then runs on every
	// replica instead of the leader only, reconciles only the objects its
	// part holds, and queues the cached objects the part takes.
	// Controllers of other kinds ignore it. Default nil: every object.
	Partition Partition
}

// A Partition divides the objects of some kinds among replicas, each
// replica's controllers reconciling only their part; *shard.Shard
// implements it.
type Partition interface {
	// Sharded reports whether the objects of kind gk are divided.
	Sharded(gk schema.GroupKind) bool
	// Begin asks to reconcile obj, of kind gk: false when it is not in
	// this part, or is being handed to another. Otherwise the reconcile
	// goes ahead and calls end when it is over.
	Begin(gk schema.GroupKind, obj metav1.Object) (end func(), ok bool)
	// Taken returns a channel that receives, each time this part takes
	// objects of kind gk, a function reporting whether an object is one of
	// them, until ctx ends. It is subscribed when Taken returns.
	Taken(ctx context.Context, gk schema.GroupKind) <-chan func(obj metav1.Object) bool
}

// Metrics observes reconciles; the manager's Prometheus registry
// implements it.
type Metrics interface {
	// ObserveStart is called once, when the controller starts (before its
	// sources have synced), with its number of workers: the most keys it
	// reconciles at once.
	ObserveStart(controller string, workers int)
	// ObserveActive is called with +1 when a worker takes a key and -1
	// when it is done with it.
	ObserveActive(controller string, delta int)
	// ObserveReconcile is called after each reconcile with its outcome:
	// "success", "requeue_after", "error", "terminal_error" or "panic",
	// and whether Options.Timeout expired before the reconcile returned
	// (whatever it returned).
	ObserveReconcile(controller, outcome string, timedOut bool, d time.Duration)
}

// Manager is what a controller needs of the manager that runs it;
// *manager.Manager implements it.
type Manager interface {
	// Factory is the shared informer factory the controller's informers
	// come from.
	Factory() *cache.Factory
	// ControllerOptions are the manager's defaults for its controllers
	// (metrics, logger); a controller's own Options fill the rest.
	ControllerOptions() Options
	// Add runs r with the manager: a controller adds itself.
	Add(r interface {
		Start(ctx context.Context) error
	}) error
}

// ReconcileFunc reconciles one object: it makes the world match obj, as
// read from the controller's cache (see the package doc for the
// contract). obj is shared with the cache: do not change it; DeepCopy it
// to build a changed version to write.
type ReconcileFunc[T client.Object] func(ctx context.Context, obj T) (Result, error)

// Controller reconciles objects of type T: every change to one, or to
// an object it owns ([Controller.Owns]) or that maps to it
// ([Controller.Watches]), puts its key on a work queue, and workers call
// the ReconcileFunc with the object as cached. Create it with [New],
// which adds it to a manager.
type Controller[T client.Object] struct {
	name      string
	reconcile ReconcileFunc[T]
	opts      Options
	log       *slog.Logger
	queue     *workqueue.Queue[Request]
	primary   *cache.Informer[T]
	kind      schema.GroupVersionKind // T's, for owner references
	part      Partition               // when T is partitioned

	mu      sync.Mutex
	synced  []cache.Syncer // the sources' handler registrations
	preds   []Predicate    // filter the primary objects' changes
	tracer  *tracer        // nil when tracing is off
	err     error          // a construction error, returned by Start
	started bool
	ids     atomic.Uint64
}

// New returns a controller that reconciles the objects of type T (as in
// controller.New(mgr, r.Reconcile, controller.Options{}) with r.Reconcile a
// func(context.Context, *v1.Foo) (controller.Result, error)), fed by mgr's
// shared informer for T, and adds it to mgr. What opts leaves unset of
// Metrics, QueueMetrics, Logger, Tracing and Shard comes from mgr's
// ControllerOptions. Errors (an unknown type, a manager that
// has started) are returned by Start, and so by the manager's Start.
func New[E any, T interface {
	*E
	client.Object
}](mgr Manager, reconcile ReconcileFunc[T], opts Options) *Controller[T] {
	def := mgr.ControllerOptions()
	if opts.Metrics == nil {
		opts.Metrics = def.Metrics
	}
	if opts.QueueMetrics == nil {
		opts.QueueMetrics = def.QueueMetrics
	}
	if opts.Logger == nil {
		opts.Logger = def.Logger
	}
	if opts.Tracing.Provider == nil {
		opts.Tracing = def.Tracing
	}
	if opts.Partition == nil {
		opts.Partition = def.Partition
	}
	c := newController(opts, reconcile, typeName[E]())
	f := mgr.Factory()
	var errs []error
	if reconcile == nil {
		errs = append(errs, errors.New("nil ReconcileFunc"))
	}
	inf, err := cache.InformerFor[E, T](f, opts.For)
	if err != nil {
		errs = append(errs, err)
	} else {
		c.primary = inf
		c.err = c.watch(inf, false, true, func(obj client.Object) []Request {
			return []Request{{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
		}, nil)
	}
	if opts.For.Resource.Kind.Kind != "" {
		c.kind = opts.For.Resource.Kind
	} else if gvk, ok := client.KindOf(T(new(E)), f.ClientOptions().Scheme); ok {
		c.kind = gvk
	}
	if opts.Partition != nil && opts.Partition.Sharded(c.kind.GroupKind()) {
		c.part = opts.Partition
	}
	if err := mgr.Add(c); err != nil {
		errs = append(errs, err)
	}
	if err := errors.Join(append(errs, c.err)...); err != nil {
		c.err = fmt.Errorf("controller %s: %w", c.name, err)
	}
	return c
}

// typeName is the lower-case name of E, the default controller name.
func typeName[E any]() string {
	return strings.ToLower(reflect.TypeFor[E]().Name())
}

func newController[T client.Object](opts Options, reconcile ReconcileFunc[T], defName string) *Controller[T] {
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	if opts.Name == "" {
		opts.Name = defName
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller[T]{
		name: opts.Name, reconcile: reconcile, opts: opts, log: log.With("controller", opts.Name),
		queue:  workqueue.New(workqueue.Options[Request]{Name: opts.Name, RateLimiter: opts.RateLimiter, Metrics: opts.QueueMetrics}),
		tracer: newTracer(opts.Tracing, opts.Name),
	}
}

// Name returns the controller's name.
func (c *Controller[T]) Name() string { return c.name }

// Informer returns the informer of the reconciled objects.
func (c *Controller[T]) Informer() *cache.Informer[T] { return c.primary }

// Enqueue adds a key to the queue at workqueue.PriorityNormal, as sources
// do for a change. Keys enqueued several times before a worker takes
// them are reconciled once.
func (c *Controller[T]) Enqueue(req Request) { c.queue.Add(req) }

// EnqueueWithPriority adds a key to the queue at priority prio: keys of
// higher priority are reconciled first, those of one priority in the
// order they were queued. Sources queue the objects of an informer's
// initial list and of resyncs at workqueue.PriorityLow and changes at
// workqueue.PriorityNormal. A key that is queued already keeps the higher
// of its priority and prio.
func (c *Controller[T]) EnqueueWithPriority(req Request, prio int) {
	c.queue.AddWithPriority(req, prio)
}

// Filter drops the changes of the reconciled objects that do not pass
// every one of preds (a change of an owned or watched object is filtered
// by the predicates given to Owns or Watches). Call it before Start.
func (c *Controller[T]) Filter(preds ...Predicate) *Controller[T] {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		c.err = errors.Join(c.err, fmt.Errorf("controller %s: Filter after Start", c.name))
	}
	c.preds = append(c.preds, preds...)
	return c
}

// addSource records a source's registration; Start waits for all of them.
func (c *Controller[T]) addSource(s cache.Syncer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("controller %s: sources must be added before Start", c.name)
	}
	c.synced = append(c.synced, s)
	return nil
}

// Start waits until every source has delivered its initial list, then runs
// the workers until ctx ends. It returns at once the error of a
// construction step that failed (see New, Owns and Watches), or the
// cache.SyncError of a source that cannot sync (its informer was refused
// with Forbidden or Unauthorized, or its resource does not exist),
// instead of waiting forever. Otherwise, when ctx ends, it stops taking
// keys, waits for the reconciles in progress (whose contexts are
// cancelled) and returns nil. A controller starts once.
func (c *Controller[T]) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return fmt.Errorf("controller %s: %w", c.name, cache.ErrAlreadyStarted)
	}
	c.started = true
	synced := append([]cache.Syncer(nil), c.synced...)
	err := c.err
	c.mu.Unlock()
	if err != nil {
		return err
	}
	if c.opts.Metrics != nil {
		c.opts.Metrics.ObserveStart(c.name, c.opts.Workers)
	}

	defer c.queue.ShutDown()
	if err := cache.WaitForCacheSync(ctx, synced...); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the sources synced
		}
		return fmt.Errorf("controller %s: %w", c.name, err)
	}
	c.log.Info("starting workers", "workers", c.opts.Workers)
	var wg sync.WaitGroup
	if c.part != nil {
		// Subscribed before any worker can refuse a key, so that no take
		// goes unseen after a refusal.
		taken := c.part.Taken(ctx, c.kind.GroupKind())
		wg.Go(func() { c.queueTaken(ctx, taken) })
	}
	for range c.opts.Workers {
		wg.Go(func() {
			for c.next(ctx) {
			}
		})
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.tracer.flush()
	c.log.Info("stopped")
	return nil
}

// next reconciles one key; false when the queue has shut down.
func (c *Controller[T]) next(ctx context.Context) bool {
	req, ok := c.queue.Get()
	if !ok {
		return false
	}
	defer c.queue.Done(req)
	if ctx.Err() != nil {
		return true // shutting down: leave the key
	}
	if m := c.opts.Metrics; m != nil {
		m.ObserveActive(c.name, 1)
		defer m.ObserveActive(c.name, -1)
	}
	id := strconv.FormatUint(c.ids.Add(1), 36)
	log := c.log.With("key", req.String(), "reconcileID", id)
	rctx, span := c.tracer.start(ctx, req)
	rctx = context.WithValue(rctx, loggerKey{}, log)
	start := time.Now()
	res, timedOut, err := c.call(rctx, req, log)
	outcome := "success"
	requeued := true
	switch {
	case err != nil && errors.Is(err, errPanic):
		outcome = "panic"
		c.queue.AddRateLimited(req)
	case err != nil && IsTerminal(err):
		outcome = "terminal_error"
		c.queue.Forget(req)
		requeued = false
	case err != nil:
		outcome = "error"
		c.queue.AddRateLimitedWithPriority(req, res.Priority)
	case res.RequeueAfter > 0:
		outcome = "requeue_after"
		c.queue.Forget(req)
		c.queue.AddAfterWithPriority(req, res.RequeueAfter, res.Priority)
	default:
		c.queue.Forget(req)
		requeued = false
	}
	d := time.Since(start)
	switch {
	case err != nil && ctx.Err() == nil && apierrors.IsConflict(err):
		// Normal under optimistic concurrency (the cache was behind a
		// write): the retry reads fresh state. Not worth an error line.
		log.InfoContext(rctx, "reconcile hit a conflict; retrying", "err", err, "duration", d)
	case err != nil && ctx.Err() == nil:
		log.ErrorContext(rctx, "reconcile failed", "err", err, "outcome", outcome, "duration", d)
	default:
		log.DebugContext(rctx, "reconciled", "outcome", outcome, "duration", d, "requeueAfter", res.RequeueAfter)
	}
	c.tracer.end(span, req, outcome, res, err, requeued)
	if c.opts.Metrics != nil {
		c.opts.Metrics.ObserveReconcile(c.name, outcome, timedOut, d)
	}
	return true
}

var (
	errPanic   = errors.New("reconciler panicked")
	errTimeout = errors.New("reconcile timeout")
)

// call reconciles the cached object of req, if the cache still has it,
// with the timeout, turning a panic into an error. timedOut says that the
// timeout (not the controller's context) ended the reconcile's context
// before it returned.
func (c *Controller[T]) call(ctx context.Context, req Request, log *slog.Logger) (res Result, timedOut bool, err error) {
	obj, ok := c.primary.Indexer().Get(req.String())
	if !ok {
		return Result{}, false, nil // gone: nothing to reconcile (finalizers handle cleanup)
	}
	if c.part != nil {
		// Not this part's, or being handed over: the part that takes it
		// queues it (see queueTaken).
		end, ok := c.part.Begin(c.kind.GroupKind(), obj)
		if !ok {
			return Result{}, false, nil
		}
		defer end()
	}
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeoutCause(ctx, c.opts.Timeout, errTimeout)
		defer cancel()
		defer func() {
			timedOut = errors.Is(ctx.Err(), context.DeadlineExceeded) && errors.Is(context.Cause(ctx), errTimeout)
		}()
	}
	defer func() {
		if p := recover(); p != nil {
			log.ErrorContext(ctx, "reconciler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	res, err = c.reconcile(ctx, obj)
	return res, false, err
}

// NeedLeaderElection reports whether the controller runs only on the
// leader: true, except for a partitioned controller (see
// Options.Partition), which runs on every replica.
func (c *Controller[T]) NeedLeaderElection() bool { return c.part == nil }
