package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"os/signal"
	"reflect"
	"sync"
	"syscall"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/promhttp"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/leaderelection"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
	"github.com/loom-k8s/loom/webhook"
)

// Runnable is a part of a program that runs until its context ends:
// Start blocks until then and returns nil, or returns an error at once
// when it cannot run. (It is an alias of the interface type, so that
// packages such as controller can name it without importing this one.)
type Runnable = interface {
	Start(ctx context.Context) error
}

// LeaderRunnable is a Runnable that may need leadership.
type LeaderRunnable interface {
	Runnable
	// NeedLeaderElection reports whether it must run only on the leader.
	NeedLeaderElection() bool
}

// RunnableFunc adapts a function to a Runnable.
type RunnableFunc func(ctx context.Context) error

// Start calls f.
func (f RunnableFunc) Start(ctx context.Context) error { return f(ctx) }

// LeaderElection configures leader election. The zero value means no
// leader election: every runnable runs at once.
type LeaderElection struct {
	// Enabled turns leader election on. Namespace and Name then name the
	// Lease.
	Enabled         bool
	Namespace, Name string
	// Identity, LeaseDuration, RenewDeadline and RetryPeriod are as in
	// leaderelection.Options (defaults: host name with a random suffix,
	// 15 s, 10 s, 2 s).
	Identity                                  string
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// Labels are put on the Lease (leaderelection.Options.Labels).
	// Default nil: none.
	Labels map[string]string
}

// Options configure [New]. The zero value is valid.
type Options struct {
	// Config says how to reach the API server. Nil means load it as
	// kubectl does (--kubeconfig is not known here: $KUBECONFIG, then
	// ~/.kube/config), falling back to the in-cluster service account.
	Config *config.Config
	// Namespace limits the shared informers to one namespace. Default "":
	// all namespaces (or Namespaces).
	Namespace string
	// Namespaces limits the shared informers of namespaced resources to
	// these namespaces, each listed and watched with requests of its own,
	// so that the operator runs with roles granted in those namespaces
	// only (cache.FactoryOptions.Namespaces). [Manager.SetNamespaces]
	// changes the set while the manager runs. Default nil: Namespace
	// decides. Set at most one of the two.
	Namespaces []string
	// Scheme names custom types (for clients, informers, owner references
	// and events). Nil means built-in types only.
	Scheme *runtime.Scheme
	// Mapper finds the resources of custom types. Default: a RESTMapper
	// over the API server's discovery, cached, and refreshed when it
	// meets a kind it does not know (a CRD installed since).
	Mapper client.Mapper
	// FieldOwner names the manager's clients in the managedFields of
	// what they write (client.Options.FieldOwner): the field manager of
	// their server-side applies, and of other writes whose options name
	// none. Default "": each Apply names its own.
	FieldOwner string
	// LeaderElection configures leader election. Default: off, unless
	// Sharding is on: then it is on, with the Lease "<ring>-leader" in
	// Sharding.Namespace unless set here.
	LeaderElection LeaderElection
	// Sharding makes the manager one replica of a ring that shares the
	// sharded kinds' objects out. Default: off.
	Sharding Sharding
	// HealthAddr is where /healthz and /readyz are served, over plain
	// HTTP for the kubelet's probes, such as ":8081". A failing probe
	// names its failing checks and a short reason (see
	// [Manager.AddReadyzCheck]). Default "": not served.
	HealthAddr string
	// MetricsAddr is where /metrics is served, such as ":8443": over
	// HTTPS, to callers the API server authenticates and authorizes
	// (get on the non-resource URL /metrics), unless Metrics.Insecure.
	// Default "": not served (the registry is still filled; see
	// Registry).
	MetricsAddr string
	// Metrics says how /metrics is served at MetricsAddr. Default: HTTPS
	// with a self-signed certificate, callers checked by the API server,
	// HTTP/1.1 only (see [MetricsServing]).
	Metrics MetricsServing
	// PprofAddr is where the Go profiler (net/http/pprof, under
	// /debug/pprof/) is served, over plain HTTP and to anyone who can
	// reach it, such as "127.0.0.1:8082" (then kubectl port-forward to
	// reach it in a Pod). Profiles show the program's memory and cost
	// CPU: New refuses an address that is not loopback (":8082" listens
	// on every interface) unless PprofAllowRemote is set. Default "":
	// not served.
	PprofAddr string
	// PprofAllowRemote lets PprofAddr be an address that is not
	// loopback. Default false.
	PprofAllowRemote bool
	// Registry is where the manager's metrics are registered, and what
	// /metrics serves. Default: a new registry with the Go runtime and
	// process collectors.
	Registry *prometheus.Registry
	// ShutdownTimeout bounds the wait for runnables to return after the
	// context ends. Zero means 30 s.
	ShutdownTimeout time.Duration
	// Resync is the factory's resync period. Default 0: no periodic
	// resync.
	Resync time.Duration
	// Transform is applied to every object before it is cached, such as
	// cache.StripManagedFields[client.Object] (see
	// cache.FactoryOptions.Transform). With Sharding, it should keep the
	// bucket label of the sharded kinds' objects: a shard that gives
	// buckets up lets their cached objects go by that label, and keeps
	// those without one until its informers next list. Default nil: none.
	Transform func(client.Object) (client.Object, error)
	// JSON makes the manager's clients ask for JSON. Default false:
	// protobuf, falling back to JSON for types without it (custom
	// resources).
	JSON bool
	// Transport, when set, replaces the HTTP transport to the API server
	// (see rest.Options.Transport): for tests that stand in for the
	// server, and for special dialing. Default: built from Config.
	Transport http.RoundTripper
	// EventsController names the reporting controller of the manager's
	// event recorder, such as "example.com/widgets". Default "loom".
	EventsController string
	// Logger is given to every part. Nil means discard. With tracing on,
	// its handler is wrapped with tracing.LogHandler, so lines logged with
	// a traced context carry trace_id and span_id.
	Logger *slog.Logger
	// Tracing turns on OpenTelemetry tracing for the manager's client,
	// controllers and webhook server (see package tracing). Default: off,
	// which costs a nil check per hook.
	Tracing tracing.Options
}

