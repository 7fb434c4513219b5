package controller_test

import (
	"context"
	"fmt"
	"slices"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/workqueue"
)

// depthRecorder is a workqueue.MetricsProvider that keeps the depth of
// each priority.
type depthRecorder struct {
	mu    sync.Mutex
	depth map[int]float64
	peak  map[int]float64 // highest depth since reset
}

type priorityGauge struct {
	r    *depthRecorder
	prio int
}

func (g priorityGauge) Set(v float64) {
	g.r.mu.Lock()
	defer g.r.mu.Unlock()
	g.r.depth[g.prio] = v
	g.r.peak[g.prio] = max(g.r.peak[g.prio], v)
}

func newDepthRecorder() *depthRecorder {
	return &depthRecorder{depth: map[int]float64{}, peak: map[int]float64{}}
}

// reset forgets the peaks.
func (r *depthRecorder) reset() {
	r.mu.Lock()
	defer r.mu.Unlock()
	clear(r.peak)
}

func (r *depthRecorder) peakOf(prio int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.peak[prio]
}

func (r *depthRecorder) QueueMetrics(string) workqueue.Metrics {
	return workqueue.Metrics{DepthByPriority: r}
}

func (r *depthRecorder) WithPriority(p int) workqueue.Gauge { return priorityGauge{r, p} }

func (r *depthRecorder) get(prio int) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.depth[prio]
}

// TestChangeGoesBeforeInitialBacklog: the objects of the initial list are
// queued at low priority, so an object created, and one updated, while a
// one-worker controller works through that backlog are reconciled before
// the backlog is done. The first reconcile is held until both changes are
// queued (the queue's depth metrics show it), so the test does not depend
// on timing.
func TestChangeGoesBeforeInitialBacklog(t *testing.T) { backlogOrder(t, false) }

// TestNoPriorityIsFirstInFirstOut: with Options.NoPriority the same
// changes wait their turn behind the backlog, in the order they came.
func TestNoPriorityIsFirstInFirstOut(t *testing.T) { backlogOrder(t, true) }

