package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math/rand/v2"
	"net"
	"reflect"
	"sync"
	"syscall"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
)

// StreamingList says whether a Reflector fills its store with a streaming
// list (a watch with sendInitialEvents=true) or a paginated list.
type StreamingList uint8

const (
	// StreamingAuto tries a streaming list and falls back to a paginated
	// list, for good, when the server refuses it.
	StreamingAuto StreamingList = iota
	// StreamingOff always uses paginated lists.
	StreamingOff
)

// initialEventsEnd is the annotation on the bookmark that ends the initial
// events of a streaming list.
const initialEventsEnd = "k8s.io/initial-events-end"

// ReflectorOptions configure [NewReflector]. The zero value is valid.
type ReflectorOptions struct {
	// Name names the reflector in logs and errors. Default: the object
	// type, such as "*v1.Pod".
	Name string
	// Logger receives progress and retry messages. Nil means discard.
	Logger *slog.Logger
	// ErrorHandler is called with every list and watch error, before the
	// reflector backs off and tries again, so that failures such as RBAC
	// denials or a missing CRD are seen where they happen. Nil means they
	// are only logged (and kept for LastError).
	ErrorHandler func(error)
	// PageSize is the limit of each page of a paginated list. Zero means
	// 500.
	PageSize int64
	// Streaming chooses streaming or paginated lists. Default StreamingAuto.
	Streaming StreamingList
	// MinWatchTimeout is the least time a watch is asked to last; each
	// watch asks for a random time between it and twice it, so that many
	// reflectors do not re-watch in step. Zero means five minutes.
	MinWatchTimeout time.Duration
	// InitialBackoff and MaxBackoff bound the wait after an error, which
	// doubles with each consecutive error and is jittered by up to half.
	// Zero means 800 ms and 30 s.
	InitialBackoff, MaxBackoff time.Duration

	clock clock.Clock // tests only
}

// Reflector keeps a store in step with the server: it lists (or streams a
// list), replaces the store's contents with the result, then watches from
// the list's resourceVersion and applies each event:
//
//   - bookmarks are requested and only advance the resourceVersion;
//   - a watch that made progress (it moved the resourceVersion on, or lived
//     for a second or more) and then ended, cleanly or not (a closed or
//     reset connection, a truncated frame, the server's timeout), is a
//     normal end: the reflector watches again at once from the last
//     resourceVersion it saw, and does not report an error;
//   - after 410 Gone (the resourceVersion was compacted) it lists again,
//     with a consistent read, and replaces the store; the first relist
//     after progress is made at once;
//   - a round that made no progress is a failure: it is reported to
//     ErrorHandler, kept for LastError, and followed by a jittered wait
//     that grows with each consecutive failure and starts over after the
//     next progress. While the server cannot be reached (connections
//     refused or reset before an answer, 503, 504) the waits are short
//     probes, at most a second, so that the reflector resumes within about
//     a second of a restarted server answering again; for other failures
//     they grow to MaxBackoff, and a 429's Retry-After is honoured.
//
// An informer's store takes a list in pieces: each page of a paginated
// list, and each batch of a streaming list's initial events, is queued as
// it arrives, and the end of the list queues the deletions of what it
// lacked. A list that fails midway leaves the pieces it delivered in
// place (they are real states of a consistent snapshot, newer than the
// cache), and the next list's end deletes what that one lacks. Any other
// store gets one Replace with the whole list.
//
// The store is written only by the reflector's Run goroutine.
type Reflector[T client.Object] struct {
	lw    ListerWatcher[T]
	store Writer[T]
	opts  ReflectorOptions
	log   *slog.Logger
	clock clock.Clock

	mu       sync.Mutex
	rv       string
	synced   bool
	lastErr  error
	noStream bool // the server refused streaming lists
	stats    ReflectorStats

	// relistAsked says that Relist was called since Run last looked;
	// cancelRound ends the list or watch under way. waiting are the
	// channels of Relist calls that no list has begun to serve; filling
	// those of the calls that the list under way (or the next) serves.
	relistAsked      bool
	cancelRound      context.CancelFunc
	waiting, filling []chan struct{}

	// narrowKeep is the test of the newest Narrow call that Run has not
	// taken yet, and narrowing the channels of those calls.
	narrowKeep func(T) bool
	narrowing  []chan struct{}
}

