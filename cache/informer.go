package cache

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"reflect"
	"runtime"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/intern"
)

// Informer errors. They usually arrive wrapped; test with errors.Is.
var (
	// ErrStopped: the informer has stopped (its Start returned), so it
	// takes no handlers and will never sync if it has not.
	ErrStopped = errors.New("informer stopped")
	// ErrAlreadyStarted: Start was called a second time. Every Start of
	// Loom reports it so, wrapped with what was started: informers,
	// factories, controllers, the manager (also for Add after Start) and
	// the webhook server. Each runs once; make a new one to start again.
	ErrAlreadyStarted = errors.New("already started")
)

// MutationDetectorEnv is the environment variable that switches the
// mutation detector on for every informer when set to "true" (see
// [InformerOptions].DetectMutations). It is read once, by [NewInformer].
const MutationDetectorEnv = "LOOM_CACHE_MUTATION_DETECTOR"

// InformerOptions configure [NewInformer]. The zero value is valid.
type InformerOptions[T client.Object] struct {
	// Name names the informer in logs and errors, and is the default name
	// of its reflector. Default: the object type, such as "*v1.Pod".
	Name string
	// Logger receives the informer's and its reflector's messages. Nil
	// means discard.
	Logger *slog.Logger
	// Indexers are custom indexes of the cache, in addition to the
	// namespace and label indexes every [Store] keeps. Default: none.
	// More can be added with [Informer.AddIndexer].
	Indexers Indexers[T]
	// Transform, when set, is applied to every object that arrives from
	// the server (list items and watch events, deletions included)
	// before it is queued, stored and handed to handlers; what it returns
	// is what the cache holds. It runs on the reflector's goroutine, one
	// object at a time. The object it is given is fresh from the decoder
	// and owned by the informer alone, so it may change it in place and
	// return it (as [StripManagedFields] does); with Sharing set to
	// ShareAll it may set the object's fields but not write into the
	// slices, maps and pointers it holds, which other objects share. It
	// must keep the name, namespace and resourceVersion. An object that a
	// relist brings with the resourceVersion already cached is not
	// transformed again: the cached object is kept. An error is treated
	// as a broken informer: it stops, and Start returns the error.
	// Default nil: objects are stored as decoded.
	Transform func(T) (T, error)
	// Sharing says which identical parts of decoded objects the cache
	// holds once (see [Sharing]). Default ShareAuto: everything without a
	// Transform, managed-fields blobs only with one. Shared parts make
	// the rule below (never change a cached object) stricter: a change
	// to one object's container changes every object sharing it.
	Sharing Sharing
	// DropManagedFields leaves metadata.managedFields out while decoding,
	// which is cheaper than removing them with a Transform such as
	// [StripManagedFields] (it also keeps ShareAuto at ShareAll). It
	// applies where Sharing does: to objects decoded by Loom's rest
	// client, typed or unstructured, on either wire. Default false.
	DropManagedFields bool
	// ResyncPeriod is the resync period of handlers whose
	// [HandlerOptions].ResyncPeriod is zero. Default 0: no resync.
	ResyncPeriod time.Duration
	// Reflector configures the reflector that lists and watches. Its
	// Name and Logger default to the informer's; its ErrorHandler, if
	// set, is called as documented there. The zero value is valid.
	Reflector ReflectorOptions
	// DetectMutations switches on the mutation detector, which keeps a
	// deep copy of every object in the cache and reports objects that
	// someone changed (see [Informer.CheckMutations]). It doubles the
	// memory of the cache and costs a deep comparison per object per
	// check: it is meant for tests. Default false, unless the
	// environment variable LOOM_CACHE_MUTATION_DETECTOR is "true" when
	// NewInformer is called.
	DetectMutations bool
	// MutationCheckPeriod is how often the mutation detector checks the
	// cache while the informer runs; it also checks once when the
	// informer stops. Zero means 10 s.
	MutationCheckPeriod time.Duration
	// OnMutation is called with a [*MutationError] when a check of the
	// mutation detector finds changed objects. Nil means the error is
	// logged at level Error. In either case the check when the informer
	// stops makes Start return the error as well.
	OnMutation func(error)

	clock clock.Clock // tests only
}