// Manager runs runnables: controllers, webhook servers, and anything
// else with a blocking Start. It owns what they share: one connection to
// the API server, a RESTMapper, an informer factory (the cache), cached
// clients, an event recorder and a metrics registry. Create it with New,
// add runnables (controller.New adds itself), then Start.
type Manager struct {
	opts     Options
	log      *slog.Logger
	rc       *rest.Client
	mapper   client.Mapper
	factory  *cache.Factory
	recorder *events.Recorder
	metrics  *metrics
	sharded  *sharded // with sharding

	mu        sync.Mutex
	runnables []Runnable
	clients   map[clientKey]any // CachedClient's, by object type and informer
	// referenced exports the figures of referenced-only clients.
	referenced *referencedCollector
	errs       []error // construction errors, returned by Start
	started    bool
	leading    bool
	elector    *leaderelection.Elector // with leader election, once started
	addrs      map[string]net.Addr     // "health", "metrics", "pprof": where they listen
	healthz    []probeCheck            // /healthz's checks
	readyz     []probeCheck            // /readyz's checks
}

// errStarted is returned by Add after Start, and by a second Start.
var errStarted = fmt.Errorf("manager: %w", cache.ErrAlreadyStarted)

// New returns a Manager connected to the API server opts.Config (or the
// kubeconfig, or the in-cluster service account) describes. It makes no
// request.
func New(opts Options) (*Manager, error) {
	if err := opts.defaults(); err != nil {
		return nil, err
	}
	log := newLogger(opts)
	cfg, err := restConfig(opts)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	m, err := newMetrics(opts.Registry)
	if err != nil {
		return nil, fmt.Errorf("manager: metrics: %w", err)
	}
	rc, err := newREST(cfg, opts, m, log)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	mapper := opts.Mapper
	if mapper == nil {
		mapper = discovery.NewMapper(discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	}
	rec, err := events.New(rc, events.Options{Controller: opts.EventsController, Scheme: opts.Scheme, Logger: log})
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	factory, sh, err := newFactory(rc, opts, mapper, m, log)
	if err != nil {
		return nil, fmt.Errorf("manager: %w", err)
	}
	refs := &referencedCollector{}
	for _, c := range []prometheus.Collector{informerCollector{factory}, refs} {
		if err := m.reg.Register(c); err != nil {
			return nil, fmt.Errorf("manager: metrics: %w", err)
		}
	}
	mgr := &Manager{
		opts: opts, log: log, rc: rc, mapper: mapper, metrics: m, recorder: rec, sharded: sh,
		clients: map[clientKey]any{}, addrs: map[string]net.Addr{}, factory: factory, referenced: refs,
	}
	mgr.runnables = append(mgr.runnables, rec)
	mgr.healthz = []probeCheck{{"ping", func(*http.Request) error { return nil }}}
	mgr.readyz = []probeCheck{{"informers", mgr.informersSynced}}
	if opts.LeaderElection.Enabled {
		mgr.readyz = append(mgr.readyz, probeCheck{"leader-election", mgr.leaseHealthy})
	}
	return mgr, nil
}

// defaults fills in opts' defaults and checks them.
func (opts *Options) defaults() error {
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 30 * time.Second
	}
	opts.EventsController = cmp.Or(opts.EventsController, "loom")
	if err := checkServers(*opts); err != nil {
		return err
	}
	return opts.Sharding.defaults(&opts.LeaderElection)
}