// minProgress is how long a watch must live, with or without events, for
// its end to count as normal rather than as a failure.
const minProgress = time.Second

// ReflectorStats count what a Reflector has done, for tests and metrics.
type ReflectorStats struct {
	// Lists counts the full lists (paginated or streaming) that replaced
	// the store's contents: the first, and one per relist after 410 Gone.
	Lists int
	// StreamingLists counts the Lists that were streaming lists.
	StreamingLists int
	// Watches counts the watches started, streaming lists included.
	Watches int
	// Errors counts the errors reported.
	Errors int
	// BrokenWatches counts watches that made progress and then broke (a
	// reset connection, a truncated frame): they are watched again at once
	// and are not counted in Errors.
	BrokenWatches int
}

// Stats returns the counts so far.
func (r *Reflector[T]) Stats() ReflectorStats {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.stats
}

// NewReflector returns a reflector that fills store from lw. It does
// nothing until Run.
func NewReflector[T client.Object](lw ListerWatcher[T], store Writer[T], opts ReflectorOptions) *Reflector[T] {
	if opts.Name == "" {
		opts.Name = reflect.TypeFor[T]().String()
	}
	if opts.PageSize <= 0 {
		opts.PageSize = 500
	}
	if opts.MinWatchTimeout <= 0 {
		opts.MinWatchTimeout = 5 * time.Minute
	}
	if opts.InitialBackoff <= 0 {
		opts.InitialBackoff = 800 * time.Millisecond
	}
	if opts.MaxBackoff <= 0 {
		opts.MaxBackoff = 30 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Reflector[T]{lw: lw, store: store, opts: opts, log: log.With("reflector", opts.Name), clock: clock.OrReal(opts.clock), noStream: opts.Streaming == StreamingOff}
}

// HasSynced reports whether the store has been filled by a first full list.
func (r *Reflector[T]) HasSynced() bool {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.synced
}

// LastSyncResourceVersion returns the resourceVersion of the newest list,
// event or bookmark applied to the store.
func (r *Reflector[T]) LastSyncResourceVersion() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.rv
}

// LastError returns the last list or watch error, or nil once a list or
// watch has succeeded after it.
func (r *Reflector[T]) LastError() error {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.lastErr
}

// errRelist means the resourceVersion is gone and the store must be
// refilled by a new list.
var errRelist = errors.New("resourceVersion expired")

// ReflectorError is what a Reflector reports: which phase failed, and why.
type ReflectorError struct {
	Name  string // the reflector's name
	Phase string // "list", "streaming list", "watch"
	Err   error
}

func (e *ReflectorError) Error() string {
	return fmt.Sprintf("cache: reflector %s: %s: %v", e.Name, e.Phase, e.Err)
}

func (e *ReflectorError) Unwrap() error { return e.Err }

// Relist makes the reflector list again at once, ending the list or
// watch under way, as after 410 Gone: for a ListerWatcher whose selectors
// changed (see ListWatchOptions.LabelSelectorFunc). The list replaces the
// store's contents, so the objects that no longer match leave it. The
// channel returned is closed once a list that began after the call has
// been written to the store; it is never closed if Run has ended or does
// not run.
func (r *Reflector[T]) Relist() <-chan struct{} {
	ch := make(chan struct{})
	r.mu.Lock()
	defer r.mu.Unlock()
	r.waiting = append(r.waiting, ch)
	r.relistAsked = true
	if r.cancelRound != nil {
		r.cancelRound()
	}
	return ch
}

// Narrow is Relist for a selector that only narrowed: the new one selects
// a subset of what the old one did, and keep tells whether an object
// matches it. The reflector ends the watch under way, lets go of the
// cached objects that keep rejects (an informer's handlers see them
// deleted, as after Relist), and watches again with the new selector
// from where it was, without a list. A store other than an informer's,
// and a reflector that has not finished its list, list again instead, as
// Relist does. The channel returned is closed once that is done; it is
// never closed if Run has ended or does not run.
func (r *Reflector[T]) Narrow(keep func(T) bool) <-chan struct{} {
	ch := make(chan struct{})
	r.mu.Lock()
	defer r.mu.Unlock()
	if _, ok := r.store.(pruner[T]); !ok {
		r.waiting = append(r.waiting, ch)
		r.relistAsked = true
	} else {
		r.narrowing = append(r.narrowing, ch)
		r.narrowKeep = keep
	}
	if r.cancelRound != nil {
		r.cancelRound()
	}
	return ch
}

