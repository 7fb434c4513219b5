package cache

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/loom-k8s/loom/client"
)

// Handler is told about the changes an [Informer] applies to its cache.
// The informer calls a handler's methods from one goroutine of that
// handler's own, one call at a time, in the order of the changes; calls
// for different handlers run concurrently. Objects given are shared with
// the cache and every other handler: do not change them. A handler that
// blocks delays only its own later calls. (An inline handler is called
// from the informer's goroutine instead, and holds up the cache's updates
// and the other handlers while it runs: see [HandlerOptions].Inline.) A
// handler that panics crashes the program, as any goroutine does; the
// informer does not recover.
//
// A handler's buffer has no fixed limit: it holds the changes that arrive
// while the handler is busy, so its size is the rate of changes times the
// handler's delay, and a handler that never returns makes it grow with
// every change. A quick handler stays far behind nothing: in the soak test
// (10⁶ changes to 10⁵ objects as fast as one core applies them) a handler
// that only counts was at most about a thousand changes behind.
// [Registration].Pending tells how far behind a handler is.
//
// Handlers see the state of the cache, not every event on the server:
// changes that happen while the watch is broken arrive as the difference
// between two lists (see [Delta]).
type Handler[T any] interface {
	// OnAdd is called for an object new to the cache. initial is true
	// for the objects of the first list, and for the objects already
	// cached when the handler was added (a handler added late first
	// receives the whole cache this way).
	OnAdd(obj T, initial bool)
	// OnUpdate is called when an object in the cache changes, with its
	// previous and new state. A periodic resync calls it with old and
	// new the same object.
	OnUpdate(old, new T)
	// OnDelete is called when an object leaves the cache, with its final
	// state. finalStateUnknown is true when the deletion was not seen but
	// inferred from a new list lacking the object: obj is then the last
	// state cached, which may be stale (see [Deleted]).
	OnDelete(obj T, finalStateUnknown bool)
}

// HandlerFuncs adapts functions to a [Handler]. A nil function ignores
// its kind of change.
type HandlerFuncs[T any] struct {
	Add    func(obj T, initial bool)
	Update func(old, new T)
	Delete func(obj T, finalStateUnknown bool)
}

// OnAdd calls Add, if set.
func (f HandlerFuncs[T]) OnAdd(obj T, initial bool) {
	if f.Add != nil {
		f.Add(obj, initial)
	}
}

// OnUpdate calls Update, if set.
func (f HandlerFuncs[T]) OnUpdate(old, new T) {
	if f.Update != nil {
		f.Update(old, new)
	}
}

// OnDelete calls Delete, if set.
func (f HandlerFuncs[T]) OnDelete(obj T, finalStateUnknown bool) {
	if f.Delete != nil {
		f.Delete(obj, finalStateUnknown)
	}
}

// HandlerOptions configure [Informer.AddHandler]. The zero value is
// valid.
type HandlerOptions struct {
	// ResyncPeriod is how often the handler is given every cached object
	// again, as OnUpdate(obj, obj), so that a level-based handler
	// revisits everything now and then. A resync reads the informer's
	// cache and involves neither the server nor the other handlers;
	// nothing in it is news, and it cannot repair a cache that missed
	// events. A resync that falls due while the handler has not finished
	// the previous one is skipped, so a slow handler's buffer does not
	// grow with resyncs. Zero means the informer's
	// [InformerOptions].ResyncPeriod; negative means never.
	ResyncPeriod time.Duration

	// Inline calls the handler on the informer's own goroutine right
	// after each change is applied to the cache, instead of from a
	// goroutine and buffer of the handler's own: one goroutine hand-off
	// less per event. The calls keep their order and never overlap. They
	// are made with no lock held, so a slow inline handler does not stop
	// the reflector from receiving events, nor anyone from reading the
	// cache; but while it runs, the cache is not updated and no other
	// handler is called, so it should be quick: putting keys on a work
	// queue (what the controller package's For does) is the intended use.
	// A handler added while objects are cached receives them before
	// AddHandler returns (that call holds up the cache while it runs);
	// resyncs come from a timer goroutine.
	// False (the default) gives the handler its own goroutine.
	Inline bool
}

