package cache

import (
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// namespacesLW lists and watches a resource in a set of namespaces, each
// with requests of its own, so that a role granted in those namespaces
// only is enough. Its List walks the namespaces one after the other, page
// by page; its Watch merges one watch per namespace into one stream.
//
// Each namespace resumes from its own resourceVersion: the newest its
// list, events and bookmarks delivered. A watch ignores the
// resourceVersion the reflector passes (the newest of any namespace, which
// another namespace may not have reached) and resumes each namespace from
// its own, so that no namespace skips an event.
//
// The set can change while the informer runs (namespacesLW.set). A
// namespace added lists once: its objects come as ADDED events on the open
// watch (or the next one), then its watch joins the others. A namespace
// removed stops being watched; the factory then narrows the informer, so
// its objects leave the cache without a list of any other namespace.
//
// A cluster-scoped resource has no namespaces: the requests go to the
// whole resource, as a plain ListWatch's do.
type namespacesLW[T client.Object] struct {
	base clientLW[T] // the client and selectors; its Namespace is not used

	mu   sync.Mutex
	ns   []string          // the namespaces, sorted
	rv   map[string]string // per namespace, the resourceVersion to resume from; "" until listed
	cur  *mergedWatch[T]   // the open watch, if any
	errs map[string]error  // per namespace added while running, why its list failed last
}

// namespaceRetry bounds the waits between the lists of a namespace added
// while the informer runs whose list fails (a role not granted yet, say):
// it is tried again, with waits that double up to the second bound,
// while the other namespaces' events keep coming.
var namespaceRetry = [2]time.Duration{time.Second, 30 * time.Second}

// lastError returns why the lists of namespaces added while running
// fail, or nil when none does.
func (l *namespacesLW[T]) lastError() error {
	l.mu.Lock()
	defer l.mu.Unlock()
	var errs []error
	for _, ns := range l.ns {
		if err := l.errs[ns]; err != nil {
			errs = append(errs, fmt.Errorf("namespace %s: %w", ns, err))
		}
	}
	return errors.Join(errs...)
}

func (l *namespacesLW[T]) setErr(ns string, err error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	if err == nil {
		delete(l.errs, ns)
		return
	}
	l.errs[ns] = err
}

func newNamespacesLW[T client.Object](c *client.Client[T], opts ListWatchOptions, namespaces []string) *namespacesLW[T] {
	opts.Namespace = ""
	l := &namespacesLW[T]{base: clientLW[T]{c: c, opts: opts}, rv: map[string]string{}, errs: map[string]error{}}
	l.ns = sortedSet(namespaces)
	return l
}

func sortedSet(namespaces []string) []string {
	out := slices.Clone(namespaces)
	slices.Sort(out)
	return slices.Compact(out)
}

// Resource returns the client's resource.
func (l *namespacesLW[T]) Resource(ctx context.Context) (client.Resource, error) {
	return l.base.Resource(ctx)
}

// namespaced reports whether the resource is namespaced (looking it up
// for a custom type).
func (l *namespacesLW[T]) namespaced(ctx context.Context) (bool, error) {
	res, err := l.base.c.Resource(ctx)
	return res.Namespaced, err
}

// continueSep separates the namespace from the server's own continue
// token in the tokens List hands out.
const continueSep = "\x1f"

// List returns one page: of the namespace the continue token names (the
// first namespace without one), and a continue token for the rest of
// that namespace or for the next namespace. The page's resourceVersion is
// its namespace's; the last namespace's last page ends the list.
func (l *namespacesLW[T]) List(ctx context.Context, o metav1.ListOptions) (*client.List[T], error) {
	if ok, err := l.namespaced(ctx); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return l.base.List(ctx, o)
	}
	l.mu.Lock()
	set := l.ns
	var ns, inner string
	if o.Continue == "" {
		clear(l.rv) // a new list: every namespace starts over
		if len(set) > 0 {
			ns = set[0]
		}
	} else {
		var ok bool
		if ns, inner, ok = strings.Cut(o.Continue, continueSep); !ok {
			l.mu.Unlock()
			return nil, apierrors.NewBadRequest(fmt.Sprintf("cache: continue token %q was not made by this informer", o.Continue))
		}
	}
	l.mu.Unlock()
	if ns == "" { // no namespaces: an empty list
		return &client.List[T]{ListMeta: metav1.ListMeta{ResourceVersion: "0"}}, nil
	}
	o.Continue = inner
	if inner == "" {
		o.ResourceVersion, o.ResourceVersionMatch = "", "" // each namespace's first page: a consistent read
	}
	page, err := l.base.c.Namespace(ns).List(ctx, l.base.with(o))
	if err != nil {
		return nil, err
	}
	if page.Continue != "" {
		page.Continue = ns + continueSep + page.Continue
		return page, nil
	}
	l.mu.Lock()
	defer l.mu.Unlock()
	if i, found := slices.BinarySearch(l.ns, ns); found {
		l.rv[ns] = page.ResourceVersion
		i++
		if i < len(l.ns) {
			page.Continue = l.ns[i] + continueSep
		}
	} else if i < len(l.ns) { // removed meanwhile: go on with the next
		page.Continue = l.ns[i] + continueSep
	}
	return page, nil
}