// pruner is a [Writer] that can let go of objects without a list: an
// informer's (see [DeltaFIFO] prune).
type pruner[T any] interface {
	prune(keep func(T) bool) error
}

// Run lists and watches until ctx ends; it then returns nil. It returns an
// error only if the store refuses a write (a key function failing), which
// retrying cannot fix.
func (r *Reflector[T]) Run(ctx context.Context) error {
	x := &reflectorRun[T]{r: r, ctx: ctx}
	defer x.endRound()
	r.mu.Lock()
	st := newReflectorState(r.rv, r.noStream, r.opts.InitialBackoff, r.opts.MaxBackoff)
	r.mu.Unlock()
	st, act := step(st, reflectorEvent{kind: evStart})
	for ctx.Err() == nil {
		switch act.kind {
		case actList, actStream, actWatch, actPrune:
			if asks := x.begin(act); len(asks) > 0 {
				// Relist or Narrow was called: decide again.
				for _, ask := range asks {
					st, act = step(st, ask)
				}
				continue
			}
		}
		ev, err := x.perform(act)
		if ctx.Err() != nil {
			return nil
		}
		rv := st.rv
		st, act = step(st, ev)
		if act.kind != actRead {
			x.endRound()
		}
		switch {
		case act.kind == actStop:
			return err
		case act.kind == actNone || act.kind == actUnexpected:
			return fmt.Errorf("cache: reflector %s: internal error: %s after %s in phase %s", r.opts.Name, act, ev.kind, st.phase)
		}
		switch {
		case (ev.kind == evEvent || ev.kind == evBookmark) && st.rv != rv:
			r.mu.Lock()
			r.rv = st.rv
			r.mu.Unlock()
		case ev.kind == evStreamRefused:
			r.log.Info("server refused a streaming list; using paginated lists", "err", err)
		}
		if ev.class == failGone {
			r.log.Info("resourceVersion expired; listing again", "resourceVersion", st.rv)
		}
		if act.broken {
			r.mu.Lock()
			r.stats.BrokenWatches++
			r.mu.Unlock()
			r.log.Info("watch ended; watching again", "err", err)
		}
		if act.report {
			if err == nil {
				err = &ReflectorError{Name: r.opts.Name, Phase: "watch", Err: errShortWatch}
			}
			r.report(err)
		}
	}
	return nil
}

// reflectorRun is what Run holds while it carries out step's actions.
type reflectorRun[T client.Object] struct {
	r   *Reflector[T]
	ctx context.Context // Run's

	// round is the context of the list or watch under way, which
	// Relist and Narrow cancel; cancel ends it.
	round  context.Context
	cancel context.CancelFunc
	// w is the open watch, asked for at opened; fresh says none of its
	// events has been read yet.
	w      Watch[T]
	opened time.Time
	fresh  bool
	// narrowed are the channels of the Narrow calls taken and not served
	// yet, and keep the test of the newest.
	narrowed []chan struct{}
	keep     func(T) bool
}

// begin is called before a list, watch or prune begins. Under mu, it
// takes the Relist and Narrow calls made since it last looked and returns
// them as events for step, which may change the action; or, if there are
// none, it gets the action going: a list takes over the calls it serves,
// and a list or watch gets a context that those calls cancel.
func (x *reflectorRun[T]) begin(act reflectorAction) (asks []reflectorEvent) {
	r := x.r
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.relistAsked {
		r.relistAsked = false
		asks = append(asks, reflectorEvent{kind: evRelist})
	}
	if len(r.narrowing) > 0 {
		x.narrowed = append(x.narrowed, r.narrowing...)
		x.keep = r.narrowKeep
		r.narrowing, r.narrowKeep = nil, nil
		asks = append(asks, reflectorEvent{kind: evNarrow})
	}
	if len(asks) > 0 {
		return asks
	}
	switch act.kind {
	case actPrune:
		return nil
	case actList, actStream:
		// The list about to begin serves the Relist calls made so far,
		// and the Narrow calls taken: it uses the new selector.
		r.filling = append(r.filling, r.waiting...)
		r.filling = append(r.filling, x.narrowed...)
		r.waiting, x.narrowed, x.keep = nil, nil, nil
	}
	x.round, x.cancel = context.WithCancel(x.ctx)
	r.cancelRound = x.cancel
	return nil
}

