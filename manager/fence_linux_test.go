package manager_test

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"os/signal"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
)

const (
	candidateEnv  = "LOOM_FENCE_CANDIDATE"  // the candidate's identity
	kubeconfigEnv = "LOOM_FENCE_KUBECONFIG" // where the candidate connects
	fenceLease    = "fence-test"
	fenceLedger   = "fence-ledger"
	ignoreCtxFor  = 10 * time.Second
	// The fence's margin is candidateLease - candidateRenew: a write that
	// passed the fence's last check may still reach the server that much
	// later without overlapping the next leader. 1 s once let one late
	// write through on a loaded 2-core machine (a clean-clone CI run), so
	// the margin is 2 s.
	candidateLease  = 2500 * time.Millisecond
	candidateRenew  = 500 * time.Millisecond
	candidateRetry  = 100 * time.Millisecond
	defaultFailover = 50
)

// runCandidate is a candidate process of TestFencedFailovers: a manager
// whose leader runnable writes its identity into the ledger ConfigMap
// every 10 ms, and, once its context ends, ignores that and goes on
// writing for ten more seconds, with a context that keeps the manager's
// fence (context.WithoutCancel). It prints "wrote ID SEQ RV T" for each
// write that landed, T being the wall-clock time (Unix nanoseconds) at
// which the write was made, and "fenced ID SEQ" for each write the fence
// refused.
func runCandidate(id string) int {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM)
	defer stop()
	cfg, err := config.Load(config.LoadOptions{Path: os.Getenv(kubeconfigEnv)})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	mgr, err := manager.New(manager.Options{Config: new(cfg), LeaderElection: manager.LeaderElection{
		Enabled: true, Namespace: "default", Name: fenceLease, Identity: id,
		LeaseDuration: candidateLease, RenewDeadline: candidateRenew, RetryPeriod: candidateRetry,
	}})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cms, err := client.For[corev1.ConfigMap](mgr.REST(), client.Options{})
	if err != nil {
		fmt.Println("error", err)
		return 1
	}
	cms = cms.Namespace("default")
	var out sync.Mutex
	say := func(format string, args ...any) {
		out.Lock()
		fmt.Printf(format+"\n", args...)
		out.Unlock()
	}
	workDone := make(chan struct{})
	var leading atomic.Bool
	if err := mgr.Add(leaderFunc(func(ctx context.Context) error {
		leading.Store(true)
		defer close(workDone)
		w := context.WithoutCancel(ctx) // ignores cancellation, keeps the fence
		var until time.Time
		for seq := 0; ; seq++ {
			if ctx.Err() != nil && until.IsZero() {
				until = time.Now().Add(ignoreCtxFor)
			}
			if !until.IsZero() && time.Now().After(until) {
				return nil
			}
			patch := fmt.Sprintf(`{"data":{"writer":%q}}`, id+"/"+strconv.Itoa(seq))
			made := time.Now().UnixNano()
			cm, err := cms.Patch(w, fenceLedger, types.MergePatchType, []byte(patch), metav1.PatchOptions{})
			switch {
			case err == nil:
				say("wrote %s %d %s %d", id, seq, cm.ResourceVersion, made)
			case errors.Is(err, rest.ErrFenced):
				say("fenced %s %d", id, seq)
			default:
				say("failed %s %d %v", id, seq, err)
			}
			time.Sleep(10 * time.Millisecond)
		}
	})); err != nil {
		fmt.Println("error", err)
		return 1
	}
	err = mgr.Start(ctx)
	say("stopped %s %v", id, err)
	if leading.Load() && ctx.Err() == nil {
		select { // the runnable runs on, fenced, as a careless main would let it
		case <-workDone:
		case <-ctx.Done():
		}
	}
	return 0
}

type leaderFunc func(ctx context.Context) error

func (f leaderFunc) Start(ctx context.Context) error { return f(ctx) }
func (leaderFunc) NeedLeaderElection() bool          { return true }

// candidate is a running candidate process and what it printed.
type candidate struct {
	id     string
	paused int64 // when the test stopped it (Unix nanoseconds), or 0
	cmd    *exec.Cmd
	mu     sync.Mutex
	lines  []string
	exited chan struct{}
}

func (c *candidate) wrote() bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, l := range c.lines {
		if strings.HasPrefix(l, "wrote ") {
			return true
		}
	}
	return false
}