// Watch opens one watch per namespace, each from its own resourceVersion,
// and merges them. A namespace not listed yet (added since the last list)
// is listed first, its objects delivered as ADDED events. Streaming lists
// are refused: the informer lists instead.
func (l *namespacesLW[T]) Watch(ctx context.Context, o metav1.ListOptions) (Watch[T], error) {
	if ok, err := l.namespaced(ctx); err != nil || !ok {
		if err != nil {
			return nil, err
		}
		return l.base.Watch(ctx, o)
	}
	if o.SendInitialEvents != nil && *o.SendInitialEvents {
		return nil, apierrors.NewBadRequest("cache: a streaming list over several namespaces is not supported; listing each namespace")
	}
	wctx, cancel := context.WithCancel(ctx)
	m := &mergedWatch[T]{lw: l, ctx: wctx, cancel: cancel, opts: o, events: make(chan nsEvent[T]), parts: map[string]*watchPart{}}
	l.mu.Lock()
	if old := l.cur; old != nil { // not stopped by its reader: stop it now
		l.mu.Unlock()
		old.Stop()
		l.mu.Lock()
	}
	l.cur = m
	start := slices.Clone(l.ns)
	rvs := maps.Clone(l.rv)
	l.mu.Unlock()
	// Open the watches of listed namespaces before returning, so that a
	// refusal (403, 410) is the caller's error at once.
	for _, ns := range start {
		if rvs[ns] == "" {
			continue
		}
		w, err := l.watchOne(wctx, ns, rvs[ns], o)
		if err != nil {
			m.Stop()
			return nil, err
		}
		m.run(ns, w, false)
	}
	for _, ns := range start {
		if rvs[ns] == "" {
			m.run(ns, nil, true)
		}
	}
	return m, nil
}

func (l *namespacesLW[T]) watchOne(ctx context.Context, ns, rv string, o metav1.ListOptions) (Watch[T], error) {
	o.ResourceVersion, o.ResourceVersionMatch, o.SendInitialEvents = rv, "", nil
	return l.base.c.Namespace(ns).Watch(ctx, l.base.with(o))
}

// set makes namespaces the informer's set, and returns the namespaces it
// added and those it removed. An added one is listed on the open watch
// (or the next); a removed one stops being watched at once.
func (l *namespacesLW[T]) set(namespaces []string) (added, removed []string) {
	next := sortedSet(namespaces)
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, ns := range next {
		if _, found := slices.BinarySearch(l.ns, ns); !found {
			added = append(added, ns)
		}
	}
	for _, ns := range l.ns {
		if _, found := slices.BinarySearch(next, ns); !found {
			removed = append(removed, ns)
			delete(l.rv, ns)
			delete(l.errs, ns)
		}
	}
	l.ns = next
	if m := l.cur; m != nil {
		for _, ns := range removed {
			m.drop(ns)
		}
		for _, ns := range added {
			m.run(ns, nil, true)
		}
	}
	return added, removed
}

// nsEvent is what a namespace's goroutine hands the merged watch: an
// event, the end of its list (listed, with the list's resourceVersion),
// or the error that ended it.
type nsEvent[T client.Object] struct {
	ns     string
	part   *watchPart
	ev     rest.Event[T]
	listed string // set: the namespace's list ended at this resourceVersion
	err    error
}

// watchPart is one namespace's share of a merged watch.
type watchPart struct {
	cancel  context.CancelFunc
	dropped bool // removed from the set: its events are let go
}

// mergedWatch merges the watches of a namespacesLW's namespaces. Its Next
// records, as it delivers each event, the resourceVersion the event's
// namespace is to resume from.
type mergedWatch[T client.Object] struct {
	lw     *namespacesLW[T]
	ctx    context.Context
	cancel context.CancelFunc
	opts   metav1.ListOptions
	events chan nsEvent[T]
	wg     sync.WaitGroup

	mu    sync.Mutex // guards parts; lw.mu is taken before it where both are
	parts map[string]*watchPart
	once  sync.Once
}