// endRound closes the watch and ends the context of the list or watch
// that just ended.
func (x *reflectorRun[T]) endRound() {
	if x.w != nil {
		x.w.Stop()
		x.w = nil
	}
	if x.cancel != nil {
		x.cancel()
		x.r.mu.Lock()
		x.r.cancelRound = nil
		x.r.mu.Unlock()
		x.round, x.cancel = nil, nil
	}
}

// perform carries out act and returns what came of it, with the error
// behind it, if any.
func (x *reflectorRun[T]) perform(act reflectorAction) (reflectorEvent, error) {
	r := x.r
	switch act.kind {
	case actList:
		rv, err := r.list(x.round)
		if err != nil {
			return x.failed(evListFailed, err), err
		}
		return reflectorEvent{kind: evListed, rv: rv}, nil
	case actStream:
		w, rv, err := r.streamingList(x.round)
		switch {
		case errors.Is(err, errNoStreaming):
			return reflectorEvent{kind: evStreamRefused}, err
		case err != nil:
			return x.failed(evListFailed, err), err
		}
		x.w, x.opened, x.fresh = w, r.clock.Now(), true
		return reflectorEvent{kind: evStreamed, rv: rv}, nil
	case actWatch:
		opened := r.clock.Now()
		w, err := r.openWatch(x.round, act.rv)
		if err != nil {
			return x.failed(evWatchFailed, err), err
		}
		x.w, x.opened, x.fresh = w, opened, true
		return reflectorEvent{kind: evOpened}, nil
	case actRead:
		return x.read()
	case actPrune:
		if err := r.store.(pruner[T]).prune(x.keep); err != nil {
			return reflectorEvent{kind: evStoreFailed}, fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, err)
		}
		for _, ch := range x.narrowed {
			close(ch)
		}
		x.narrowed, x.keep = nil, nil
		return reflectorEvent{kind: evPruned}, nil
	case actWait:
		d := act.waitMin
		if act.waitMax > act.waitMin {
			d += time.Duration(rand.Int64N(int64(act.waitMax-act.waitMin) + 1)) // jitter
		}
		r.sleep(x.ctx, max(d, act.waitFloor))
		return reflectorEvent{kind: evWaited}, nil
	}
	panic(fmt.Sprintf("cache: reflector: cannot perform %s", act))
}

// failed is the event of a list or watch that ended with err, which is
// not nil unless the watch ended cleanly.
func (x *reflectorRun[T]) failed(kind eventKind, err error) reflectorEvent {
	switch {
	case errors.Is(err, errStore):
		return reflectorEvent{kind: evStoreFailed}
	case x.round != nil && x.round.Err() != nil:
		return reflectorEvent{kind: kind, class: failInterrupted}
	}
	class, after := classify(err)
	return reflectorEvent{kind: kind, class: class, retryAfter: after}
}

// read reads the open watch's next event and applies it to the store.
func (x *reflectorRun[T]) read() (reflectorEvent, error) {
	r := x.r
	for {
		ev, err := x.w.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = nil // the server ended the watch
			} else {
				err = &ReflectorError{Name: r.opts.Name, Phase: "watch", Err: err}
			}
			return x.ended(err), err
		}
		if x.fresh {
			x.fresh = false
			r.succeeded()
		}
		var serr error
		switch ev.Type {
		case watch.Added:
			serr = r.store.Add(ev.Object)
		case watch.Modified:
			serr = r.store.Update(ev.Object)
		case watch.Deleted:
			serr = r.store.Delete(ev.Object)
		case watch.Bookmark:
			return reflectorEvent{kind: evBookmark, rv: ev.Object.GetResourceVersion()}, nil
		case watch.Error:
			err := ev.Err()
			if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				err = errRelist
			} else {
				err = &ReflectorError{Name: r.opts.Name, Phase: "watch", Err: err}
			}
			return x.ended(err), err
		default:
			continue
		}
		if serr != nil {
			return reflectorEvent{kind: evStoreFailed}, fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, serr)
		}
		return reflectorEvent{kind: evEvent, rv: ev.Object.GetResourceVersion()}, nil
	}
}

// ended is the event of the open watch ending with err (nil: cleanly).
func (x *reflectorRun[T]) ended(err error) reflectorEvent {
	ev := x.failed(evEnded, err)
	ev.lived = x.r.clock.Now().Sub(x.opened)
	return ev
}

