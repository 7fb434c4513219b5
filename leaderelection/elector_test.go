package leaderelection_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"sort"
	"sync"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/leaderelection"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{}}

func TestMain(m *testing.M) { shared.Main(m) }

// leases returns a Lease client; host, if set, replaces the server URL
// (for a proxy in front of it).
func leases(t *testing.T, host string) *client.Client[*coordinationv1.Lease] {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	if host != "" {
		cfg.Host = host
	}
	cfg.Timeout = 2 * time.Second
	rc, err := rest.New(cfg, rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	c, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

// recorder checks that leadership intervals never overlap.
type recorder struct {
	mu       sync.Mutex
	leader   string
	overlaps int
	started  map[string]time.Time
	stopped  map[string]time.Time
	changed  chan struct{}
}

func newRecorder() *recorder {
	return &recorder{started: map[string]time.Time{}, stopped: map[string]time.Time{}, changed: make(chan struct{}, 100)}
}

// lead is an OnStartedLeading that holds leadership until its context ends.
func (r *recorder) lead(id string) func(context.Context) {
	return func(ctx context.Context) {
		r.mu.Lock()
		if r.leader != "" {
			r.overlaps++
		}
		r.leader = id
		r.started[id] = time.Now()
		r.mu.Unlock()
		r.changed <- struct{}{}
		<-ctx.Done()
		r.mu.Lock()
		if r.leader == id {
			r.leader = ""
		}
		r.stopped[id] = time.Now()
		r.mu.Unlock()
	}
}

func (r *recorder) current() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.leader
}

// waitLeader waits until someone other than not leads.
func (r *recorder) waitLeader(t *testing.T, not string) string {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		if l := r.current(); l != "" && l != not {
			return l
		}
		select {
		case <-r.changed:
		case <-ctx.Done():
			t.Fatalf("no new leader (current %q)", r.current())
		case <-time.After(10 * time.Millisecond):
		}
	}
}

type candidate struct {
	id     string
	cancel context.CancelFunc
	done   chan error
}

func start(t *testing.T, c *client.Client[*coordinationv1.Lease], lease, id string, rec *recorder, opts leaderelection.Options) *candidate {
	t.Helper()
	opts.Namespace, opts.Name, opts.Identity = "default", lease, id
	opts.OnStartedLeading = rec.lead(id)
	e, err := leaderelection.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	cd := &candidate{id: id, cancel: cancel, done: make(chan error, 1)}
	go func() { cd.done <- e.Run(ctx) }()
	t.Cleanup(func() { cancel(); <-cd.done })
	return cd
}

var fast = leaderelection.Options{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}

// TestFailoverHasNoOverlap runs two candidates on one Lease, cancels the
// leader's context, and checks that the other takes over, never while the
// first still leads. 50 trials.
func TestFailoverHasNoOverlap(t *testing.T) {
	c := leases(t, "")
	const trials = 50
	var failovers []time.Duration
	for i := range trials {
		rec := newRecorder()
		lease := fmt.Sprint("failover-", i)
		a := start(t, c, lease, "a", rec, fast)
		b := start(t, c, lease, "b", rec, fast)
		first := rec.waitLeader(t, "")
		leader, other := a, b
		if first == "b" {
			leader, other = b, a
		}
		t0 := time.Now()
		leader.cancel()
		if err := <-leader.done; err != nil {
			t.Fatalf("trial %d: leader Run: %v", i, err)
		}
		leader.done <- nil // for the cleanup
		if got := rec.waitLeader(t, leader.id); got != other.id {
			t.Fatalf("trial %d: leader %q, want %q", i, got, other.id)
		}
		failovers = append(failovers, time.Since(t0))
		rec.mu.Lock()
		if rec.overlaps != 0 || !rec.stopped[leader.id].Before(rec.started[other.id]) {
			t.Fatalf("trial %d: overlap: %d; %s stopped %v, %s started %v", i, rec.overlaps, leader.id, rec.stopped[leader.id], other.id, rec.started[other.id])
		}
		rec.mu.Unlock()
	}
	sort.Slice(failovers, func(i, j int) bool { return failovers[i] < failovers[j] })
	t.Logf("failover after the leader's context ends, %d trials: median %v, p90 %v, max %v; overlaps 0",
		trials, failovers[trials/2], failovers[trials*9/10], failovers[trials-1])
}

// proxy forwards TCP connections to target until cut, which closes every
// connection and refuses new ones: a leader cut off from the API server.
type proxy struct {
	l      net.Listener
	target string
	mu     sync.Mutex
	conns  []net.Conn
	cut    bool
}

