package cache

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"reflect"
	"slices"
	"strings"
	"sync"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// Factory and sync errors. They usually arrive wrapped; test with
// errors.Is.
var (
	// ErrFactoryShutdown: the factory has been shut down.
	ErrFactoryShutdown = errors.New("factory shut down")
	// ErrNotStarted: WaitForCacheSync found an informer that was never
	// started (the factory is not running).
	ErrNotStarted = errors.New("informer not started")
	// ErrNotSynced: the informer has not synced yet, and has reported no
	// error.
	ErrNotSynced = errors.New("not synced yet")
)

// Syncer is anything [WaitForCacheSync] can wait for: an informer (a
// [Runner]) or a handler's [Registration].
type Syncer interface {
	// Name names it in logs and errors.
	Name() string
	// HasSynced reports whether it has the first list.
	HasSynced() bool
	// LastError reports why it is not keeping up, or nil.
	LastError() error
}

// Runner is what does not depend on an informer's object type: what a
// [Factory], [WaitForCacheSync] or a controller needs to run informers
// of different types together. An [*Informer] of any object type
// implements it.
type Runner interface {
	Syncer
	// Start runs the informer until ctx ends (see [Informer.Start]).
	Start(ctx context.Context) error
}

var _ Runner = (*Informer[*metav1.PartialObjectMetadata])(nil)

// FactoryOptions configure [NewFactory]. The zero value is valid.
type FactoryOptions struct {
	// Client holds the Scheme and Mapper that find the resource of
	// custom types (see client.Options); its Resource is ignored, as
	// each informer gives its own. The zero value knows the built-in
	// types.
	Client client.Options
	// Namespace limits the informers of namespaced resources to one
	// namespace, unless InformerForOptions.Namespace says otherwise.
	// Default "": all namespaces (or Namespaces).
	Namespace string
	// Namespaces limits the informers of namespaced resources to these
	// namespaces, unless InformerForOptions.Namespace says otherwise.
	// Each namespace is listed and watched with requests of its own, so
	// a role granted in these namespaces only is enough, and an informer
	// holds the objects of all of them in one cache. [Factory.SetNamespaces]
	// changes the set while the factory runs. An informer over several
	// namespaces fills its cache with paginated lists, never a streaming
	// list. An empty set that is not nil caches nothing until
	// SetNamespaces adds to it. Default nil: Namespace decides. Set at
	// most one of the two.
	Namespaces []string
	// Resync is every informer's [InformerOptions].ResyncPeriod: the
	// resync period of handlers that do not choose their own. Default 0:
	// none.
	Resync time.Duration
	// TweakListOptions, when set, may change the selectors of every
	// informer the factory makes, before informers are told apart; for
	// example to add a label selector to all of them. Default nil.
	TweakListOptions func(*ListWatchOptions)
	// KindSelector, when set, returns a label selector that the informers
	// of objects of kind gk add to their own ("" for none): a sharded
	// manager narrows the informers of its sharded kinds to its shard's
	// objects this way. The kind is the Go type's, or, for unstructured
	// and metadata-only informers, that of InformerForOptions.Resource.
	// It is called at every list and watch: after what it returns for a
	// kind changes, [Factory.Relist] makes the informers of that kind
	// follow ([Factory.Narrow] when it only narrowed). Default nil.
	KindSelector func(gk schema.GroupKind) string
	// Logger receives the informers' messages. Nil means discard.
	Logger *slog.Logger
	// Reflector configures every informer's reflector, except its Name,
	// which is the informer's. The zero value is valid.
	Reflector ReflectorOptions
	// DetectMutations switches the mutation detector on for every
	// informer (see [InformerOptions].DetectMutations). Default false,
	// unless LOOM_CACHE_MUTATION_DETECTOR is "true".
	DetectMutations bool
	// Transform is every informer's [InformerOptions].Transform, such as
	// StripManagedFields[client.Object]. It must return an object of the
	// type it was given. Default nil: none.
	Transform func(client.Object) (client.Object, error)
	// Sharing and DropManagedFields are every informer's (see
	// [InformerOptions]). Default ShareAuto and false.
	Sharing           Sharing
	DropManagedFields bool
}