// Registration is a handler added to an informer. It is a [Syncer], so
// [WaitForCacheSync] can wait for handlers to have seen the first list:
//
//   - Name is the informer's name and the handler's number;
//   - HasSynced reports whether the handler has returned from the calls
//     for every object of the informer's first list (or, for a handler
//     added after that, for every object the cache held when it was
//     added). It stays false while the informer has not synced;
//   - LastError is the informer's [Informer.LastError].
type Registration interface {
	Syncer
	// Remove stops calls to the handler: once it returns, no call starts,
	// though a call in progress finishes. Notifications still buffered
	// are dropped. Remove may be called from the handler itself, and more
	// than once.
	Remove()
	// Pending returns how many notifications wait in the handler's
	// buffer: the changes it has yet to be called with. It is always 0
	// for an inline handler, which has no buffer.
	Pending() int
}

// ErrNilHandler: AddHandler was given a nil handler.
var ErrNilHandler = errors.New("nil handler")

// AddHandler adds a handler to the informer, before or after Start. A
// handler added while objects are cached is first given all of them as
// OnAdd(obj, true), in no particular order, then every later change. It
// fails with [ErrStopped] once the informer has stopped, or with
// [ErrNilHandler].
func (i *Informer[T]) AddHandler(h Handler[T], opts HandlerOptions) (Registration, error) {
	if h == nil {
		return nil, fmt.Errorf("cache: informer %s: %w", i.name, ErrNilHandler)
	}
	period := opts.ResyncPeriod
	if period == 0 {
		period = i.resync
	}
	l := &listener[T]{
		inf:    i,
		id:     i.nextID.Add(1),
		h:      h,
		resync: max(period, 0),
		inline: opts.Inline,
		wake:   make(chan struct{}, 1),
		done:   make(chan struct{}),
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	if i.state == stateStopped {
		return nil, fmt.Errorf("cache: informer %s: %w", i.name, ErrStopped)
	}
	objs := i.store.List()
	if l.inline {
		for _, obj := range objs {
			l.deliver(notification[T]{kind: notifyAdd, obj: obj, flag: true})
		}
	} else {
		l.buf = make([]notification[T], 0, len(objs))
		for _, obj := range objs {
			l.pushLocked(notification[T]{kind: notifyAdd, obj: obj, flag: true}) // l is not shared yet
		}
	}
	if i.synced {
		l.setTarget()
	}
	i.handlers = append(i.handlers, l)
	if i.state == stateRunning {
		i.startListener(l)
	}
	return l, nil
}

// AddObjectHandler is AddHandler for code that does not know the
// informer's object type, such as a controller watching the objects it
// owns: h is called with the same objects, as client.Object.
func (i *Informer[T]) AddObjectHandler(h Handler[client.Object], opts HandlerOptions) (Registration, error) {
	if h == nil {
		return nil, fmt.Errorf("cache: informer %s: %w", i.name, ErrNilHandler)
	}
	return i.AddHandler(objectHandler[T]{h}, opts)
}

// objectHandler passes a typed informer's calls on to a Handler of
// client.Object.
type objectHandler[T client.Object] struct{ h Handler[client.Object] }

func (o objectHandler[T]) OnAdd(obj T, initial bool)    { o.h.OnAdd(obj, initial) }
func (o objectHandler[T]) OnUpdate(old, new T)          { o.h.OnUpdate(old, new) }
func (o objectHandler[T]) OnDelete(obj T, unknown bool) { o.h.OnDelete(obj, unknown) }

// startListener starts l's goroutine: for an inline handler, only its
// resync timer, if it has one. The caller holds mu.
func (i *Informer[T]) startListener(l *listener[T]) {
	ctx := i.runCtx
	switch {
	case !l.inline:
		i.wg.Go(func() { l.run(ctx) })
	case l.resync > 0:
		i.wg.Go(func() { l.runResyncs(ctx) })
	}
}

// remove takes l off the handler list. An inline handler may call it from
// within a call, holding mu: it is only stopped here, and notify drops it
// from the list.
func (i *Informer[T]) remove(l *listener[T]) {
	if l.inline {
		l.stop()
		return
	}
	i.mu.Lock()
	for n, h := range i.handlers {
		if h == l {
			i.handlers = append(i.handlers[:n:n], i.handlers[n+1:]...)
			break
		}
	}
	i.mu.Unlock()
	l.stop()
}

// resyncTo queues OnUpdate(obj, obj) for every cached object to l,
// unless the informer has not synced or l has not finished its previous
// resync. An inline handler is called at once, outside mu.
func (i *Informer[T]) resyncTo(l *listener[T]) {
	i.mu.Lock()
	if !i.synced {
		i.mu.Unlock()
		return
	}
	objs := i.store.List()
	if l.inline {
		// Reserve the calls under mu, so that they count towards the
		// handler's progress in order, but make them after releasing it.
		n := 0
		for n < len(objs) && l.reserve() {
			n++
		}
		i.mu.Unlock()
		for _, obj := range objs[:n] {
			l.callReserved(notification[T]{kind: notifyUpdate, old: obj, obj: obj})
		}
		return
	}
	defer i.mu.Unlock()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped || l.delivered < l.resyncMark {
		return
	}
	for _, obj := range objs {
		l.pushLocked(notification[T]{kind: notifyUpdate, old: obj, obj: obj})
	}
	l.resyncMark = l.queued
}

type notifyKind uint8

const (
	notifyAdd notifyKind = iota + 1
	notifyUpdate
	notifyDelete
)

// notification is one call to make to a handler. flag is initial for
// adds and finalStateUnknown for deletes.
type notification[T any] struct {
	kind     notifyKind
	flag     bool
	old, obj T
}

// listener runs one handler: an unbounded buffer of notifications, and
// a goroutine that delivers them in order.
type listener[T client.Object] struct {
	inf    *Informer[T]
	id     int64
	h      Handler[T]
	resync time.Duration // 0: never
	inline bool          // called by the informer's goroutine; no buffer
	wake   chan struct{} // one slot: the buffer became non-empty
	done   chan struct{} // closed by stop
	callMu sync.Mutex    // held during an inline handler's call

	mu         sync.Mutex
	buf        []notification[T] // buf[head:] is pending
	head       int
	queued     uint64 // notifications ever queued
	delivered  uint64 // notifications the handler has returned from
	target     uint64 // delivered count that makes HasSynced true
	targetSet  bool
	resyncMark uint64 // queued count at the end of the last resync
	stopped    bool
}

// pushLocked queues n. The caller holds l.mu.
func (l *listener[T]) pushLocked(n notification[T]) {
	if l.stopped {
		return
	}
	l.queued++
	l.appendLocked(n)
}

// pushReserved queues n, which reserve has counted.
func (l *listener[T]) pushReserved(n notification[T]) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.appendLocked(n)
	}
}

