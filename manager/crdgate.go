package manager

import (
	"context"
	"fmt"
	"log/slog"
	"sync"
	"time"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
)

// crdResource is where CustomResourceDefinitions live.
var crdResource = client.Resource{
	Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

// GateState says what a CRD gate is doing.
type GateState string

const (
	// GateWaiting: the CRD is not installed or not Established yet; the
	// gated runnable is not running (idle, not failing).
	GateWaiting GateState = "Waiting"
	// GateRunning: the CRD is Established and the gated runnable runs.
	GateRunning GateState = "Running"
)

// CRDGate runs a runnable only while a CustomResourceDefinition exists and
// is Established: a controller for a custom resource waits quietly for its
// CRD to be installed, starts when it is, and stops cleanly (informers
// included) when it is deleted, then waits again. Create it with
// WhenCRDEstablished and add it to a Manager.
type CRDGate struct {
	m     *Manager
	name  string
	build func(m controller.Manager) error
	log   *slog.Logger

	mu    sync.Mutex
	state GateState
	runs  int
}

// WhenCRDEstablished returns a gate for the CRD named crd (such as
// "widgets.example.com"). Each time the CRD becomes Established, build is
// called with a controller.Manager of its own, whose informer factory is
// fresh (with the manager's options), to set up controllers on it
// (controller.New(m, ...)); the gate runs them and the factory, and when
// the CRD goes away stops them and shuts the factory down. Only the
// leader runs it.
func WhenCRDEstablished(m *Manager, crd string, build func(m controller.Manager) error) *CRDGate {
	return &CRDGate{m: m, name: crd, build: build, log: m.log.With("crd", crd), state: GateWaiting}
}

// gated is the controller.Manager a gate gives build: a fresh factory,
// and the runnables build adds.
type gated struct {
	f    *cache.Factory
	opts controller.Options
	rs   []Runnable
}

func (g *gated) Factory() *cache.Factory               { return g.f }
func (g *gated) ControllerOptions() controller.Options { return g.opts }
func (g *gated) Add(r Runnable) error {
	g.rs = append(g.rs, r)
	return nil
}

// run runs the runnables until ctx ends or one of them returns; it
// returns the first error.
func (g *gated) run(ctx context.Context) error {
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	errc := make(chan error, len(g.rs))
	var wg sync.WaitGroup
	for _, r := range g.rs {
		wg.Go(func() { errc <- r.Start(ctx) })
	}
	var err error
	if len(g.rs) > 0 {
		err = <-errc // the first to return ends the run
	} else {
		<-ctx.Done()
	}
	cancel()
	wg.Wait()
	return err
}

// State reports whether the gated runnable runs.
func (g *CRDGate) State() GateState {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.state
}

// Runs counts how many times the gated runnable has been started.
func (g *CRDGate) Runs() int {
	g.mu.Lock()
	defer g.mu.Unlock()
	return g.runs
}

// NeedLeaderElection reports that the gate runs on the leader only.
func (g *CRDGate) NeedLeaderElection() bool { return true }

// Start watches the CRD and runs the gated runnable while it is
// Established, until ctx ends.
func (g *CRDGate) Start(ctx context.Context) error {
	crds, err := client.For[unstructured.Unstructured](g.m.rc, client.Options{Resource: crdResource})
	if err != nil {
		return err
	}
	inf := cache.NewInformer(cache.ListWatch(crds, cache.ListWatchOptions{
		FieldSelector: fields.OneTermEqualSelector("metadata.name", g.name).String(),
	}), cache.InformerOptions[*unstructured.Unstructured]{Name: "crd " + g.name, Logger: g.m.log})
	changed := make(chan struct{}, 1)
	poke := func() {
		select {
		case changed <- struct{}{}:
		default:
		}
	}
	if _, err := inf.AddHandler(cache.HandlerFuncs[*unstructured.Unstructured]{
		Add:    func(*unstructured.Unstructured, bool) { poke() },
		Update: func(_, _ *unstructured.Unstructured) { poke() },
		Delete: func(*unstructured.Unstructured, bool) { poke() },
	}, cache.HandlerOptions{ResyncPeriod: -1}); err != nil {
		return err
	}
	var iwg sync.WaitGroup
	iwg.Go(func() { _ = inf.Start(ctx) })
	defer iwg.Wait()

	var stopChild context.CancelFunc
	var childDone chan error
	// A runnable that keeps stopping by itself (RBAC forbids its informers,
	// say) is started again after a pause that doubles each time, from a
	// second up to five minutes, and starts over once it has run for that
	// long, or when the CRD changes.
	retry := gateMinRetry
	var startedAt time.Time
	retryTimer := time.AfterFunc(time.Hour, poke)
	retryTimer.Stop()
	defer retryTimer.Stop()
	stop := func() {
		if stopChild == nil {
			return
		}
		stopChild()
		if err := <-childDone; err != nil {
			g.log.Error("gated runnable failed", "err", err)
		}
		stopChild, childDone = nil, nil
		g.setState(GateWaiting)
		g.log.Info("CRD gone: controller idle until it is installed again")
	}
	defer stop()
	g.log.Info("waiting for the CRD to be Established")
	for {
		select {
		case <-ctx.Done():
			return nil
		case <-changed:
		case err := <-childDone: // nil channel while nothing runs
			// The runnable ended by itself, for example because the
			// resource was not served yet right after Established: try
			// again after a pause.
			stopChild() // release its context
			stopChild, childDone = nil, nil
			g.setState(GateWaiting)
			if time.Since(startedAt) >= retry {
				retry = gateMinRetry // it ran for a good while: not a failure loop
			}
			g.log.Error("gated runnable stopped; starting it again after a pause", "err", err, "pause", retry)
			retryTimer.Reset(retry)
			retry = min(2*retry, gateMaxRetry)
			continue
		}
		crd, ok := inf.Indexer().Get(g.name)
		established := ok && crd.GetDeletionTimestamp() == nil && isEstablished(crd)
		switch {
		case established && stopChild == nil:
			cctx, cancel := context.WithCancel(ctx)
			f := cache.NewFactory(g.m.rc, cache.FactoryOptions{
				Client:    g.m.ClientOptions(),
				Namespace: g.m.opts.Namespace, Resync: g.m.opts.Resync, Logger: g.m.log, Transform: g.m.opts.Transform,
			})
			m := &gated{f: f, opts: g.m.ControllerOptions()}
			if err := g.build(m); err != nil {
				cancel()
				f.Shutdown()
				return fmt.Errorf("manager: CRD gate %s: build: %w", g.name, err)
			}
			go func() { _ = f.Start(cctx) }()
			startedAt = time.Now()
			stopChild, childDone = cancel, make(chan error, 1)
			go func() {
				err := m.run(cctx)
				f.Shutdown()
				childDone <- err
			}()
			g.mu.Lock()
			g.state, g.runs = GateRunning, g.runs+1
			g.mu.Unlock()
			g.log.Info("CRD Established: controller started")
		case !established && stopChild != nil:
			stop()
			retry = gateMinRetry
		case !established:
			retry = gateMinRetry
		}
	}
}

// The pauses before a gated runnable that stopped by itself is started
// again.
const (
	gateMinRetry = time.Second
	gateMaxRetry = 5 * time.Minute
)

func (g *CRDGate) setState(s GateState) {
	g.mu.Lock()
	g.state = s
	g.mu.Unlock()
}

// isEstablished reports whether a CRD's Established condition is True.
func isEstablished(crd *unstructured.Unstructured) bool {
	conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
	for _, c := range conds {
		if m, ok := c.(map[string]any); ok && m["type"] == "Established" && m["status"] == "True" {
			return true
		}
	}
	return false
}
