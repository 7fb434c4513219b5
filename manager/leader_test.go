package manager_test

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// leaderWork is a runnable that needs leadership and counts how many
// copies run at once.
type leaderWork struct {
	active *atomic.Int32
	max    *atomic.Int32
	ran    atomic.Bool
}

func (w *leaderWork) NeedLeaderElection() bool { return true }

func (w *leaderWork) Start(ctx context.Context) error {
	n := w.active.Add(1)
	for {
		m := w.max.Load()
		if n <= m || w.max.CompareAndSwap(m, n) {
			break
		}
	}
	w.ran.Store(true)
	<-ctx.Done()
	w.active.Add(-1)
	return nil
}

func TestTwoManagersOneLeader(t *testing.T) {
	var active, maxActive atomic.Int32
	le := manager.LeaderElection{Enabled: true, Namespace: "default", Name: "two-managers",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
	type running struct {
		mgr    *manager.Manager
		work   *leaderWork
		cancel context.CancelFunc
		done   chan error
	}
	var ms []*running
	for _, id := range []string{"one", "two"} {
		le.Identity = id
		mgr, err := manager.New(manager.Options{Config: new(cfg(t)), LeaderElection: le})
		if err != nil {
			t.Fatal(err)
		}
		w := &leaderWork{active: &active, max: &maxActive}
		if err := mgr.Add(w); err != nil {
			t.Fatal(err)
		}
		ctx, cancel := context.WithCancel(t.Context())
		r := &running{mgr: mgr, work: w, cancel: cancel, done: make(chan error, 1)}
		go func() { r.done <- mgr.Start(ctx) }()
		ms = append(ms, r)
	}
	leader := func() *running {
		var l *running
		eventually(t, "a leader", func() bool {
			for _, r := range ms {
				if r.mgr.IsLeader() && r.work.ran.Load() {
					l = r
					return true
				}
			}
			return false
		})
		return l
	}
	first := leader()
	var second *running
	for _, r := range ms {
		if r != first {
			second = r
		}
	}
	// leader_election_master_status: 1 on the leader, 0 on the candidate
	// waiting, 0 on the leader once it has stopped.
	if got := leaderStatus(t, first.mgr, "two-managers"); got != 1 {
		t.Errorf("leader's leader_election_master_status = %v, want 1", got)
	}
	if got := leaderStatus(t, second.mgr, "two-managers"); got != 0 {
		t.Errorf("follower's leader_election_master_status = %v, want 0", got)
	}
	first.cancel()
	if err := <-first.done; err != nil {
		t.Fatalf("leader's manager: %v", err)
	}
	if got := leaderStatus(t, first.mgr, "two-managers"); got != 0 {
		t.Errorf("stopped leader's leader_election_master_status = %v, want 0", got)
	}
	eventually(t, "the other manager to lead", func() bool { return second.mgr.IsLeader() && second.work.ran.Load() })
	second.cancel()
	if err := <-second.done; err != nil {
		t.Fatalf("second manager: %v", err)
	}
	if maxActive.Load() != 1 {
		t.Fatalf("%d leader runnables ran at once", maxActive.Load())
	}
}

// leaderStatus returns leader_election_master_status{name=lease} from
// mgr's registry, or -1 if there is no such series.
func leaderStatus(t *testing.T, mgr *manager.Manager, lease string) float64 {
	t.Helper()
	mfs, err := mgr.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != "leader_election_master_status" {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == "name" && l.GetValue() == lease {
					return m.GetGauge().GetValue()
				}
			}
		}
	}
	return -1
}

func TestPanickingReconcilerDoesNotKillTheManager(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	var calls atomic.Int32
	var once sync.Once
	done := make(chan struct{})
	controller.New(mgr, func(ctx context.Context, _ *corev1.ConfigMap) (controller.Result, error) {
		if calls.Add(1) == 1 {
			panic("boom")
		}
		once.Do(func() { close(done) })
		return controller.Result{}, nil
	}, controller.Options{Name: "panicky", For: cache.InformerForOptions{LabelSelector: "loom.dev/panicky"}})
	ctx, cancel := context.WithCancel(t.Context())
	stopped := make(chan error, 1)
	go func() { stopped <- mgr.Start(ctx) }()
	cms, _ := client.For[corev1.ConfigMap](mgr.REST(), client.Options{})
	if _, err := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "panicky",
		Labels: map[string]string{"loom.dev/panicky": "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done: // the panic was recovered and the key retried
	case err := <-stopped:
		t.Fatalf("manager stopped: %v", err)
	case <-time.After(time.Minute):
		t.Fatal("key never reconciled after the panic")
	}
	rec := httptest.NewRecorder()
	mgr.MetricsHandler().ServeHTTP(rec, httptest.NewRequest(http.MethodGet, "/metrics", nil))
	for _, want := range []string{
		`controller_runtime_reconcile_panics_total{controller="panicky"} 1`,
		`controller_runtime_reconcile_total{controller="panicky",result="error"} 1`,
	} {
		if !strings.Contains(rec.Body.String(), want) {
			t.Errorf("panic not counted: no %s in\n%s", want, rec.Body.String())
		}
	}
	cancel()
	if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
		t.Fatal(err)
	}
}

func TestCachedClientReadsItsWrites(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	cc := manager.CachedClient[corev1.ConfigMap](mgr)
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	cm, err := cc.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "mine", Namespace: "default"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	got, err := cc.Get(ctx, "default", "mine")
	if err != nil || got.ResourceVersion != cm.ResourceVersion {
		t.Fatalf("read after create: %v %v", got, err)
	}
	if again := manager.CachedClient[corev1.ConfigMap](mgr); again != cc {
		t.Error("a second CachedClient for the same type is another client")
	}
}

// TestReadyzReportsLeaseErrors: a candidate whose Lease lives in a
// namespace that does not exist can never lead; /readyz says so and why,
// in a few words of its own.
func TestReadyzReportsLeaseErrors(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), HealthAddr: "127.0.0.1:0", LeaderElection: manager.LeaderElection{
		Enabled: true, Namespace: "no-such-namespace", Name: "x",
		LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond,
	}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() { cancel(); <-done }()
	var body string
	eventually(t, "/readyz to report the lease error", func() bool {
		addr := mgr.Addr("health")
		if addr == nil {
			return false
		}
		resp, err := http.Get("http://" + addr.String() + "/readyz")
		if err != nil {
			return false
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		body = string(b)
		return resp.StatusCode == http.StatusServiceUnavailable && strings.Contains(body, "leader-election: failed")
	})
	if body != "leader-election: failed: not found\nreadyz check failed\n" {
		t.Errorf("/readyz says %q; want the failing check and a short reason (not found), not the server's words", body)
	}
}