// newLogger is opts.Logger (discarding when nil), with trace and span
// IDs added to its lines when tracing is on.
func newLogger(opts Options) *slog.Logger {
	switch {
	case opts.Logger == nil:
		return slog.New(slog.DiscardHandler)
	case opts.Tracing.Enabled():
		return slog.New(tracing.LogHandler(opts.Logger.Handler()))
	}
	return opts.Logger
}

// restConfig is opts.Config, or else the kubeconfig, or else the
// in-cluster service account's.
func restConfig(opts Options) (config.Config, error) {
	if opts.Config != nil {
		return *opts.Config, nil
	}
	return config.Load(config.LoadOptions{InClusterFallback: true})
}

// SetNamespaces changes the namespaces the manager's informers cache
// (Options.Namespaces) while it runs: an added namespace is listed once
// per informer, and a removed one's objects leave the caches, as
// deletions, without a list of the others (see
// cache.Factory.SetNamespaces). Controllers hear of both through their
// handlers. It fails with cache.ErrNoNamespaceSet for a manager made
// without Options.Namespaces.
func (m *Manager) SetNamespaces(ctx context.Context, namespaces ...string) error {
	return m.factory.SetNamespaces(ctx, namespaces...)
}

// newREST makes the manager's REST client: protobuf unless opts.JSON, its
// requests observed by the metrics m.
func newREST(cfg config.Config, opts Options, m *metrics, log *slog.Logger) (*rest.Client, error) {
	ct := rest.Protobuf
	if opts.JSON {
		ct = rest.JSON
	}
	return rest.New(cfg, rest.Options{ContentType: ct, Observer: m, Logger: log, Transport: opts.Transport, Tracing: opts.Tracing})
}

// newFactory makes the manager's informer factory and, when opts shard a
// ring, the sharding that narrows its informers of sharded kinds.
func newFactory(rc *rest.Client, opts Options, mapper client.Mapper, m *metrics, log *slog.Logger) (*cache.Factory, *sharded, error) {
	fopts := cache.FactoryOptions{
		Client:    client.Options{Scheme: opts.Scheme, Mapper: mapper, FieldOwner: opts.FieldOwner},
		Namespace: opts.Namespace, Namespaces: opts.Namespaces, Resync: opts.Resync, Logger: log, Transform: opts.Transform,
	}
	var sh *sharded
	if opts.Sharding.Ring != "" {
		var err error
		if sh, err = newSharded(rc, opts.Sharding, m, log); err != nil {
			return nil, nil, err
		}
		fopts.KindSelector = sh.selector
	}
	factory := cache.NewFactory(rc, fopts)
	if sh != nil {
		sh.factory = factory
	}
	return factory, sh, nil
}

// ClientOptions returns the client options for this manager's types: its
// Scheme, Mapper and FieldOwner. client.For[T](mgr.REST(), mgr.ClientOptions()) is a
// live client for any type the manager knows.
func (m *Manager) ClientOptions() client.Options {
	return client.Options{Scheme: m.opts.Scheme, Mapper: m.mapper, FieldOwner: m.opts.FieldOwner}
}

// Scheme returns the manager's Scheme (nil when none was given).
func (m *Manager) Scheme() *runtime.Scheme { return m.opts.Scheme }

// REST returns the manager's connection to the API server, for live
// clients (client.For).
func (m *Manager) REST() *rest.Client { return m.rc }

// Factory returns the shared informer factory: the cache.
func (m *Manager) Factory() *cache.Factory { return m.factory }

// Recorder returns the manager's event recorder (started with the manager).
func (m *Manager) Recorder() *events.Recorder { return m.recorder }

// WebhookMetrics returns the manager's metrics for webhook servers:
// set it as webhook.ServerOptions.Metrics, and /metrics shows request
// counts by code and latencies per webhook.
func (m *Manager) WebhookMetrics() webhook.Metrics { return m.metrics }

// ControllerOptions returns controller options wired to the manager's
// metrics and logger; adjust Workers and the rest before passing them to
// controller.New.
func (m *Manager) ControllerOptions() controller.Options {
	return controller.Options{Metrics: m.metrics, QueueMetrics: m.metrics.queues, Logger: m.log, Tracing: m.opts.Tracing, Partition: m.partition()}
}