// Informer keeps a cache of one resource in step with the server and
// tells handlers about every change: a [Reflector] lists and watches,
// feeding a [DeltaFIFO] whose known objects are the cache (a [Store]),
// and one goroutine pops the deltas, applies them to the cache and
// queues a notification for every handler. Each handler has its own
// goroutine and an unbounded buffer, so a slow handler delays only
// itself; it never blocks the other handlers, the cache or the
// reflector.
//
// # Objects are shared
//
// Objects in the cache, returned by [Informer.Indexer] and the readers
// over it, and given to handlers are shared by all of them:
// nobody may change them. Copy an object (DeepCopy) before changing it.
// The mutation detector ([InformerOptions].DetectMutations) finds
// offenders in tests. By default cached objects of one shape also share
// their identical parts (see [Sharing]): a change to one Pod's container
// would change the containers of every Pod of its workload.
//
// # Life cycle
//
// Handlers may be added before or after [Informer.Start], which runs the
// informer until its context ends and returns only once every goroutine
// it started has ended. An informer runs once.
//
// All methods are safe for concurrent use. The zero value is not usable;
// call [NewInformer].
type Informer[T client.Object] struct {
	name      string
	log       *slog.Logger
	clock     clock.Clock
	transform func(T) (T, error)
	decode    intern.Options // how the reflector's responses are decoded
	resync    time.Duration
	store     *Store[T]
	fifo      *DeltaFIFO[T]
	refl      *Reflector[T]
	lw        ListerWatcher[T]

	// While a list is being taken (replacing), reused holds the cached
	// objects it brought back unchanged, which were not decoded again
	// (see cachedItem). Only the reflector's goroutine uses them.
	// A fresh list began with an empty cache and nothing queued: none of
	// its items can be cached already.
	replacing bool
	fresh     bool
	reused    map[any]struct{}
	lookup    func(namespace, name, resourceVersion string) any // cachedItem, made once
	previous  func(namespace, name, resourceVersion string) any // previousVersion, made once

	mutations      *mutationDetector[T] // nil when off
	mutationPeriod time.Duration
	onMutation     func(error)

	// mu guards the handler list and the life-cycle state. The popping
	// goroutine holds it while it writes the cache and queues
	// notifications, so that a handler added meanwhile sees either the
	// cache before a change and its notification, or the cache after it
	// and no notification.
	mu       sync.Mutex
	state    int // stateNew, stateRunning, stateStopped
	synced   bool
	handlers []*listener[T]
	runCtx   context.Context // while running: handlers' goroutines end with it
	// leaveTable takes the cache back from the sharing table (see
	// addToTable): set once, by the goroutine that first sees the sync;
	// Start calls it after they have returned.
	tableOnce  sync.Once
	leaveTable func()
	wg         sync.WaitGroup // the goroutines of handlers
	exitErr    error          // why Start returned, once it has
	nextID     atomic.Int64   // numbers handlers

	// pending holds the notifications that process made for the key it
	// just applied. The popping goroutine delivers them once Pop has
	// returned, with no lock held: first the calls to inline handlers,
	// so that a slow inline handler holds up neither the reflector
	// (which keeps filling the DeltaFIFO) nor readers of the informer;
	// then the other handlers' notifications go to their buffers, so
	// that an inline handler has seen a change before any handler with
	// a goroutine of its own can. Only the popping goroutine uses it.
	pending []pendingCall[T]

	// processed counts the pops the popping goroutine has processed, and
	// delivered those whose notifications it has delivered since (set
	// after deliverPending). follow waits for delivered to catch up, so
	// that Relist and Narrow return after the inline handlers heard of
	// the change. deliveredMu guards delivered and deliveredWake, which
	// is closed and replaced each time delivered moves.
	processed atomic.Uint64 // only the popping goroutine adds
	// processingNanos adds up the time from the start of each process to
	// the end of its deliverPending (see Stats); processStart is when the
	// last process began. Only the popping goroutine writes them.
	processingNanos atomic.Int64
	processStart    time.Time
	// processingHist counts the processes by how long each took: index
	// k counts those above latencyBounds[k-1] and at most
	// latencyBounds[k], the last those above every bound.
	processingHist [len(latencyBounds) + 1]atomic.Uint64
	deliveredMu    sync.Mutex
	delivered      uint64
	deliveredWake  chan struct{}
}