// Factory makes informers and shares them: every [InformerFor] call for
// the same object type, resource, namespace and selectors returns the
// same informer, so that one list and one watch serve every user in the
// program. It runs them ([Factory.Start]), waits for them to sync
// ([Factory.WaitForCacheSync]) and stops them, all at once
// ([Factory.Shutdown]) or one at a time ([Factory.StopInformer], for a
// custom resource whose definition went away).
//
// A Factory is safe for concurrent use. The zero value is not usable;
// call [NewFactory].
type Factory struct {
	rc   *rest.Client
	opts FactoryOptions
	log  *slog.Logger

	mu         sync.Mutex
	informers  map[informerKey]*factoryEntry
	namespaces []string        // the current set, when opts.Namespaces is set
	runCtx     context.Context // while Start runs: new informers start at once
	shutdown   bool
	down       chan struct{}  // closed by Shutdown
	wg         sync.WaitGroup // the informers' Start calls
}

// informerKey is what tells a factory's informers apart.
type informerKey struct {
	typ       reflect.Type
	gvr       schema.GroupVersionResource // when given; else the type's own
	namespace string
	labels    string
	fields    string
}

// String names an informer: its Go type, or the resource it was given,
// then what narrows it.
func (k informerKey) String() string {
	var b strings.Builder
	if k.gvr.Resource != "" {
		b.WriteString(k.gvr.Resource + "." + k.gvr.Version)
		if k.gvr.Group != "" {
			b.WriteString("." + k.gvr.Group)
		}
		switch k.typ {
		case reflect.TypeFor[*metav1.PartialObjectMetadata]():
			b.WriteString(" (metadata)")
		case reflect.TypeFor[*unstructured.Unstructured]():
			b.WriteString(" (unstructured)")
		}
	} else {
		b.WriteString(k.typ.String())
	}
	for _, f := range [...]struct{ name, value string }{
		{"namespace", k.namespace}, {"labels", k.labels}, {"fields", k.fields},
	} {
		if f.value != "" {
			fmt.Fprintf(&b, " %s=%q", f.name, f.value)
		}
	}
	return b.String()
}

type factoryEntry struct {
	inf     Runner
	spaces  namespaceSetter                 // the informer's namespaces, when the factory has a set
	gk      schema.GroupKind                // the kind of its objects, if known
	gvr     schema.GroupVersionResource     // the resource it lists, if known
	relist  func(ctx context.Context) error // the informer's Relist
	narrow  func(ctx context.Context, keep func(client.Object) bool) error
	stats   func() InformerStats
	started bool
	cancel  context.CancelFunc
	done    chan struct{} // closed when Start has returned
}

// NewFactory returns a factory with no informers, whose informers list
// and watch through rc.
func NewFactory(rc *rest.Client, opts FactoryOptions) *Factory {
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	opts.Reflector.Name = ""
	return &Factory{rc: rc, opts: opts, log: log, informers: map[informerKey]*factoryEntry{}, down: make(chan struct{}), namespaces: sortedSet(opts.Namespaces)}
}

// ClientOptions returns the client options the factory's informers use
// (its Scheme and Mapper), for clients that should see the same types.
func (f *Factory) ClientOptions() client.Options { return f.opts.Client }

// InformerForOptions choose an informer of a [Factory]. The zero value
// is the informer of every object of the type in the factory's
// namespace.
type InformerForOptions struct {
	// Resource says where objects live. Required for
	// *unstructured.Unstructured and *metav1.PartialObjectMetadata; for
	// other types the default is the type's own resource.
	Resource client.Resource
	// Namespace limits a namespaced resource's informer to one
	// namespace. Default "": the factory's Namespace. It is ignored for
	// cluster-scoped resources.
	Namespace string
	// LabelSelector and FieldSelector filter objects on the server.
	// Default "": none.
	LabelSelector, FieldSelector string
	// ReferencedOnly makes [CachedClientFor] (and so a manager's
	// CachedClient) return a referenced-only client: the cache keeps
	// every object's metadata, and the full object only for the objects
	// reconcilers read (see [NewReferencedClient]). It is for kinds such
	// as Secrets and ConfigMaps, of which a controller reads a few among
	// many large ones. InformerFor refuses it with [ErrReferencedOnly]: an
	// informer holds every object in full. Default false.
	ReferencedOnly bool
}