// appendLocked adds n to the buffer, waking the handler's goroutine if
// the buffer was empty.
func (l *listener[T]) appendLocked(n notification[T]) {
	l.buf = append(l.buf, n)
	if len(l.buf)-l.head == 1 {
		select {
		case l.wake <- struct{}{}:
		default:
		}
	}
}

// next takes the oldest pending notification.
func (l *listener[T]) next() (notification[T], bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.head == len(l.buf) {
		return notification[T]{}, false
	}
	n := l.buf[l.head]
	l.buf[l.head] = notification[T]{} // drop the references
	l.head++
	switch {
	case l.head == len(l.buf):
		l.buf, l.head = l.buf[:0], 0
	case l.head >= 1024 && l.head >= len(l.buf)/2:
		// Compact, so that a buffer that never empties does not grow
		// without bound behind its head.
		k := copy(l.buf, l.buf[l.head:])
		clear(l.buf[k:])
		l.buf, l.head = l.buf[:k], 0
	}
	return n, true
}

func (l *listener[T]) setTarget() {
	l.mu.Lock()
	l.target, l.targetSet = l.queued, true
	l.mu.Unlock()
}

// HasSynced implements [Registration].
func (l *listener[T]) HasSynced() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.targetSet && l.delivered >= l.target
}

// Name implements [Registration].
func (l *listener[T]) Name() string { return fmt.Sprintf("%s handler %d", l.inf.name, l.id) }