func newProxy(t *testing.T, target string) *proxy {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	p := &proxy{l: l, target: target}
	go func() {
		for {
			c, err := l.Accept()
			if err != nil {
				return
			}
			p.mu.Lock()
			if p.cut {
				p.mu.Unlock()
				c.Close()
				continue
			}
			u, err := net.Dial("tcp", target)
			if err != nil {
				p.mu.Unlock()
				c.Close()
				continue
			}
			p.conns = append(p.conns, c, u)
			p.mu.Unlock()
			go func() { io.Copy(u, c); u.Close() }()
			go func() { io.Copy(c, u); c.Close() }()
		}
	}()
	t.Cleanup(func() { l.Close(); p.cutOff() })
	return p
}

func (p *proxy) cutOff() {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.cut = true
	for _, c := range p.conns {
		c.Close()
	}
}

// TestPartitionedLeaderStopsBeforeTakeover cuts the leader off from the
// API server: it must stop leading (RenewDeadline) before the other
// candidate takes over (LeaseDuration after the last renewal it saw).
func TestPartitionedLeaderStopsBeforeTakeover(t *testing.T) {
	for i := range 3 {
		p := newProxy(t, shared.Env(t).URL[len("https://"):])
		cut := leases(t, "https://"+p.l.Addr().String())
		direct := leases(t, "")
		rec := newRecorder()
		lease := fmt.Sprint("partition-", i)
		// A margin (LeaseDuration - RenewDeadline) of 6 s, so that a loaded
		// machine's scheduling delays cannot eat it.
		wide := leaderelection.Options{LeaseDuration: 8 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 200 * time.Millisecond}
		a := start(t, cut, lease, "a", rec, wide)
		if got := rec.waitLeader(t, ""); got != "a" {
			t.Fatalf("leader %q, want a (started first)", got)
		}
		seen := make(chan struct{})
		var once sync.Once
		bOpts := wide
		bOpts.OnNewLeader = func(id string) {
			if id == "a" {
				once.Do(func() { close(seen) })
			}
		}
		start(t, direct, lease, "b", rec, bOpts)
		<-seen // b knows a leads before a is cut off
		p.cutOff()
		tCut := time.Now()
		if err := <-a.done; !errors.Is(err, leaderelection.ErrLeadershipLost) {
			t.Fatalf("partitioned leader Run returned %v, want ErrLeadershipLost", err)
		}
		a.done <- nil
		if got := rec.waitLeader(t, "a"); got != "b" {
			t.Fatalf("leader %q, want b", got)
		}
		rec.mu.Lock()
		stopped, started := rec.stopped["a"], rec.started["b"]
		rec.mu.Unlock()
		if !stopped.Before(started) || rec.overlaps != 0 {
			t.Fatalf("a stopped at +%v, b started at +%v: overlap", stopped.Sub(tCut), started.Sub(tCut))
		}
		t.Logf("trial %d: a stopped %v after the cut, b took over %v after it (margin %v)", i, stopped.Sub(tCut), started.Sub(tCut), started.Sub(stopped))
	}
}

func TestOptionsValidation(t *testing.T) {
	c := leases(t, "")
	noop := func(context.Context) {}
	tests := []leaderelection.Options{
		{Name: "x", OnStartedLeading: noop},
		{Namespace: "default", Name: "x"},
		{Namespace: "default", Name: "x", OnStartedLeading: noop, LeaseDuration: time.Second, RenewDeadline: 2 * time.Second},
		{Namespace: "default", Name: "x", OnStartedLeading: noop, RetryPeriod: 20 * time.Second},
	}
	for i, o := range tests {
		if _, err := leaderelection.New(c, o); err == nil {
			t.Errorf("case %d: invalid options accepted", i)
		}
	}
	got, err := c.Namespace("default").List(t.Context(), metav1.ListOptions{})
	if err != nil || got == nil {
		t.Fatal(err)
	}
}