// backlogOrder reconciles a backlog of listed objects with one worker,
// holding the first reconcile until two changes are queued, and checks
// where the changes were reconciled.
func backlogOrder(t *testing.T, noPriority bool) {
	rc := restForEnv(t, testenv.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const ns, label, backlog = "default", "priority-test", 30
	live, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms := live.Namespace(ns)
	newCM := func(name string) *corev1.ConfigMap {
		return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, Labels: map[string]string{label: "1"}}}
	}
	var names []string
	for i := range backlog {
		name := fmt.Sprintf("backlog-%03d", i)
		names = append(names, name)
		if _, err := cms.Create(ctx, newCM(name), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// The object to change: last in the list's order, so last of the
	// backlog were the queue first in, first out.
	updated := names[backlog-1]

	var (
		mu    sync.Mutex
		order []string
	)
	gate := make(chan struct{})
	first := make(chan struct{})
	rec := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		mu.Lock()
		order = append(order, cm.Name)
		n := len(order)
		mu.Unlock()
		if n == 1 {
			close(first)
			select {
			case <-gate:
			case <-ctx.Done():
			}
		}
		return controller.Result{}, nil
	}
	depth := newDepthRecorder()
	mgr := newTestManager(rc)
	c := controller.New(mgr, rec, controller.Options{Name: "priority", Workers: 1, QueueMetrics: depth, NoPriority: noPriority,
		For: cache.InformerForOptions{Namespace: ns, LabelSelector: label}})
	go func() { _ = mgr.f.Start(ctx) }()
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()

	select {
	case <-first:
	case <-time.After(2 * time.Minute):
		t.Fatal("no reconcile within two minutes")
	}
	wantLow := backlog - 1
	if noPriority {
		wantLow = 0
	}
	if d := depth.get(workqueue.PriorityLow); d != float64(wantLow) {
		t.Errorf("low-priority depth = %v while the first object is reconciled, want %d", d, wantLow)
	}
	// Two changes while the worker is busy: an update of a listed object
	// and a new object.
	cm, err := cms.Get(ctx, updated, metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cm.Data = map[string]string{"changed": "yes"}
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Create(ctx, newCM("fresh"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "both changes queued at normal priority", func() (bool, error) {
		if noPriority { // the update's key is queued already: only the new one adds
			return depth.get(workqueue.PriorityNormal) == backlog, nil
		}
		return depth.get(workqueue.PriorityNormal) == 2, nil
	})
	close(gate)
	waitUntil(t, "every object reconciled", func() (bool, error) {
		mu.Lock()
		defer mu.Unlock()
		return len(order) >= backlog+1, nil
	})
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	mu.Lock()
	defer mu.Unlock()
	t.Logf("reconcile order: %v", order)
	last := order[len(order)-1]
	if noPriority {
		if i := slices.Index(order, updated); i != backlog-1 || last != "fresh" {
			t.Errorf("without priorities: %s at position %d (want %d, its place in the list), %s last (want fresh)", updated, i+1, backlog, last)
		}
		return
	}
	for _, changed := range []string{updated, "fresh"} {
		i := slices.Index(order, changed)
		if i < 0 {
			t.Errorf("%s was not reconciled", changed)
			continue
		}
		// Reconciled before the backlog finished: some object of the
		// initial list came after it.
		if changed == last || i > backlog-1 {
			t.Errorf("%s reconciled at position %d of %d, after the backlog", changed, i+1, len(order))
		}
	}
	if len(order) != backlog+1 {
		t.Errorf("%d reconciles, want %d (each object once)", len(order), backlog+1)
	}
}

// TestRequeuePriorities: a requeue (RequeueAfter) and an error retry go
// in at Result.Priority, and a periodic resync at low priority.
func TestRequeuePriorities(t *testing.T) {
	rc := restForEnv(t, testenv.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	const ns, label = "default", "requeue-priority-test"
	live, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var (
		mu    sync.Mutex
		calls = map[string]int{}
	)
	count := func(name string) int {
		mu.Lock()
		defer mu.Unlock()
		return calls[name]
	}
	rec := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		mu.Lock()
		calls[cm.Name]++
		n := calls[cm.Name]
		mu.Unlock()
		switch {
		case cm.Name == "requeue" && n == 1:
			return controller.Result{RequeueAfter: 10 * time.Millisecond, Priority: 7}, nil
		case cm.Name == "retry" && n == 1:
			return controller.Result{Priority: 3}, fmt.Errorf("first attempt of %s fails", cm.Name)
		}
		return controller.Result{}, nil
	}
	depth := newDepthRecorder()
	mgr := &testManager{f: cache.NewFactory(rc, cache.FactoryOptions{Resync: time.Second})}
	c := controller.New(mgr, rec, controller.Options{Name: "requeue-priority", QueueMetrics: depth,
		For: cache.InformerForOptions{Namespace: ns, LabelSelector: label}})
	go func() { _ = mgr.f.Start(ctx) }()
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	for _, name := range []string{"requeue", "retry"} {
		if _, err := live.Namespace(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{label: "1"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	waitUntil(t, "the requeue and the retry", func() (bool, error) {
		return count("requeue") >= 2 && count("retry") >= 2, nil
	})
	if p := depth.peakOf(7); p != 1 {
		t.Errorf("peak depth at priority 7 (the requeue's) = %v, want 1", p)
	}
	if p := depth.peakOf(3); p != 1 {
		t.Errorf("peak depth at priority 3 (the retry's) = %v, want 1", p)
	}
	// Nothing changes from now on: what is queued next is a resync.
	depth.reset()
	n := count("requeue")
	waitUntil(t, "a resync", func() (bool, error) { return count("requeue") > n, nil })
	if p := depth.peakOf(workqueue.PriorityLow); p < 1 {
		t.Errorf("peak depth at low priority during a resync = %v, want at least 1", p)
	}
	if p := depth.peakOf(workqueue.PriorityNormal); p != 0 {
		t.Errorf("peak depth at normal priority during a resync = %v, want 0", p)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
}