// InformerFor returns the factory's informer for objects of type E (such
// as corev1.Pod, or unstructured.Unstructured or
// metav1.PartialObjectMetadata with opts.Resource) narrowed by opts,
// making it if there is none. It makes no request: a custom type's
// resource is looked up when the informer first lists. While the factory
// runs (see [Factory.Start]) a new informer starts at once. It fails with
// [ErrFactoryShutdown] or the error of client.For. Add indexes with
// [Informer.AddIndexer].
func InformerFor[E any, T interface {
	*E
	client.Object
}](f *Factory, opts InformerForOptions) (*Informer[T], error) {
	if opts.ReferencedOnly {
		return nil, fmt.Errorf("cache: InformerFor %T: use CachedClientFor for ReferencedOnly: %w", T(new(E)), ErrReferencedOnly)
	}
	copts := f.opts.Client
	copts.Resource = opts.Resource
	c, err := client.For[E, T](f.rc, copts)
	if err != nil {
		return nil, fmt.Errorf("cache: InformerFor: %w", err)
	}
	lwo := ListWatchOptions{Namespace: cmp.Or(opts.Namespace, f.opts.Namespace), LabelSelector: opts.LabelSelector, FieldSelector: opts.FieldSelector}
	spaces := f.opts.Namespaces != nil && opts.Namespace == ""
	if spaces {
		lwo.Namespace = namespaceSet
	}
	if f.opts.TweakListOptions != nil {
		f.opts.TweakListOptions(&lwo)
	}
	gk := opts.Resource.Kind.GroupKind()
	if gk.Kind == "" {
		if gvk, ok := client.KindOf(T(new(E)), f.opts.Client.Scheme); ok {
			gk = gvk.GroupKind()
		}
	}
	if ks := f.opts.KindSelector; ks != nil && gk.Kind != "" {
		lwo.LabelSelectorFunc = func() string { return ks(gk) }
	}
	key := informerKey{
		typ:       reflect.TypeFor[T](),
		gvr:       opts.Resource.Resource,
		namespace: lwo.Namespace,
		labels:    lwo.LabelSelector,
		fields:    lwo.FieldSelector,
	}
	name := key
	if res, ok := c.KnownResource(); ok {
		name.gvr = res.Resource
		if !res.Namespaced {
			key.namespace, name.namespace = "", ""
		}
	}

	f.mu.Lock()
	defer f.mu.Unlock()
	if f.shutdown {
		return nil, fmt.Errorf("cache: InformerFor: %w", ErrFactoryShutdown)
	}
	if e, ok := f.informers[key]; ok {
		return e.inf.(*Informer[T]), nil
	}
	var transform func(T) (T, error)
	stripOnly := stripsOnly(f.opts.Transform)
	if stripOnly {
		transform = StripManagedFields[T] // sharing stays on (see newInformer)
	} else if tf := f.opts.Transform; tf != nil {
		transform = func(obj T) (T, error) {
			out, err := tf(obj)
			if err != nil {
				return obj, err
			}
			t, ok := out.(T)
			if !ok {
				return obj, fmt.Errorf("cache: factory Transform returned %T for a %T", out, obj)
			}
			return t, nil
		}
	}
	lw, ro := ListWatch(c, lwo), f.opts.Reflector
	var nlw *namespacesLW[T]
	if spaces {
		nlw = newNamespacesLW(c, lwo, f.namespaces)
		lw, ro.Streaming = nlw, StreamingOff
	}
	inf := newInformer(lw, InformerOptions[T]{
		Name:              name.String(),
		Logger:            f.log,
		ResyncPeriod:      f.opts.Resync,
		Reflector:         ro,
		DetectMutations:   f.opts.DetectMutations,
		Transform:         transform,
		Sharing:           f.opts.Sharing,
		DropManagedFields: f.opts.DropManagedFields,
	}, stripOnly)
	e := &factoryEntry{inf: inf, gk: gk, gvr: name.gvr, relist: inf.Relist, stats: inf.Stats,
		narrow: func(ctx context.Context, keep func(client.Object) bool) error {
			return inf.Narrow(ctx, func(o T) bool { return keep(o) })
		}}
	if nlw != nil {
		e.spaces = namespaceSetterFunc(func(ctx context.Context, namespaces []string, running bool) error {
			if _, removed := nlw.set(namespaces); len(removed) > 0 && running {
				err := inf.Narrow(ctx, func(o T) bool { return !slices.Contains(removed, o.GetNamespace()) })
				if errors.Is(err, ErrStopped) {
					return nil // stopped since: nothing cached to let go
				}
				return err
			}
			return nil
		})
	}
	f.informers[key] = e
	if f.runCtx != nil {
		f.startLocked(e)
	}
	return inf, nil
}