// run starts ns's goroutine: it lists ns first when list is set (with w
// nil), then reads w (or the watch it opens after the list).
func (m *mergedWatch[T]) run(ns string, w Watch[T], list bool) {
	ctx, cancel := context.WithCancel(m.ctx)
	p := &watchPart{cancel: cancel}
	m.mu.Lock()
	if old := m.parts[ns]; old != nil {
		old.dropped = true
		old.cancel()
	}
	m.parts[ns] = p
	m.mu.Unlock()
	m.wg.Add(1)
	go func() {
		defer m.wg.Done()
		defer cancel()
		// A namespace to list is tried until it lists: its failure
		// (such as a role not granted yet) is kept for LastError, and
		// does not hold up the other namespaces' events. The end of its
		// list may already be delivered when opening its watch fails:
		// that ends the merged watch, as any watch failure does.
		for wait := namespaceRetry[0]; w == nil; wait = min(2*wait, namespaceRetry[1]) {
			var err error
			var listed bool
			if w, listed, err = m.listThenWatch(ctx, ns, p); err == nil {
				m.lw.setErr(ns, nil)
				break
			}
			if listed || ctx.Err() != nil || apierrors.IsResourceExpired(err) || apierrors.IsGone(err) {
				m.send(ctx, nsEvent[T]{ns: ns, part: p, err: err})
				return
			}
			m.lw.setErr(ns, err)
			select {
			case <-time.After(wait):
			case <-ctx.Done():
				return
			}
		}
		go func() { <-ctx.Done(); w.Stop() }()
		for {
			ev, err := w.Next()
			if err != nil {
				m.send(ctx, nsEvent[T]{ns: ns, part: p, err: err})
				return
			}
			if !m.send(ctx, nsEvent[T]{ns: ns, part: p, ev: ev}) {
				return
			}
		}
	}()
}

// listThenWatch lists ns, hands its objects on as ADDED events and the
// end of the list, then opens ns's watch from the list's resourceVersion.
// listed says whether the list was delivered.
func (m *mergedWatch[T]) listThenWatch(ctx context.Context, ns string, p *watchPart) (_ Watch[T], listed bool, _ error) {
	list, err := m.lw.base.c.Namespace(ns).ListAll(ctx, m.lw.base.with(metav1.ListOptions{}))
	if err != nil {
		return nil, false, err
	}
	for _, obj := range list.Items {
		if !m.send(ctx, nsEvent[T]{ns: ns, part: p, ev: rest.Event[T]{Type: watch.Added, Object: obj}}) {
			return nil, false, ctx.Err()
		}
	}
	if !m.send(ctx, nsEvent[T]{ns: ns, part: p, listed: list.ResourceVersion}) {
		return nil, false, ctx.Err()
	}
	w, err := m.lw.watchOne(ctx, ns, list.ResourceVersion, m.opts)
	return w, true, err
}

// send hands e to Next, unless ctx ends first.
func (m *mergedWatch[T]) send(ctx context.Context, e nsEvent[T]) bool {
	select {
	case m.events <- e:
		return true
	case <-ctx.Done():
		return false
	}
}

// drop stops ns's watch: it left the set. The caller holds lw.mu.
func (m *mergedWatch[T]) drop(ns string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if p := m.parts[ns]; p != nil {
		p.dropped = true
		p.cancel()
		delete(m.parts, ns)
	}
}

// Next returns the next event of any namespace. The first namespace whose
// watch ends, cleanly (io.EOF) or not, ends the merged watch with its
// error; the reflector then watches again, each namespace from where it
// was.
func (m *mergedWatch[T]) Next() (rest.Event[T], error) {
	for {
		var e nsEvent[T]
		select {
		case e = <-m.events:
		case <-m.ctx.Done():
			return rest.Event[T]{}, io.EOF
		}
		m.lw.mu.Lock()
		m.mu.Lock()
		dropped := e.part.dropped
		m.mu.Unlock()
		if dropped {
			m.lw.mu.Unlock()
			continue
		}
		switch {
		case e.err != nil:
			m.lw.mu.Unlock()
			return rest.Event[T]{}, e.err
		case e.listed != "":
			m.lw.rv[e.ns] = e.listed
			m.lw.mu.Unlock()
			continue
		}
		// A namespace being listed has no resourceVersion yet: the end of
		// its list sets it, not the ADDED events of its objects.
		if e.ev.Type != watch.Error && m.lw.rv[e.ns] != "" {
			if rv := e.ev.Object.GetResourceVersion(); rv != "" {
				m.lw.rv[e.ns] = rv
			}
		}
		m.lw.mu.Unlock()
		return e.ev, nil
	}
}

// Stop stops every namespace's watch and waits for their goroutines.
func (m *mergedWatch[T]) Stop() {
	m.once.Do(func() {
		m.lw.mu.Lock()
		if m.lw.cur == m {
			m.lw.cur = nil
		}
		m.lw.mu.Unlock()
		m.cancel()
		m.wg.Wait()
	})
}