// Registry returns the manager's Prometheus registry, for a program's
// own metrics: what is registered there is served on /metrics too.
func (m *Manager) Registry() *prometheus.Registry { return m.metrics.reg }

// MetricsHandler serves the manager's Prometheus registry, to anyone: for
// a program that serves it itself (wrapped in [NewAuthFilter], say), or
// reads it in-process. Options.MetricsAddr serves it with the checks of
// [MetricsServing].
func (m *Manager) MetricsHandler() http.Handler {
	return promhttp.HandlerFor(m.metrics.reg, promhttp.HandlerOpts{})
}

// Addr returns the address a server listens on ("health", "metrics" or
// "pprof") once Start has opened it, or nil.
func (m *Manager) Addr(server string) net.Addr {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.addrs[server]
}

// IsLeader reports whether this manager leads: with leader election,
// whether it holds the Lease now; without, whether it has started.
func (m *Manager) IsLeader() bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.elector != nil {
		return m.elector.IsLeader()
	}
	return m.leading
}

// Add adds a runnable. After Start it fails with an error wrapping
// cache.ErrAlreadyStarted.
func (m *Manager) Add(r Runnable) error {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.started {
		return errStarted
	}
	m.runnables = append(m.runnables, r)
	return nil
}

func needsLeader(r Runnable) bool {
	lr, ok := r.(LeaderRunnable)
	return ok && lr.NeedLeaderElection()
}

// Start runs everything until ctx ends, then shuts down and returns nil;
// or returns an error when a server cannot listen, a runnable fails, or
// leadership is lost (leaderelection.ErrLeadershipLost).
//
// When leadership is lost, the leader runnables' contexts are cancelled
// and their writes are fenced at once: every write sent with their context
// (or a context derived from it) through a client of this manager is
// refused from the moment the Lease could no longer be renewed, so none
// can land after another replica takes over, even from a runnable that
// ignores its context. Start then stops the other runnables and returns
// the error without waiting for the leader runnables. The program should
// exit on it, as controller-runtime's managers do; a restarted process
// joins the election again as a candidate.
func (m *Manager) Start(ctx context.Context) error {
	m.mu.Lock()
	if m.started {
		m.mu.Unlock()
		return errStarted
	}
	m.started = true
	runnables := append([]Runnable(nil), m.runnables...)
	m.mu.Unlock()

	parent := ctx
	ctx, cancel := context.WithCancelCause(ctx)
	defer cancel(nil)
	var wg sync.WaitGroup
	run := func(ctx context.Context, r Runnable) {
		wg.Go(func() {
			if err := r.Start(ctx); err != nil && ctx.Err() == nil {
				m.log.Error("runnable failed", "err", err)
				cancel(fmt.Errorf("manager: runnable failed: %w", err))
			}
		})
	}
	m.mu.Lock()
	errs := errors.Join(m.errs...)
	m.mu.Unlock()
	if errs != nil {
		return errs
	}
	if err := m.serve(ctx, &wg); err != nil {
		return err
	}
	wg.Go(func() { _ = m.factory.Start(ctx) })

	// With sharding, this replica's shard Lease lives until every runnable
	// has stopped, so that no reconcile of its objects is in flight when
	// the others take them over; its fence guards the writes of the
	// runnables that are not the leader's.
	shardDone := make(chan error, 1)
	shardCtx, stopShard := context.WithCancel(context.WithoutCancel(ctx))
	defer stopShard()
	runCtx := ctx
	if m.sharded != nil {
		member, assigner, err := m.startSharding(ctx, &wg)
		if err != nil {
			return err
		}
		runnables = append(runnables, assigner)
		runCtx = rest.WithFence(ctx, member)
		go func() {
			err := member.Start(shardCtx)
			if err != nil {
				cancel(fmt.Errorf("manager: %w", err))
			}
			shardDone <- err
		}()
	} else {
		shardDone <- nil
	}

	var leaders []Runnable
	for _, r := range runnables {
		if needsLeader(r) {
			leaders = append(leaders, r)
		} else {
			run(runCtx, r)
		}
	}
	startLeaders := func(ctx context.Context) {
		m.mu.Lock()
		m.leading = true
		m.mu.Unlock()
		var lwg sync.WaitGroup
		for _, r := range leaders {
			lwg.Go(func() {
				if err := r.Start(ctx); err != nil && ctx.Err() == nil {
					m.log.Error("runnable failed", "err", err)
					cancel(fmt.Errorf("manager: runnable failed: %w", err))
				}
			})
		}
		lwg.Wait()
		m.mu.Lock()
		m.leading = false
		m.mu.Unlock()
	}
	if le := m.opts.LeaderElection; le.Enabled {
		leases, err := client.For[coordinationv1.Lease](m.rc, client.Options{})
		if err != nil {
			return err
		}
		e, err := leaderelection.New(leases, leaderelection.Options{
			Namespace: le.Namespace, Name: le.Name, Identity: le.Identity,
			LeaseDuration: le.LeaseDuration, RenewDeadline: le.RenewDeadline, RetryPeriod: le.RetryPeriod, Labels: le.Labels,
			OnStartedLeading: func(ctx context.Context) {
				m.metrics.leading(le.Name, true)
				startLeaders(ctx)
			},
			OnStoppedLeading: func() { m.metrics.leading(le.Name, false) },
			Logger:           m.log,
		})
		if err != nil {
			return fmt.Errorf("manager: %w", err)
		}
		m.metrics.leading(le.Name, false)
		m.mu.Lock()
		m.elector = e
		m.mu.Unlock()
		wg.Go(func() {
			if err := e.Run(ctx); err != nil {
				cancel(fmt.Errorf("manager: %w", err))
			}
		})
	} else {
		wg.Go(func() { startLeaders(ctx) })
	}

	<-ctx.Done()
	cause := context.Cause(ctx)
	m.log.Info("shutting down", "cause", cause)
	done := make(chan struct{})
	go func() { wg.Wait(); m.factory.Shutdown(); stopShard(); <-shardDone; close(done) }()
	select {
	case <-done:
	case <-time.After(m.opts.ShutdownTimeout):
		return fmt.Errorf("manager: runnables still running %s after shutdown began", m.opts.ShutdownTimeout)
	}
	if parent.Err() != nil && errors.Is(cause, parent.Err()) {
		return nil // the caller's context ended: a normal shutdown
	}
	return cause
}