// Start runs the factory's informers until ctx ends or Shutdown is
// called: those it has, each in a goroutine of its own, and those made
// while it runs, as they are made. It then stops them, waits until all
// have stopped, and returns nil; it returns ErrFactoryShutdown at once
// after Shutdown. A factory runs once.
func (f *Factory) Start(ctx context.Context) error {
	f.mu.Lock()
	if f.shutdown {
		f.mu.Unlock()
		return ErrFactoryShutdown
	}
	if f.runCtx != nil {
		f.mu.Unlock()
		return fmt.Errorf("cache: factory: %w", ErrAlreadyStarted)
	}
	f.runCtx = ctx
	for _, e := range f.informers {
		if !e.started {
			f.startLocked(e)
		}
	}
	f.mu.Unlock()
	select {
	case <-ctx.Done():
	case <-f.down:
	}
	f.Shutdown()
	return nil
}

// startLocked starts e's informer. f.mu is held.
func (f *Factory) startLocked(e *factoryEntry) {
	ictx, cancel := context.WithCancel(f.runCtx)
	e.started, e.cancel, e.done = true, cancel, make(chan struct{})
	f.wg.Go(func() {
		defer close(e.done)
		defer cancel()
		if err := e.inf.Start(ictx); err != nil {
			f.log.Error("informer failed", "informer", e.inf.Name(), "err", err)
		}
	})
}

// WaitForCacheSync waits until every informer of the factory has synced
// and returns nil, or returns a non-nil error naming each informer that
// has not synced and why (see [WaitForCacheSync]). It returns early,
// without waiting for ctx, when an informer cannot sync without help.
// Informers keep running (and retrying) after it returns; it may be
// called again.
func (f *Factory) WaitForCacheSync(ctx context.Context) error {
	f.mu.Lock()
	syncers := make([]Syncer, 0, len(f.informers))
	for _, e := range f.informers {
		syncers = append(syncers, factorySyncer{f, e})
	}
	f.mu.Unlock()
	return WaitForCacheSync(ctx, syncers...)
}

// factorySyncer is an informer of the factory as WaitForCacheSync sees
// it: until the factory starts it, its error is ErrNotStarted.
type factorySyncer struct {
	f *Factory
	e *factoryEntry
}

func (s factorySyncer) Name() string    { return s.e.inf.Name() }
func (s factorySyncer) HasSynced() bool { return s.e.inf.HasSynced() }
func (s factorySyncer) LastError() error {
	s.f.mu.Lock()
	started := s.e.started
	s.f.mu.Unlock()
	if !started {
		return fmt.Errorf("cache: informer %s: %w", s.e.inf.Name(), ErrNotStarted)
	}
	return s.e.inf.LastError()
}

// StopInformer stops one informer of the factory and waits for it to
// stop. The factory forgets it: a later InformerFor with the same
// options makes a new one, for example when a custom resource's
// definition is created again. Handlers of the stopped informer get no
// more calls. It reports whether inf was one of the factory's. As it
// waits for inf's handlers to return, it must not be called from one of
// them (start a goroutine for it).
func (f *Factory) StopInformer(inf Runner) bool {
	f.mu.Lock()
	var found *factoryEntry
	for key, e := range f.informers {
		if e.inf == inf {
			found = e
			delete(f.informers, key)
			break
		}
	}
	f.mu.Unlock()
	if found == nil {
		return false
	}
	if found.started {
		found.cancel()
		<-found.done
	}
	return true
}