// TestFencedFailovers runs candidates as separate processes and makes the
// leader fail over 50 times by stopping its process (SIGSTOP) for longer
// than the Lease, as a long pause or a starved node would, until another
// candidate has taken over and written; then it lets the old leader run
// again. Its runnable ignores its context for ten seconds and keeps
// trying to write. Against the real API server, every write that landed
// is ordered by its resourceVersion: an overlap is a write of an old
// leader that landed after the first write of a leader that came after
// it. There must be none, except for a write that was already on its way
// when the process was stopped (see below), and the old leaders must have
// tried (their fenced writes are counted), or the test would prove
// nothing.
func TestFencedFailovers(t *testing.T) {
	env := shared.Env(t)
	ctx := t.Context()
	rc := restFor(t)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fenceLedger}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	leases, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	leases = leases.Namespace("default")
	holder := func() string {
		l, err := leases.Get(ctx, fenceLease, metav1.GetOptions{})
		if err != nil || l.Spec.HolderIdentity == nil {
			return ""
		}
		return *l.Spec.HolderIdentity
	}

	var all []*candidate
	live := map[string]*candidate{}
	next := 0
	start := func() {
		next++
		c := &candidate{id: fmt.Sprint("candidate-", next), exited: make(chan struct{})}
		c.cmd = exec.Command(os.Args[0], "-test.run=^$")
		c.cmd.Env = append(os.Environ(), candidateEnv+"="+c.id, kubeconfigEnv+"="+env.KubeconfigPath)
		c.cmd.SysProcAttr = &syscall.SysProcAttr{Pdeathsig: syscall.SIGKILL}
		stdout, err := c.cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		c.cmd.Stderr = os.Stderr
		if err := c.cmd.Start(); err != nil {
			t.Fatal(err)
		}
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				c.mu.Lock()
				c.lines = append(c.lines, sc.Text())
				c.mu.Unlock()
			}
			_ = c.cmd.Wait()
			close(c.exited)
		}()
		all = append(all, c)
		live[c.id] = c
	}
	t.Cleanup(func() {
		for _, c := range all {
			_ = c.cmd.Process.Signal(syscall.SIGCONT)
			_ = c.cmd.Process.Kill()
			<-c.exited
		}
	})
	start()
	start()

	failovers := defaultFailover
	if n, err := strconv.Atoi(os.Getenv("LOOM_FAILOVERS")); err == nil && n > 0 {
		failovers = n
	}
	for i := range failovers {
		var leader *candidate
		eventually(t, "a leader that writes", func() bool {
			leader = live[holder()]
			return leader != nil && leader.wrote()
		})
		leader.paused = time.Now().UnixNano()
		if err := leader.cmd.Process.Signal(syscall.SIGSTOP); err != nil {
			t.Fatal(err)
		}
		var successor *candidate
		eventually(t, fmt.Sprintf("failover %d: another leader that writes", i+1), func() bool {
			successor = live[holder()]
			return successor != nil && successor != leader && successor.wrote()
		})
		// The old leader runs again: it finds it has lost, and its
		// runnable goes on trying to write for ten seconds, then it exits.
		if err := leader.cmd.Process.Signal(syscall.SIGCONT); err != nil {
			t.Fatal(err)
		}
		delete(live, leader.id)
		start()
	}
	for _, c := range all {
		_ = c.cmd.Process.Signal(syscall.SIGCONT)
		_ = c.cmd.Process.Signal(syscall.SIGTERM)
	}
	for _, c := range all {
		select {
		case <-c.exited:
		case <-time.After(time.Minute):
			t.Fatalf("%s did not exit within a minute of SIGTERM", c.id)
		}
	}

	// Each candidate leads at most once: its first write opens its term.
	type write struct {
		c    *candidate
		rv   int64
		made int64
	}
	var writes []write
	first := map[string]int64{}
	fenced := 0
	for _, c := range all {
		for _, l := range c.lines {
			f := strings.Fields(l)
			switch {
			case len(f) == 5 && f[0] == "wrote":
				rv, err := strconv.ParseInt(f[3], 10, 64)
				made, err2 := strconv.ParseInt(f[4], 10, 64)
				if err != nil || err2 != nil {
					t.Fatalf("%s: %q", c.id, l)
				}
				writes = append(writes, write{c, rv, made})
				if r, ok := first[c.id]; !ok || rv < r {
					first[c.id] = rv
				}
			case len(f) == 3 && f[0] == "fenced":
				fenced++
			}
		}
	}
	// A write that was already on its way when its process was stopped
	// may have passed the fence's last check and been stopped in the few
	// instructions between it and the socket: the limit rest.Fence
	// documents, which no check in the process can close. Such a write is
	// counted apart, and there can be at most one per stop, since the
	// runnable writes one at a time; any other late write is an overlap.
	overlaps, inFlight := 0, map[string]int{}
	for _, w := range writes {
		var after []string // the leaders that came later and wrote before w landed
		for id, r := range first {
			if id != w.c.id && first[w.c.id] < r && r < w.rv {
				after = append(after, fmt.Sprintf("%s's first write at %d", id, r))
			}
		}
		switch {
		case len(after) == 0:
		case w.c.paused != 0 && w.made < w.c.paused:
			inFlight[w.c.id]++
			t.Logf("%s's write made before it was stopped landed at resourceVersion %d, after %s", w.c.id, w.rv, strings.Join(after, ", "))
		default:
			overlaps++
			t.Errorf("%s wrote at resourceVersion %d, after %s", w.c.id, w.rv, strings.Join(after, ", "))
		}
	}
	for id, n := range inFlight {
		if n > 1 {
			t.Errorf("%s landed %d late writes made before it was stopped; it has at most one in flight", id, n)
		}
	}
	t.Logf("%d failovers, %d leaders wrote %d times; %d writes fenced; %d overlaps; %d late writes that were in flight when their process was stopped", failovers, len(first), len(writes), fenced, overlaps, len(inFlight))
	if len(first) < failovers+1 {
		t.Errorf("only %d candidates led, want %d", len(first), failovers+1)
	}
	if fenced == 0 {
		t.Error("no write was fenced: the old leaders' runnables never tried to write after losing, so the test proves nothing")
	}
}

// restFor is an admin REST client for the shared control plane.
func restFor(t *testing.T) *rest.Client {
	t.Helper()
	rc, err := rest.New(cfg(t), rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}