// CachedClient returns the manager's client for objects of type E (such
// as appsv1.Deployment, or a custom type of the Scheme): it reads from
// the manager's shared informer for E, reading its own writes (see
// cache.CachedClient), and writes to the API server. Its name says what
// it is: reads come from the cache. opts, at most one, narrows the
// informer (a namespace, selectors; a Resource for unstructured or
// metadata-only objects; ReferencedOnly, for a cache that holds in full
// only the objects read, such as the few Secrets a controller's objects
// name). Every call for one type and options returns the
// same client. It is a controller.Source too: a controller that Owns it
// watches the same informer. An error (a type the manager does not know)
// is returned by Start, and by the client's calls.
func CachedClient[E any, T interface {
	*E
	client.Object
}](m *Manager, opts ...cache.InformerForOptions) *cache.CachedClient[T] {
	var o cache.InformerForOptions
	if len(opts) > 0 {
		o = opts[0]
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	key := clientKey{reflect.TypeFor[T](), o}
	if c, ok := m.clients[key]; ok {
		return c.(*cache.CachedClient[T])
	}
	c, err := newCachedClient[E, T](m, o)
	if len(opts) > 1 {
		err = errors.New("more than one InformerForOptions")
	}
	if err != nil {
		m.errs = append(m.errs, fmt.Errorf("manager: client for %v: %w", key.typ, err))
		c = cache.FailedCachedClient[T](err)
	}
	m.clients[key] = c
	return c
}

// clientKey tells the manager's cached clients apart.
type clientKey struct {
	typ  reflect.Type
	opts cache.InformerForOptions
}

func newCachedClient[E any, T interface {
	*E
	client.Object
}](m *Manager, opts cache.InformerForOptions) (*cache.CachedClient[T], error) {
	var ccopts cache.CachedClientOptions
	if m.sharded != nil {
		copts := m.ClientOptions()
		copts.Resource = opts.Resource
		live, err := client.For[E, T](m.rc, copts)
		if err != nil {
			return nil, err
		}
		ccopts.BeforeWrite = m.keepBucket(live.Resource)
	}
	c, err := cache.CachedClientFor[E, T](m.factory, opts, ccopts)
	if err == nil && opts.ReferencedOnly {
		m.referenced.add(referencedClient{held: c.Held, fetches: c.Fetches, resource: func() string {
			res, err := c.Resource(context.Background())
			if err != nil {
				return ""
			}
			return res.Resource.GroupResource().String()
		}})
	}
	return c, err
}

// SignalContext returns a context that ends on SIGINT or SIGTERM: what a
// program's main gives Start, so that Ctrl-C or a Pod's termination stops
// it gracefully.
func SignalContext() context.Context {
	ctx, _ := signal.NotifyContext(context.Background(), os.Interrupt, syscall.SIGTERM)
	return ctx
}