// servedLocked closes the channels of the Relist calls that the list just
// written to the store served. The caller holds mu.
func (r *Reflector[T]) servedLocked() {
	for _, ch := range r.filling {
		close(ch)
	}
	r.filling = nil
}

// errStore marks a write the store refused.
var errStore = errors.New("store refused a write")

func (r *Reflector[T]) report(err error) {
	r.mu.Lock()
	r.lastErr = err
	r.stats.Errors++
	r.mu.Unlock()
	r.log.Warn("list/watch failed; retrying", "err", err)
	if r.opts.ErrorHandler != nil {
		r.opts.ErrorHandler(err)
	}
}

func (r *Reflector[T]) succeeded() {
	r.mu.Lock()
	r.lastErr = nil
	r.mu.Unlock()
}

// unreachable reports whether err says the server could not be reached or
// is not serving yet (as while it restarts), rather than that it refused
// the request.
func unreachable(err error) bool {
	if err == nil {
		return false
	}
	if apierrors.IsServiceUnavailable(err) || apierrors.IsTimeout(err) || apierrors.IsServerTimeout(err) {
		return true
	}
	var st apierrors.APIStatus
	if errors.As(err, &st) {
		return false // the server answered
	}
	var ne net.Error
	return errors.Is(err, syscall.ECONNREFUSED) || errors.Is(err, syscall.ECONNRESET) ||
		errors.Is(err, io.EOF) || errors.Is(err, io.ErrUnexpectedEOF) || errors.As(err, &ne)
}

// sleep waits d, or until ctx ends.
func (r *Reflector[T]) sleep(ctx context.Context, d time.Duration) {
	if d <= 0 {
		return
	}
	t := r.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
	case <-t.C():
	}
}

var errNoStreaming = errors.New("streaming list not supported")

// list fills the store with a paginated, consistent list, and returns its
// resourceVersion. A store that takes a list in pieces (an informer's)
// gets each page as it arrives.
func (r *Reflector[T]) list(ctx context.Context) (string, error) {
	sw, pieces := r.store.(streamWriter[T])
	var items []T
	var rv string
	n := 0
	opts := metav1.ListOptions{Limit: r.opts.PageSize}
	if pieces {
		sw.beginReplace()
	}
	for {
		page, err := r.lw.List(ctx, opts)
		if err != nil {
			if opts.Continue != "" && apierrors.IsResourceExpired(err) {
				// The snapshot expired midway: one unpaginated list.
				items, n, opts = nil, 0, metav1.ListOptions{}
				if pieces {
					sw.beginReplace()
				}
				continue
			}
			return "", &ReflectorError{Name: r.opts.Name, Phase: "list", Err: err}
		}
		n += len(page.Items)
		if pieces {
			if err := sw.replaceItems(page.Items); err != nil {
				return "", fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, err)
			}
		} else {
			items = append(items, page.Items...)
		}
		rv = page.ResourceVersion
		if page.Continue == "" {
			break
		}
		opts.Continue = page.Continue
	}
	var err error
	if pieces {
		err = sw.endReplace()
	} else {
		err = r.store.Replace(items)
	}
	if err != nil {
		return "", fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, err)
	}
	r.mu.Lock()
	r.rv, r.synced, r.lastErr = rv, true, nil
	r.stats.Lists++
	r.servedLocked()
	r.mu.Unlock()
	r.log.Debug("listed", "objects", n, "resourceVersion", rv)
	return rv, nil
}

// streamWriter is a [Writer] that takes a full list in pieces, so that
// the list never waits whole beside the cache: an informer's. Between
// beginReplace and endReplace, replaceItems queues objects of the list;
// endReplace then does what the rest of Replace does. A beginReplace
// abandons an unfinished list.
type streamWriter[T any] interface {
	beginReplace()
	replaceItems(objs []T) error
	endReplace() error
}

// streamBatch is how many initial events of a streaming list are handed
// to a streamWriter at once.
const streamBatch = 256

// watchTimeout is a random watch duration in [min, 2*min).
func (r *Reflector[T]) watchTimeout() *int64 {
	s := int64((r.opts.MinWatchTimeout + time.Duration(rand.Int64N(int64(r.opts.MinWatchTimeout)))) / time.Second)
	return &s
}