// TestLostLeaderReportsAtOnceAndFences cuts a leader off from the API
// server while its work ignores its context and never returns. Run must
// still return ErrLeadershipLost, at the renew deadline, and from then on
// the fence the work's context carries refuses writes, even through a
// connection that still works and a context detached from cancellation.
func TestLostLeaderReportsAtOnceAndFences(t *testing.T) {
	p := newProxy(t, shared.Env(t).URL[len("https://"):])
	cut := leases(t, "https://"+p.l.Addr().String())
	direct := leases(t, "").Namespace("default")
	release := make(chan struct{})
	defer close(release)
	workCtx := make(chan context.Context, 1)
	opts := fast
	opts.Namespace, opts.Name, opts.Identity = "default", "fenced-at-once", "a"
	opts.OnStartedLeading = func(ctx context.Context) {
		workCtx <- ctx
		<-release // ignores ctx: returns only when the test ends
	}
	e, err := leaderelection.New(cut, opts)
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- e.Run(t.Context()) }()
	ctx := context.WithoutCancel(<-workCtx)
	write := func() error {
		_, err := direct.Create(ctx, &coordinationv1.Lease{ObjectMeta: metav1.ObjectMeta{GenerateName: "fenced-write-"}}, metav1.CreateOptions{})
		return err
	}
	if err := write(); err != nil {
		t.Fatalf("a write while leading: %v", err)
	}
	p.cutOff()
	select {
	case err := <-done:
		if !errors.Is(err, leaderelection.ErrLeadershipLost) {
			t.Fatalf("Run = %v, want ErrLeadershipLost", err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Run did not report the loss while the work was still running")
	}
	if err := write(); !errors.Is(err, rest.ErrFenced) || !errors.Is(err, leaderelection.ErrLeadershipLost) {
		t.Fatalf("a write after the loss: %v, want ErrFenced wrapping ErrLeadershipLost", err)
	}
	if e.IsLeader() {
		t.Error("IsLeader after the loss")
	}
}

// TestLastErrorNamesWhyACandidateCannotLead runs a candidate as a user
// with no RBAC: it cannot read the Lease, and LastError says Forbidden.
func TestLastErrorNamesWhyACandidateCannotLead(t *testing.T) {
	env := shared.Env(t)
	kc, err := env.UserKubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	k, err := config.Parse(kc, "nobody")
	if err != nil {
		t.Fatal(err)
	}
	cfg, err := k.Resolve(config.Overrides{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	c, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	opts := fast
	opts.Namespace, opts.Name = "default", "forbidden"
	opts.OnStartedLeading = func(context.Context) { t.Error("led without access to the Lease") }
	e, err := leaderelection.New(c, opts)
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- e.Run(ctx) }()
	defer func() { cancel(); <-done }()
	deadline := time.Now().Add(time.Minute)
	for e.LastError() == nil && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	if err := e.LastError(); !apierrors.IsForbidden(err) {
		t.Fatalf("LastError = %v, want Forbidden", err)
	}
}

// TestAcquiresWhenTheLeaseExpires: a candidate takes over a Lease whose
// holder stopped renewing at the moment it expires by the candidate's
// clock, not at its next round of RetryPeriod. The Lease lasts 5 s and
// the candidate tries every 2 s: it tries at 0, 2 and 4 s, and then at
// 5 s, when the Lease expires (it would wait until 6 s otherwise).
func TestAcquiresWhenTheLeaseExpires(t *testing.T) {
	c := leases(t, "").Namespace("default")
	gone, dur := "gone", int32(5)
	now := metav1.NewMicroTime(time.Now())
	if _, err := c.Create(t.Context(), &coordinationv1.Lease{
		ObjectMeta: metav1.ObjectMeta{Name: "expires"},
		Spec:       coordinationv1.LeaseSpec{HolderIdentity: &gone, LeaseDurationSeconds: &dur, RenewTime: &now},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	fake := clock.NewFake(time.Now())
	opts := leaderelection.Options{LeaseDuration: 5 * time.Second, RenewDeadline: 4 * time.Second, RetryPeriod: 2 * time.Second}
	leaderelection.SetClock(&opts, fake)
	rec := newRecorder()
	start(t, leases(t, ""), "expires", "b", rec, opts)
	// waitArmed waits until the candidate, having tried, waits again.
	waitArmed := func(what string) {
		t.Helper()
		deadline := time.Now().Add(time.Minute)
		for fake.Waiters() == 0 {
			if time.Now().After(deadline) {
				t.Fatalf("the candidate did not wait again %s", what)
			}
			time.Sleep(time.Millisecond)
		}
	}
	waitArmed("after its first try")
	fake.Step(2 * time.Second)
	waitArmed("at 2 s")
	fake.Step(2 * time.Second)
	waitArmed("at 4 s")
	if l := rec.current(); l != "" {
		t.Fatalf("%q leads before the Lease expired", l)
	}
	fake.Step(time.Second) // 5 s: the Lease has expired
	if l := rec.waitLeader(t, ""); l != "b" {
		t.Fatalf("leader %q, want b", l)
	}
}