// pendingCall is one notification to deliver to a handler.
type pendingCall[T client.Object] struct {
	l *listener[T]
	n notification[T]
}

const (
	stateNew = iota
	stateRunning
	stateStopped
)

// NewInformer returns an informer that fills its cache from lw. It does
// nothing until Start.
func NewInformer[T client.Object](lw ListerWatcher[T], opts InformerOptions[T]) *Informer[T] {
	return newInformer(lw, opts, stripsOnly(opts.Transform))
}

// newInformer is NewInformer, told whether the Transform only strips
// managed fields (see StripManagedFields).
func newInformer[T client.Object](lw ListerWatcher[T], opts InformerOptions[T], stripOnly bool) *Informer[T] {
	if opts.Name == "" {
		opts.Name = reflect.TypeFor[T]().String()
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	if opts.MutationCheckPeriod <= 0 {
		opts.MutationCheckPeriod = 10 * time.Second
	}
	i := &Informer[T]{
		name:           opts.Name,
		log:            log.With("informer", opts.Name),
		clock:          clock.OrReal(opts.clock),
		transform:      opts.Transform,
		resync:         opts.ResyncPeriod,
		store:          NewStore(StoreOptions[T]{Indexers: opts.Indexers}),
		mutationPeriod: opts.MutationCheckPeriod,
		onMutation:     opts.OnMutation,
		decode:         decodeOptions(opts.Sharing, opts.Transform != nil && !stripOnly, opts.DropManagedFields || stripOnly),
	}
	i.lookup, i.previous = i.cachedItem, i.previousVersion
	i.decode.Cached = i.cacheLookup
	if opts.DetectMutations || os.Getenv(MutationDetectorEnv) == "true" {
		i.mutations = &mutationDetector[T]{copies: map[string]T{}}
	}
	i.fifo = NewDeltaFIFO(DeltaFIFOOptions[T]{KnownObjects: i.store})
	ro := opts.Reflector
	if ro.Name == "" {
		ro.Name = opts.Name
	}
	if ro.Logger == nil {
		ro.Logger = log
	}
	i.refl = NewReflector(lw, Writer[T](informerWriter[T]{i}), ro)
	i.lw = lw
	return i
}

// ErrNoResource: an informer's ListerWatcher does not say which resource
// it lists (only ListWatch's does).
var ErrNoResource = errors.New("the informer's ListerWatcher names no resource")

// Resource returns the resource the informer lists, when its
// ListerWatcher comes from [ListWatch]: looked up on first use for a
// custom type, so that it may make a request then. It fails with
// [ErrNoResource] for other ListerWatchers.
func (i *Informer[T]) Resource(ctx context.Context) (client.Resource, error) {
	r, ok := i.lw.(interface {
		Resource(ctx context.Context) (client.Resource, error)
	})
	if !ok {
		return client.Resource{}, fmt.Errorf("cache: informer %s: %w", i.name, ErrNoResource)
	}
	return r.Resource(ctx)
}

// Name returns the informer's name.
func (i *Informer[T]) Name() string { return i.name }

// Indexer returns a read-only view of the cache. Objects it returns are
// shared: do not change them.
func (i *Informer[T]) Indexer() Indexer[T] { return i.store }

// AddIndexer adds an index to the cache, indexing the objects already in
// it. It fails with [ErrIndexExists] for a name in use, or an
// [*IndexError]:
//
//	foos.AddIndexer("byOwner", func(foo *v1.Foo) ([]string, error) { ... })
func (i *Informer[T]) AddIndexer(name string, fn IndexFunc[T]) error {
	return i.store.AddIndexers(Indexers[T]{name: fn})
}

// AddObjectIndexer is AddIndexer for code that does not know the
// informer's object type, such as a controller indexing the objects it
// owns by their owner: fn is called with the cached objects, as
// client.Object.
func (i *Informer[T]) AddObjectIndexer(name string, fn IndexFunc[client.Object]) error {
	return i.AddIndexer(name, func(obj T) ([]string, error) { return fn(obj) })
}

// HasSynced reports whether the cache has been filled by the first full
// list and every object of that list has been through the cache (its
// notifications queued to every handler). Handlers may not have
// processed them yet: see [Registration].HasSynced for that.
func (i *Informer[T]) HasSynced() bool {
	i.mu.Lock()
	defer i.mu.Unlock()
	return i.synced
}

// Relist makes the informer list again at once and waits until the cache
// holds what that list found: objects that no longer match the
// ListerWatcher's selectors have left it (handlers see them deleted) and
// those that newly match have come in (handlers see them added). It is
// for a ListerWatcher whose selectors change (see
// ListWatchOptions.LabelSelectorFunc and FactoryOptions.KindSelector).
// Before Start, it waits for the first list. It returns ctx's error if
// ctx ends first, and an error wrapping ErrStopped if the informer has
// stopped or stops first.
func (i *Informer[T]) Relist(ctx context.Context) error {
	return i.follow(ctx, "Relist", i.refl.Relist)
}

// follow asks the reflector, through ask, to follow a selector that
// changed, and waits until it has and the cache has taken what it wrote.
func (i *Informer[T]) follow(ctx context.Context, what string, ask func() <-chan struct{}) error {
	if err := ctx.Err(); err != nil {
		return err
	}
	i.mu.Lock()
	var stopped <-chan struct{} // nil, never ready, until Start
	if i.runCtx != nil {
		stopped = i.runCtx.Done()
	}
	state := i.state
	i.mu.Unlock()
	if state == stateStopped {
		return fmt.Errorf("cache: informer %s: %s: %w", i.name, what, ErrStopped)
	}
	for _, wait := range []func() <-chan struct{}{ask, i.fifo.popped, i.deliveredUpTo} {
		select {
		case <-wait():
		case <-ctx.Done():
			return ctx.Err()
		case <-stopped:
			return fmt.Errorf("cache: informer %s: %s: %w", i.name, what, ErrStopped)
		}
	}
	// A new selector often lets many objects go at once: give back
	// their room now rather than keep up to a third more.
	i.store.compact()
	return nil
}

// deliveredUpTo returns a channel that is closed once the notifications of
// every pop processed so far have been delivered to the handlers (the
// inline ones called, the others queued).
func (i *Informer[T]) deliveredUpTo() <-chan struct{} {
	want := i.processed.Load()
	ch := make(chan struct{})
	go func() {
		defer close(ch)
		i.deliveredMu.Lock()
		defer i.deliveredMu.Unlock()
		for i.delivered < want {
			if i.deliveredWake == nil {
				i.deliveredWake = make(chan struct{})
			}
			wake := i.deliveredWake
			i.deliveredMu.Unlock()
			<-wake
			i.deliveredMu.Lock()
		}
	}()
	return ch
}

// noteDelivered records that the popping goroutine has delivered the
// notifications of every pop it processed; last, that it has stopped (no
// one waits for it any more).
func (i *Informer[T]) noteDelivered(last bool) {
	i.deliveredMu.Lock()
	defer i.deliveredMu.Unlock()
	i.delivered = i.processed.Load()
	if last {
		i.delivered = math.MaxUint64
	}
	if i.deliveredWake != nil {
		close(i.deliveredWake)
		i.deliveredWake = nil
	}
}

// Narrow is Relist for a selector that only narrowed: keep tells whether
// a cached object (as the Transform left it) matches the new selector,
// which must select no object that the old one did not. The informer
// lets go of the cached objects that keep rejects (handlers see them
// deleted, as after Relist) and watches on with the new selector from
// where it was, without listing again, so the API server sends nothing
// for the objects it keeps. Narrow returns once the cache holds only
// what keep accepts; before the first list has ended, it waits for a
// list with the new selector. It fails as Relist does.
func (i *Informer[T]) Narrow(ctx context.Context, keep func(T) bool) error {
	return i.follow(ctx, "Narrow", func() <-chan struct{} { return i.refl.Narrow(keep) })
}

// LastError returns why the informer is not keeping up, or nil:
//
//   - once Start has returned, an error wrapping [ErrStopped] (the
//     informer will not change any more) and what Start returned, if
//     anything;
//   - otherwise the reflector's last list or watch error (a
//     [*ReflectorError] wrapping the API error, so that
//     apierrors.IsForbidden and friends work), or nil once a list or
//     watch has succeeded after it; for an informer over a set of
//     namespaces (FactoryOptions.Namespaces), also why the list of a
//     namespace added while it runs keeps failing.
func (i *Informer[T]) LastError() error {
	i.mu.Lock()
	stopped, err := i.state == stateStopped, i.exitErr
	i.mu.Unlock()
	if stopped {
		if err == nil {
			return fmt.Errorf("cache: informer %s: %w", i.name, ErrStopped)
		}
		return fmt.Errorf("cache: informer %s: %w: %w", i.name, ErrStopped, err)
	}
	err = i.refl.LastError()
	if l, ok := i.lw.(interface{ lastError() error }); ok {
		if nerr := l.lastError(); nerr != nil {
			err = errors.Join(err, fmt.Errorf("cache: informer %s: %w", i.name, nerr))
		}
	}
	return err
}

// Start runs the informer until ctx ends: the reflector, the goroutine
// that applies deltas to the cache, every handler's goroutine and, when
// on, the mutation detector's periodic check. It returns once all of
// them have ended: nil after a clean stop; an error when the informer
// broke (a Transform or key function failed), after stopping; a
// [*MutationError] when the mutation detector's last check found
// changed objects; or [ErrAlreadyStarted] at once on a second call.
// Handlers still buffered when ctx ends are not delivered.
func (i *Informer[T]) Start(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	i.mu.Lock()
	if i.state != stateNew {
		i.mu.Unlock()
		return fmt.Errorf("cache: informer %s: %w", i.name, ErrAlreadyStarted)
	}
	i.state = stateRunning
	i.runCtx = ctx
	for _, l := range i.handlers {
		i.startListener(l)
	}
	i.mu.Unlock()
	i.log.Debug("starting")

	var wg sync.WaitGroup
	var reflErr error
	wg.Go(func() {
		if reflErr = i.refl.Run(intern.WithOptions(ctx, i.decode)); reflErr != nil {
			cancel()
		}
	})
	wg.Go(func() { i.popLoop(ctx) })
	if i.mutations != nil {
		wg.Go(func() { i.checkMutationsEvery(ctx) })
	}
	<-ctx.Done()
	wg.Wait()
	i.fifo.Close()
	if i.leaveTable != nil { // set by the reflector's or the popping goroutine, both returned
		i.leaveTable()
	}

	// From here AddHandler fails, so no handler goroutine starts while
	// they are waited for.
	i.mu.Lock()
	i.state, i.exitErr = stateStopped, reflErr
	for _, l := range i.handlers {
		l.stop()
	}
	i.mu.Unlock()
	i.wg.Wait()

	err := reflErr
	if i.mutations != nil {
		if merr := i.CheckMutations(); merr != nil {
			i.reportMutation(merr)
			err = errors.Join(err, merr)
		}
	}
	i.mu.Lock()
	i.exitErr = err
	i.mu.Unlock()
	i.log.Debug("stopped", "err", err)
	return err
}

// popLoop pops deltas until ctx ends, applying them to the cache and
// queueing notifications.
func (i *Informer[T]) popLoop(ctx context.Context) {
	defer i.noteDelivered(true)
	for ctx.Err() == nil {
		before := i.processed.Load()
		err := i.fifo.Pop(ctx, i.process)
		i.deliverPending()
		if i.processed.Load() != before {
			took := time.Since(i.processStart)
			i.processingNanos.Add(int64(took))
			k, _ := slices.BinarySearch(latencyBounds[:], took)
			i.processingHist[k].Add(1)
		}
		i.noteDelivered(false)
		var perr *ProcessError
		switch {
		case err == nil:
		case errors.As(err, &perr):
			// The cache refused a write (an index function failed): the
			// object is missing from the cache until its next change.
			i.log.Error("cannot apply a change to the cache", "key", perr.Key, "err", perr.Err)
		default:
			return // ctx ended, or the queue was closed
		}
		i.checkSynced()
	}
}

// addToTable tells the sharing table of the informer's cache, by its
// resource, until Start returns: a write of a copy of a cached object then
// looks at the cached object for a shared part changed in place (see
// intern.Table.CachedChanged and client.SharedChangedError). It runs on
// the popping goroutine as the informer syncs, before HasSynced reports
// it (the first list has resolved the resource by then), so that every
// write after a wait for the sync is checked. An informer that shares no
// parts, or whose ListerWatcher does not name its resource, is not added.
func (i *Informer[T]) addToTable(ctx context.Context) {
	i.tableOnce.Do(func() {
		if i.decode.Share == nil {
			return
		}
		res, err := i.Resource(ctx)
		if err != nil {
			return
		}
		i.leaveTable = i.decode.Share.AddCache(res.Resource.GroupResource().String(), func(namespace, name string) (any, bool) {
			return i.store.Get(key(namespace, name))
		})
	})
}

// checkSynced marks the informer synced once the DeltaFIFO is. It is
// called after every pop and after every Replace, so that an empty first
// list, which leaves nothing to pop, marks it too. Handlers' targets are
// what they have been queued by then: as the DeltaFIFO is synced, that
// includes every notification of the first list.
func (i *Informer[T]) checkSynced() {
	i.mu.Lock()
	synced := i.synced
	i.mu.Unlock()
	if synced || !i.fifo.HasSynced() {
		return
	}
	i.mu.Lock()
	ctx := i.runCtx
	i.mu.Unlock()
	i.addToTable(ctx)
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.synced {
		return
	}
	i.synced = true
	for _, l := range i.handlers {
		l.setTarget()
	}
	i.log.Debug("synced", "objects", i.store.Len())
}

// process applies one key's deltas to the cache and queues the
// notifications. It runs inside DeltaFIFO.Pop, with the queue locked.
func (i *Informer[T]) process(key string, deltas []Delta[T]) error {
	i.processStart = time.Now()
	i.processed.Add(1)
	i.mu.Lock()
	defer i.mu.Unlock()
	var errs []error
	for _, d := range deltas {
		old, exists := i.store.Get(key)
		switch d.Type {
		case Deleted:
			i.store.deleteKey(key)
			i.mutations.forget(key)
			if exists {
				i.notify(notification[T]{kind: notifyDelete, obj: d.Object, flag: d.FinalStateUnknown})
			}
		default: // Added, Updated, Replaced, Sync
			if err := i.store.writeKey(key, d.Object); err != nil {
				errs = append(errs, err)
				continue
			}
			i.mutations.keep(key, d.Object)
			switch {
			case !exists:
				i.notify(notification[T]{kind: notifyAdd, obj: d.Object, flag: !i.synced})
			case (d.Type == Replaced || d.Type == Sync) && old.GetResourceVersion() == d.Object.GetResourceVersion():
				// A relist (or resync) found the object unchanged: no news.
			default:
				i.notify(notification[T]{kind: notifyUpdate, old: old, obj: d.Object})
			}
		}
	}
	return errors.Join(errs...)
}

// notify queues n to every handler, on i.pending, which deliverPending
// delivers once the locks are released. The caller holds mu. It drops
// inline handlers that were removed (see remove).
func (i *Informer[T]) notify(n notification[T]) {
	removed := false
	for _, l := range i.handlers {
		if !l.inline {
			// Counted as queued now, under mu, so that a handler's sync
			// target (see checkSynced) includes it.
			if l.reserve() {
				i.pending = append(i.pending, pendingCall[T]{l, n})
			}
			continue
		}
		if l.reserve() {
			i.pending = append(i.pending, pendingCall[T]{l, n})
		} else {
			removed = true
		}
	}
	if removed {
		i.handlers = slices.DeleteFunc(i.handlers, (*listener[T]).isStopped)
	}
}

// deliverPending delivers the notifications the last Pop queued, holding no
// lock of the informer or its DeltaFIFO: first the calls to inline
// handlers, in order, then the other handlers' notifications, to their
// buffers.
func (i *Informer[T]) deliverPending() {
	for _, c := range i.pending {
		if c.l.inline {
			c.l.callReserved(c.n)
		}
	}
	for n, c := range i.pending {
		if !c.l.inline {
			c.l.pushReserved(c.n)
		}
		i.pending[n] = pendingCall[T]{} // drop the references
	}
	i.pending = i.pending[:0]
}

// informerWriter is what the reflector writes to: it applies the
// informer's Transform and passes the result on to the DeltaFIFO.
type informerWriter[T client.Object] struct{ i *Informer[T] }

func (w informerWriter[T]) Add(obj T) error    { return w.write(w.i.fifo.Add, obj) }
func (w informerWriter[T]) Update(obj T) error { return w.write(w.i.fifo.Update, obj) }
func (w informerWriter[T]) Delete(obj T) error { return w.write(w.i.fifo.Delete, obj) }

func (w informerWriter[T]) write(to func(T) error, obj T) error {
	if _, ok := w.i.reused[any(obj)]; ok {
		return to(obj) // cached, and not decoded again: transformed already
	}
	obj, err := w.i.transformed(obj)
	if err != nil {
		return err
	}
	return to(obj)
}

func (w informerWriter[T]) prune(keep func(T) bool) error { return w.i.fifo.prune(keep) }

func (w informerWriter[T]) Replace(objs []T) error {
	for n, obj := range objs {
		t, err := w.i.transformed(obj)
		if err != nil {
			return err
		}
		objs[n] = t
	}
	if err := w.i.fifo.Replace(objs); err != nil {
		return err
	}
	w.i.checkSynced()
	return nil
}

// cacheLookup is the informer's intern.Options.Cached. Decoders look a
// list's items, and a watch's ADDED objects (a streaming list's items), up
// with cachedItem while a list is being taken into a cache that holds
// objects. Outside a list, an event's object is never one the cache holds
// at its resourceVersion, but the cache may hold its previous version,
// which previousVersion gives when sharing is on. An empty cache holds
// nothing, nor does a fresh list find anything: the decoders then do not
// read the key and resourceVersion from the wire at all.
func (i *Informer[T]) cacheLookup() func(namespace, name, resourceVersion string) any {
	switch {
	case i.store.Len() == 0:
		return nil
	case !i.replacing:
		if i.decode.Share == nil {
			return nil // nothing would be taken from it (ShareOff)
		}
		return i.previous
	case i.fresh:
		return nil
	}
	return i.lookup
}

// previousVersion returns the cached object under a watch event's key,
// unless it has the event's resourceVersion: the decoder takes from it
// the parts the event did not change.
func (i *Informer[T]) previousVersion(namespace, name, resourceVersion string) any {
	old, ok := i.store.Get(objectKey(namespace, name))
	if !ok || old.GetResourceVersion() == resourceVersion {
		return nil
	}
	return old
}

// cachedItem returns the cached object under a list item's key. When it
// has the item's resourceVersion, the item need not be decoded, and the
// relist keeps the cached object; otherwise the decoder takes from it the
// parts the new version did not change.
func (i *Informer[T]) cachedItem(namespace, name, resourceVersion string) any {
	old, ok := i.store.Get(objectKey(namespace, name))
	if !ok {
		return nil
	}
	if old.GetResourceVersion() != resourceVersion {
		return old
	}
	if i.reused == nil {
		i.reused = map[any]struct{}{}
	}
	i.reused[any(old)] = struct{}{}
	return old
}

// beginReplace, replaceItems and endReplace take a list in pieces (see
// streamWriter): each piece is transformed and queued as it arrives.
func (w informerWriter[T]) beginReplace() {
	w.i.replacing, w.i.reused = true, nil
	w.i.fresh = w.i.fifo.beginReplace()
}

func (w informerWriter[T]) replaceItems(objs []T) error {
	for n, obj := range objs {
		if _, ok := w.i.reused[any(obj)]; ok {
			// Cached, and not decoded again: no transform either.
			continue
		}
		// A relisted object whose resourceVersion is the cached one's is
		// the cached object: keep that one, and let the new copy go. A
		// fresh list has nothing cached to compare with.
		if !w.i.fresh {
			if key, err := keyOf(w.i.store.keyFunc, obj); err == nil {
				if old, ok := w.i.store.Get(key); ok && obj.GetResourceVersion() != "" && old.GetResourceVersion() == obj.GetResourceVersion() {
					objs[n] = old
					continue
				}
			}
		}
		t, err := w.i.transformed(obj)
		if err != nil {
			return err
		}
		objs[n] = t
	}
	return w.i.fifo.replaceItems(objs)
}

func (w informerWriter[T]) endReplace() error {
	w.i.replacing, w.i.fresh, w.i.reused = false, false, nil
	if err := w.i.fifo.endReplace(); err != nil {
		return err
	}
	w.i.checkSynced()
	return nil
}

// TransformError reports that an informer's Transform failed for an
// object. The informer stops; its Start returns this error.
type TransformError struct {
	Informer  string // the informer's name
	Namespace string // the object's namespace and name
	Name      string
	Err       error // what the Transform returned
}

func (e *TransformError) Error() string {
	return fmt.Sprintf("cache: informer %s: transform of %s/%s: %v", e.Informer, e.Namespace, e.Name, e.Err)
}

// Unwrap returns Err.
func (e *TransformError) Unwrap() error { return e.Err }

func (i *Informer[T]) transformed(obj T) (T, error) {
	if i.transform == nil {
		return obj, nil
	}
	t, err := i.transform(obj)
	if err != nil {
		return t, &TransformError{Informer: i.name, Namespace: obj.GetNamespace(), Name: obj.GetName(), Err: err}
	}
	return t, nil
}

// StripManagedFields is a ready-made [InformerOptions].Transform that
// drops metadata.managedFields, which controllers rarely read and which
// can be a large part of an object's size. It changes obj in place and
// returns it: an informer's Transform is given objects fresh from the
// decoder, which nobody else holds. It never fails.
//
// An informer (or a factory) given StripManagedFields as its Transform
// knows what it does: it keeps ShareAuto at ShareAll, as with no
// Transform, and its decoders skip managed fields as with
// DropManagedFields, so this familiar way costs no more than that one.
// It knows it when it is named with a type where the options are set
// (StripManagedFields[*corev1.Pod], or StripManagedFields[client.Object]
// for a factory or a manager); instantiated inside generic code of your
// own, or wrapped in another function, it is a Transform like any other.
func StripManagedFields[T client.Object](obj T) (T, error) {
	obj.SetManagedFields(nil)
	return obj, nil
}

// stripManagedFieldsName is the name the runtime gives every
// instantiation of StripManagedFields.
var stripManagedFieldsName = reflect.TypeFor[Store[int]]().PkgPath() + ".StripManagedFields["

// stripsOnly reports whether fn is StripManagedFields, which changes
// nothing a cached object shares with another: it only sets the object's
// own managedFields field. Functions cannot be compared in Go, but the
// runtime names each instantiation of a generic function after it.
func stripsOnly(fn any) bool {
	v := reflect.ValueOf(fn)
	if !v.IsValid() || v.Kind() != reflect.Func || v.IsNil() {
		return false
	}
	f := runtime.FuncForPC(v.Pointer())
	return f != nil && strings.HasPrefix(f.Name(), stripManagedFieldsName)
}
