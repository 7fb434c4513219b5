package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"runtime/debug"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/workqueue"
)

// Options configure [New]. The zero value is valid.
type Options struct {
	// Workers is the number of keys reconciled in parallel. Zero means 1.
	Workers int
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
	// discard.
	Logger *slog.Logger
}

// Metrics observes reconciles; the manager's Prometheus registry
// implements it.
type Metrics interface {
	// ObserveReconcile is called after each reconcile with its outcome:
	// "success", "requeue_after", "error", "terminal_error" or "panic".
	ObserveReconcile(controller, outcome string, d time.Duration)
}

// Controller reconciles the keys its sources enqueue. Create it with New,
// connect sources with For, Owns and Watches, then Start it (usually by
// adding it to a manager). It is a runnable: Start blocks.
type Controller struct {
	name  string
	rec   Reconciler
	opts  Options
	log   *slog.Logger
	queue *workqueue.Queue[Request]

	mu      sync.Mutex
	synced  []cache.Syncer // the sources' handler registrations
	started bool
	ids     atomic.Uint64
}

// New returns a controller named name (used in logs and metrics) that
// calls rec for each key.
func New(name string, rec Reconciler, opts Options) *Controller {
	if opts.Workers <= 0 {
		opts.Workers = 1
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Controller{
		name: name, rec: rec, opts: opts, log: log.With("controller", name),
		queue: workqueue.New(workqueue.Options[Request]{Name: name, RateLimiter: opts.RateLimiter, Metrics: opts.QueueMetrics}),
	}
}

// Name returns the controller's name.
func (c *Controller) Name() string { return c.name }

// Enqueue adds a key to the queue, as sources do. Keys enqueued several
// times before a worker takes them are reconciled once.
func (c *Controller) Enqueue(req Request) { c.queue.Add(req) }

// addSource records a source's registration; Start waits for all of them.
func (c *Controller) addSource(s cache.Syncer) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("controller %s: sources must be added before Start", c.name)
	}
	c.synced = append(c.synced, s)
	return nil
}

// Start waits until every source has delivered its initial list, then runs
// the workers until ctx ends. If a source cannot sync (its informer was
// refused with Forbidden or Unauthorized, or its resource does not exist),
// Start returns the cache.SyncError naming it at once, instead of waiting
// forever. It then stops taking keys, waits for the
// reconciles in progress (whose contexts are cancelled) and returns nil.
// A controller starts once.
func (c *Controller) Start(ctx context.Context) error {
	c.mu.Lock()
	if c.started {
		c.mu.Unlock()
		return fmt.Errorf("controller %s: started twice", c.name)
	}
	c.started = true
	synced := append([]cache.Syncer(nil), c.synced...)
	c.mu.Unlock()

	defer c.queue.ShutDown()
	if err := cache.WaitForCacheSync(ctx, synced...); err != nil {
		if ctx.Err() != nil {
			return nil // stopped before the sources synced
		}
		return fmt.Errorf("controller %s: %w", c.name, err)
	}
	c.log.Info("starting workers", "workers", c.opts.Workers)
	var wg sync.WaitGroup
	for range c.opts.Workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for c.next(ctx) {
			}
		}()
	}
	<-ctx.Done()
	c.queue.ShutDown()
	wg.Wait()
	c.log.Info("stopped")
	return nil
}

// next reconciles one key; false when the queue has shut down.
func (c *Controller) next(ctx context.Context) bool {
	req, ok := c.queue.Get()
	if !ok {
		return false
	}
	defer c.queue.Done(req)
	if ctx.Err() != nil {
		return true // shutting down: leave the key
	}
	id := strconv.FormatUint(c.ids.Add(1), 36)
	log := c.log.With("key", req.String(), "reconcileID", id)
	start := time.Now()
	res, err := c.reconcile(ctx, req, log)
	outcome := "success"
	switch {
	case err != nil && errors.Is(err, errPanic):
		outcome = "panic"
		c.queue.AddRateLimited(req)
	case err != nil && IsTerminal(err):
		outcome = "terminal_error"
		c.queue.Forget(req)
	case err != nil:
		outcome = "error"
		c.queue.AddRateLimited(req)
	case res.RequeueAfter > 0:
		outcome = "requeue_after"
		c.queue.Forget(req)
		c.queue.AddAfter(req, res.RequeueAfter)
	default:
		c.queue.Forget(req)
	}
	d := time.Since(start)
	switch {
	case err != nil && ctx.Err() == nil && apierrors.IsConflict(err):
		// Normal under optimistic concurrency (the cache was behind a
		// write): the retry reads fresh state. Not worth an error line.
		log.Info("reconcile hit a conflict; retrying", "err", err, "duration", d)
	case err != nil && ctx.Err() == nil:
		log.Error("reconcile failed", "err", err, "outcome", outcome, "duration", d)
	default:
		log.Debug("reconciled", "outcome", outcome, "duration", d, "requeueAfter", res.RequeueAfter)
	}
	if c.opts.Metrics != nil {
		c.opts.Metrics.ObserveReconcile(c.name, outcome, d)
	}
	return true
}

var errPanic = errors.New("reconciler panicked")

// reconcile calls the Reconciler with the timeout, turning a panic into an
// error.
func (c *Controller) reconcile(ctx context.Context, req Request, log *slog.Logger) (res Result, err error) {
	if c.opts.Timeout > 0 {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, c.opts.Timeout)
		defer cancel()
	}
	defer func() {
		if p := recover(); p != nil {
			log.Error("reconciler panicked", "panic", fmt.Sprint(p), "stack", string(debug.Stack()))
			err = fmt.Errorf("%w: %v", errPanic, p)
		}
	}()
	return c.rec.Reconcile(ctx, req)
}

// NeedLeaderElection reports that a controller runs only on the leader.
func (c *Controller) NeedLeaderElection() bool { return true }