// Relist makes every running informer of objects of the kinds gks list
// again, as [Informer.Relist] does, and waits until all of their caches
// hold what their lists found: the informers call KindSelector again (see
// FactoryOptions.KindSelector). An informer that has not started yet
// lists with the new selector when it starts. It returns the first error
// of an informer's Relist (ctx's, or ErrStopped for an informer that
// stopped meanwhile), after all have returned.
func (f *Factory) Relist(ctx context.Context, gks ...schema.GroupKind) error {
	return f.follow(ctx, func(e *factoryEntry) func(context.Context) error { return e.relist }, gks)
}

// Narrow is Relist for a KindSelector that only narrowed for the kinds
// gks: keep tells whether an object matches the new selector, which must
// select no object that the old one did not. Each running informer of
// those kinds lets go of the cached objects that keep rejects and watches
// on without listing again, as [Informer.Narrow] does; Narrow waits until
// all of them have. It returns errors as Relist does.
func (f *Factory) Narrow(ctx context.Context, keep func(client.Object) bool, gks ...schema.GroupKind) error {
	return f.follow(ctx, func(e *factoryEntry) func(context.Context) error {
		return func(ctx context.Context) error { return e.narrow(ctx, keep) }
	}, gks)
}

// namespaceSet stands for a factory's set of namespaces in the names and
// keys of its informers.
const namespaceSet = "(namespaces)"

// namespaceSetter changes the namespaces of an informer over a set.
// An informer not running yet only takes the new set: its first list
// lists it.
type namespaceSetter interface {
	setNamespaces(ctx context.Context, namespaces []string, running bool) error
}

type namespaceSetterFunc func(ctx context.Context, namespaces []string, running bool) error

func (f namespaceSetterFunc) setNamespaces(ctx context.Context, namespaces []string, running bool) error {
	return f(ctx, namespaces, running)
}

// ErrNoNamespaceSet is returned by [Factory.SetNamespaces] for a factory
// made without FactoryOptions.Namespaces.
var ErrNoNamespaceSet = errors.New("the factory was made without a set of namespaces (FactoryOptions.Namespaces)")

// SetNamespaces makes namespaces the set that the factory's informers
// over its namespaces cache (see FactoryOptions.Namespaces), while they
// run. Each informer lists an added namespace once, and its objects reach
// the cache and the handlers as additions; it lets a removed namespace's
// objects go, as deletions, without listing any namespace again. The
// other namespaces are not listed again. SetNamespaces returns once every
// running informer has let the removed namespaces go; the added ones are
// being listed then (wait for their objects with the informers' readers
// or handlers). It fails with [ErrNoNamespaceSet] when the factory has no
// set, and with ctx's error if ctx ends first.
func (f *Factory) SetNamespaces(ctx context.Context, namespaces ...string) error {
	f.mu.Lock()
	if f.opts.Namespaces == nil {
		f.mu.Unlock()
		return fmt.Errorf("cache: SetNamespaces: %w", ErrNoNamespaceSet)
	}
	f.namespaces = sortedSet(namespaces)
	var entries []*factoryEntry
	var running []bool
	for _, e := range f.informers {
		if e.spaces != nil {
			entries, running = append(entries, e), append(running, e.started)
		}
	}
	next := f.namespaces
	f.mu.Unlock()
	errs := make([]error, len(entries))
	var wg sync.WaitGroup
	for n, e := range entries {
		wg.Go(func() { errs[n] = e.spaces.setNamespaces(ctx, next, running[n]) })
	}
	wg.Wait()
	return errors.Join(errs...)
}

// Namespaces returns the factory's set of namespaces (see
// FactoryOptions.Namespaces and [Factory.SetNamespaces]), sorted; nil
// for a factory without one.
func (f *Factory) Namespaces() []string {
	f.mu.Lock()
	defer f.mu.Unlock()
	return slices.Clone(f.namespaces)
}

