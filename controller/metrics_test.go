package controller_test

import (
	"context"
	"errors"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/testenv"
)

// metricsRecorder records what a controller tells its Metrics.
type metricsRecorder struct {
	mu        sync.Mutex
	starts    []int                     // workers per ObserveStart
	active    int                       // running sum of ObserveActive
	maxActive int                       // its highest value
	outcomes  map[string][]observedCall // by outcome
}

type observedCall struct {
	outcome  string
	timedOut bool
}

func (m *metricsRecorder) ObserveStart(_ string, workers int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.starts = append(m.starts, workers)
}

func (m *metricsRecorder) ObserveActive(_ string, delta int) {
	m.mu.Lock()
	defer m.mu.Unlock()
	m.active += delta
	m.maxActive = max(m.maxActive, m.active)
}

func (m *metricsRecorder) ObserveReconcile(_, outcome string, timedOut bool, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.outcomes == nil {
		m.outcomes = map[string][]observedCall{}
	}
	m.outcomes[outcome] = append(m.outcomes[outcome], observedCall{outcome, timedOut})
}

func (m *metricsRecorder) count(outcome string, timedOut bool) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	n := 0
	for _, c := range m.outcomes[outcome] {
		if c.timedOut == timedOut {
			n++
		}
	}
	return n
}

// TestMetricsObserveOutcomes: each way a reconcile can end reaches
// Metrics with its outcome, a reconcile that outlives Options.Timeout is
// reported as timed out (and one that ends in time is not), the worker
// count is reported at Start, and active workers go back to zero.
func TestMetricsObserveOutcomes(t *testing.T) {
	rc := restForEnv(t, testenv.Options{})

	// Each object's name chooses how its reconcile ends; every object is
	// reconciled once (errors are terminal or stop being returned).
	tests := []struct {
		name     string
		outcome  string
		timedOut bool
	}{
		{"success", "success", false},
		{"requeue-after", "requeue_after", false},
		{"error", "error", false},
		{"terminal", "terminal_error", false},
		{"panic", "panic", false},
		{"slow", "error", true},           // returns ctx.Err() after the timeout
		{"slow-success", "success", true}, // ignores the timeout's error: still timed out
		{"own-deadline", "error", false},  // its own shorter deadline is not the controller's timeout
	}
	var once sync.Map
	sentinelDone := make(chan struct{})
	rec := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		if _, again := once.LoadOrStore(cm.Name, true); again {
			return controller.Result{}, nil // retries and requeues succeed
		}
		switch cm.Name {
		case "sentinel":
			close(sentinelDone)
		case "requeue-after":
			return controller.Result{RequeueAfter: time.Hour}, nil
		case "error":
			return controller.Result{}, errors.New("boom")
		case "terminal":
			return controller.Result{}, controller.TerminalError(errors.New("boom"))
		case "panic":
			panic("boom")
		case "slow":
			<-ctx.Done()
			return controller.Result{}, ctx.Err()
		case "slow-success":
			<-ctx.Done()
			return controller.Result{}, nil
		case "own-deadline":
			short, cancel := context.WithTimeout(ctx, time.Millisecond)
			defer cancel()
			<-short.Done()
			return controller.Result{}, short.Err()
		}
		return controller.Result{}, nil
	}
	m := &metricsRecorder{}
	mgr := newTestManager(rc)
	mgr.opts.Metrics = m
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	c := controller.New(mgr, rec, controller.Options{Name: "metrics", Workers: 3, Timeout: 2 * time.Second,
		For: cache.InformerForOptions{Namespace: "default", LabelSelector: "metrics-test"}})
	go func() { _ = mgr.f.Start(ctx) }()
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	create := func(name string) {
		t.Helper()
		if _, err := live.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name,
			Labels: map[string]string{"metrics-test": "1"}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, tt := range tests {
		create(tt.name)
	}
	want := map[observedCall]int{}
	for _, tt := range tests {
		want[observedCall{tt.outcome, tt.timedOut}]++
	}
	// The retried keys (error, panic, slow, own-deadline) end in success
	// once more each.
	want[observedCall{"success", false}] += 4
	deadline := time.Now().Add(time.Minute)
	for {
		ok := true
		for k, n := range want {
			if m.count(k.outcome, k.timedOut) < n {
				ok = false
			}
		}
		if ok {
			break
		}
		if time.Now().After(deadline) {
			m.mu.Lock()
			t.Fatalf("outcomes %v, want at least %v", m.outcomes, want)
		}
		time.Sleep(20 * time.Millisecond)
	}
	// A sentinel, created now, is queued after anything extra that was
	// queued by then. Once it has been reconciled, and no worker is busy
	// (a worker observes a reconcile before it is idle again), every key
	// taken before it has been observed.
	create("sentinel")
	want[observedCall{"success", false}]++ // the sentinel's
	select {
	case <-sentinelDone:
	case <-time.After(time.Minute):
		t.Fatal("the sentinel was not reconciled within a minute")
	}
	idle := func() bool { m.mu.Lock(); defer m.mu.Unlock(); return m.active == 0 }
	deadline = time.Now().Add(time.Minute)
	for m.count("success", false) < want[observedCall{"success", false}] || !idle() {
		if time.Now().After(deadline) {
			m.mu.Lock()
			t.Fatalf("a minute after the sentinel's reconcile: %d workers busy, outcomes %v", m.active, m.outcomes)
		}
		time.Sleep(20 * time.Millisecond)
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	for k, n := range want {
		if got := m.count(k.outcome, k.timedOut); got != n {
			t.Errorf("outcome %q timedOut %v: %d reconciles, want %d", k.outcome, k.timedOut, got, n)
		}
	}
	m.mu.Lock()
	defer m.mu.Unlock()
	if len(m.starts) != 1 || m.starts[0] != 3 {
		t.Errorf("ObserveStart calls %v, want one with 3 workers", m.starts)
	}
	if m.active != 0 || m.maxActive < 1 || m.maxActive > 3 {
		t.Errorf("active workers end at %d, peak %d; want 0 and 1..3", m.active, m.maxActive)
	}
}