// LastError implements [Registration].
func (l *listener[T]) LastError() error { return l.inf.LastError() }

// Remove implements [Registration].
func (l *listener[T]) Remove() { l.inf.remove(l) }

func (l *listener[T]) stop() {
	l.mu.Lock()
	defer l.mu.Unlock()
	if !l.stopped {
		l.stopped = true
		close(l.done)
		clear(l.buf)
		l.buf, l.head = nil, 0
	}
}

// run delivers notifications until l is stopped or ctx ends.
func (l *listener[T]) run(ctx context.Context) {
	var resync <-chan time.Time
	if l.resync > 0 {
		t := l.inf.clock.NewTimer(l.resync)
		defer t.Stop()
		resync = t.C()
		rearm := func() { l.inf.resyncTo(l); t.Reset(l.resync) }
		for {
			select {
			case <-resync:
				rearm()
			default:
			}
			if !l.step(ctx, resync, rearm) {
				return
			}
		}
	}
	for l.step(ctx, nil, nil) {
	}
}

// step delivers one notification, or waits for one (resyncing if the
// resync timer fires meanwhile). It returns false when l must end.
func (l *listener[T]) step(ctx context.Context, resync <-chan time.Time, onResync func()) bool {
	select {
	case <-l.done:
		return false
	case <-ctx.Done():
		return false
	default:
	}
	n, ok := l.next()
	if !ok {
		select {
		case <-l.done:
			return false
		case <-ctx.Done():
			return false
		case <-l.wake:
		case <-resync:
			onResync()
		}
		return true
	}
	l.call(n)
	l.mu.Lock()
	l.delivered++
	l.mu.Unlock()
	return true
}

func (l *listener[T]) call(n notification[T]) {
	switch n.kind {
	case notifyAdd:
		l.h.OnAdd(n.obj, n.flag)
	case notifyUpdate:
		l.h.OnUpdate(n.old, n.obj)
	case notifyDelete:
		l.h.OnDelete(n.obj, n.flag)
	}
}

// deliver calls an inline handler with n at once, unless it was removed.
// It reports whether l is still in service afterwards.
func (l *listener[T]) deliver(n notification[T]) bool {
	if !l.reserve() {
		return false
	}
	l.callReserved(n)
	return !l.isStopped()
}

// reserve counts a notification as queued, unless l was removed: it must
// follow, by callReserved for an inline handler or pushReserved for
// another. It reports whether l is in service.
func (l *listener[T]) reserve() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.stopped {
		return false
	}
	l.queued++
	return true
}

// callReserved makes a call that reserve counted, unless l was removed
// since; either way it counts as delivered. callMu keeps an inline
// handler's calls apart: they come from the popping goroutine, from
// AddHandler and from the resync timer.
func (l *listener[T]) callReserved(n notification[T]) {
	l.callMu.Lock()
	defer l.callMu.Unlock()
	if !l.isStopped() {
		l.call(n)
	}
	l.mu.Lock()
	l.delivered++
	l.mu.Unlock()
}

// runResyncs resyncs an inline handler every l.resync until l is stopped
// or ctx ends.
func (l *listener[T]) runResyncs(ctx context.Context) {
	t := l.inf.clock.NewTimer(l.resync)
	defer t.Stop()
	for {
		select {
		case <-l.done:
			return
		case <-ctx.Done():
			return
		case <-t.C():
			l.inf.resyncTo(l)
			t.Reset(l.resync)
		}
	}
}

// Pending returns the number of buffered notifications.
func (l *listener[T]) Pending() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	return len(l.buf) - l.head
}

func (l *listener[T]) isStopped() bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.stopped
}