// follow runs, at once, what op returns for each running informer of the
// kinds gks, and waits for all of them.
func (f *Factory) follow(ctx context.Context, op func(*factoryEntry) func(context.Context) error, gks []schema.GroupKind) error {
	f.mu.Lock()
	var ops []func(context.Context) error
	for _, e := range f.informers {
		if e.started && slices.Contains(gks, e.gk) {
			ops = append(ops, op(e))
		}
	}
	f.mu.Unlock()
	errs := make([]error, len(ops))
	var wg sync.WaitGroup
	for n, do := range ops {
		wg.Go(func() { errs[n] = do(ctx) })
	}
	wg.Wait()
	for _, err := range errs {
		if err != nil {
			return err
		}
	}
	return nil
}

// Shutdown stops every informer of the factory and waits until all of
// them have stopped. Afterwards InformerFor fails and Start does
// nothing. Shutdown may be called more than once, but not from a
// handler, whose return it would wait for.
func (f *Factory) Shutdown() {
	f.mu.Lock()
	if !f.shutdown {
		close(f.down)
	}
	f.shutdown = true
	for key, e := range f.informers {
		if e.started {
			e.cancel()
		}
		delete(f.informers, key)
	}
	f.mu.Unlock()
	f.wg.Wait()
}

// SyncError names an informer that has not synced, and why: the last
// error of its reflector (a [*ReflectorError] wrapping the API error, so
// that errors.As and apierrors.IsForbidden work through it), or
// [ErrNotStarted], an error wrapping [ErrStopped], ctx.Err(), or
// [ErrNotSynced].
type SyncError struct {
	Informer string
	Err      error
}

func (e *SyncError) Error() string {
	return fmt.Sprintf("cache: informer %s has not synced: %v", e.Informer, e.Err)
}

// Unwrap returns Err.
func (e *SyncError) Unwrap() error { return e.Err }

// syncPoll is how often WaitForCacheSync looks at the informers.
const syncPoll = 20 * time.Millisecond

// WaitForCacheSync waits until every informer (or handler registration)
// has synced, and returns nil. Otherwise it returns an error joining a
// [*SyncError] for each that has not synced, sorted by name, when:
//
//   - ctx ends;
//   - or, at once, an informer cannot sync without help: its last error
//     is Forbidden or Unauthorized (RBAC, credentials), NotFound (the
//     resource does not exist, such as a custom resource whose
//     definition is not installed), or it has stopped ([ErrStopped]).
//
// An informer not started yet (its factory's Start may be about to run) is
// waited for; if ctx ends first, its error is [ErrNotStarted].
//
// Informers whose last error is transient (a broken connection, a
// server error) are waited for, as their reflectors retry. The check is
// a poll, a few times per 100 ms.
func WaitForCacheSync(ctx context.Context, informers ...Syncer) error {
	t := time.NewTicker(syncPoll)
	defer t.Stop()
	for {
		var pending []Syncer
		hopeless := false
		for _, inf := range informers {
			if !inf.HasSynced() {
				pending = append(pending, inf)
				hopeless = hopeless || cannotSync(inf.LastError())
			}
		}
		if len(pending) == 0 {
			return nil
		}
		if hopeless || ctx.Err() != nil {
			return syncErrors(ctx, pending)
		}
		select {
		case <-ctx.Done():
		case <-t.C:
		}
	}
}

// cannotSync reports whether err means an informer will not sync
// without outside help.
func cannotSync(err error) bool {
	return err != nil && (errors.Is(err, ErrStopped) ||
		apierrors.IsForbidden(err) || apierrors.IsUnauthorized(err) || apierrors.IsNotFound(err))
}

func syncErrors(ctx context.Context, pending []Syncer) error {
	slices.SortFunc(pending, func(a, b Syncer) int { return strings.Compare(a.Name(), b.Name()) })
	errs := make([]error, len(pending))
	for n, inf := range pending {
		err := inf.LastError()
		if err == nil {
			err = ctx.Err()
		}
		if err == nil {
			err = ErrNotSynced
		}
		errs[n] = &SyncError{Informer: inf.Name(), Err: err}
	}
	return errors.Join(errs...)
}