// streamingList fills the store from the initial events of a watch with
// sendInitialEvents=true, and returns that watch, still open, with the
// resourceVersion its initial events ended at. It returns errNoStreaming
// (wrapped) if the server refuses.
func (r *Reflector[T]) streamingList(ctx context.Context) (Watch[T], string, error) {
	send := true
	r.countWatch()
	w, err := r.lw.Watch(ctx, metav1.ListOptions{
		SendInitialEvents:    &send,
		ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan,
		AllowWatchBookmarks:  true,
		TimeoutSeconds:       r.watchTimeout(),
	})
	if err != nil {
		if apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) || apierrors.IsMethodNotSupported(err) {
			return nil, "", r.refuseStreaming(err)
		}
		return nil, "", &ReflectorError{Name: r.opts.Name, Phase: "streaming list", Err: err}
	}
	rv, err := r.initialEvents(w)
	if err != nil {
		w.Stop()
		return nil, "", err
	}
	return w, rv, nil
}

// refuseStreaming records that the server refused a streaming list, with
// err: the reflector uses paginated lists from now on.
func (r *Reflector[T]) refuseStreaming(err error) error {
	r.mu.Lock()
	r.noStream = true
	r.mu.Unlock()
	return fmt.Errorf("%w: %w", errNoStreaming, err)
}

// initialEvents fills the store from the initial events of a streaming
// list's watch, and returns the resourceVersion they ended at.
func (r *Reflector[T]) initialEvents(w Watch[T]) (string, error) {
	sw, pieces := r.store.(streamWriter[T])
	if pieces {
		sw.beginReplace()
	}
	var items []T
	n := 0
	for {
		ev, err := w.Next()
		if err != nil {
			if errors.Is(err, io.EOF) {
				err = io.ErrUnexpectedEOF // the stream ended before the initial events did
			}
			return "", &ReflectorError{Name: r.opts.Name, Phase: "streaming list", Err: err}
		}
		switch ev.Type {
		case watch.Added, watch.Modified:
			items = append(items, ev.Object)
			n++
			if pieces && len(items) == streamBatch {
				if err := sw.replaceItems(items); err != nil {
					return "", fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, err)
				}
				items = make([]T, 0, streamBatch)
			}
			continue
		case watch.Bookmark:
			if ev.Object.GetAnnotations()[initialEventsEnd] != "true" {
				continue
			}
		case watch.Error:
			err := ev.Err()
			if apierrors.IsBadRequest(err) || apierrors.IsInvalid(err) {
				return "", r.refuseStreaming(err)
			}
			return "", &ReflectorError{Name: r.opts.Name, Phase: "streaming list", Err: err}
		default:
			continue
		}
		// The end of the initial events: they are the full state.
		if pieces {
			err = sw.replaceItems(items)
			if err == nil {
				err = sw.endReplace()
			}
		} else {
			err = r.store.Replace(items)
		}
		if err != nil {
			return "", fmt.Errorf("cache: reflector %s: %w: %w", r.opts.Name, errStore, err)
		}
		rv := ev.Object.GetResourceVersion()
		r.mu.Lock()
		r.rv, r.synced, r.lastErr = rv, true, nil
		r.stats.Lists++
		r.stats.StreamingLists++
		r.servedLocked()
		r.mu.Unlock()
		r.log.Debug("streamed list", "objects", n, "resourceVersion", rv)
		return rv, nil
	}
}

// errShortWatch is reported when a watch ends cleanly at once, with no
// events, so that a server that keeps closing watches is not hammered.
var errShortWatch = errors.New("watch closed at once with no events")

// openWatch opens a watch from resourceVersion rv. It returns errRelist if
// rv is gone.
func (r *Reflector[T]) openWatch(ctx context.Context, rv string) (Watch[T], error) {
	r.countWatch()
	w, err := r.lw.Watch(ctx, metav1.ListOptions{
		ResourceVersion:     rv,
		AllowWatchBookmarks: true,
		TimeoutSeconds:      r.watchTimeout(),
	})
	if err != nil {
		if apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
			return nil, errRelist
		}
		return nil, &ReflectorError{Name: r.opts.Name, Phase: "watch", Err: err}
	}
	return w, nil
}

func (r *Reflector[T]) countWatch() {
	r.mu.Lock()
	r.stats.Watches++
	r.mu.Unlock()
}
