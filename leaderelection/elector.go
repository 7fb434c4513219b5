package leaderelection

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"os"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/rest"
)

// Options configure [New]. Namespace and Name are required; every other
// zero value means the documented default.
type Options struct {
	// Namespace and Name identify the Lease.
	Namespace, Name string
	// Identity names this candidate in the Lease. Default: the host name
	// and a random suffix, unique per process.
	Identity string
	// LeaseDuration is how long others wait, from the last change of the
	// Lease they saw, before taking it over. Default 15 s.
	LeaseDuration time.Duration
	// RenewDeadline is how long the leader keeps trying to renew before it
	// gives up leading. It must be shorter than LeaseDuration. Default 10 s.
	RenewDeadline time.Duration
	// RetryPeriod is the time between attempts to acquire or renew. A
	// candidate also tries at the moment the holder's Lease expires by
	// its clock, if that comes sooner. Default 2 s.
	RetryPeriod time.Duration
	// KeepOnCancel keeps the Lease when Run's context ends, instead of
	// releasing it so another candidate can take over at once. Default
	// false (release).
	KeepOnCancel bool
	// OnStartedLeading runs, in its own goroutine, when this candidate
	// becomes leader. Its context is cancelled when leadership ends, and
	// it carries the Elector as a rest.Fence: writes sent with it, or with
	// any context derived from it, are refused once leadership ends, even
	// when the work ignores the cancellation. On a normal end (Run's
	// context cancelled) Run waits up to RenewDeadline for it to return
	// before releasing the Lease; when leadership is lost, Run returns at
	// once without waiting. Required.
	OnStartedLeading func(ctx context.Context)
	// OnStoppedLeading is called when leadership ends, before Run returns;
	// OnStartedLeading's work may still be running (fenced). Optional.
	OnStoppedLeading func()
	// OnNewLeader is called when the holder of the Lease changes, with the
	// new holder's identity ("" when released). Optional.
	OnNewLeader func(identity string)
	// Labels are put on the Lease when this candidate creates it or
	// becomes its holder (kept with the Lease's other labels), so that
	// the Leases of a program can be selected: kubectl get leases -l ...
	// Default nil: none.
	Labels map[string]string
	// Logger receives progress messages. Nil means discard.
	Logger *slog.Logger

	clock clock.Clock // tests only
}

// ErrLeadershipLost is returned by Run when the leader could not renew the
// Lease within RenewDeadline, and by the Elector's fence (see Enter) for
// writes attempted without leadership.
var ErrLeadershipLost = errors.New("leaderelection: leadership lost")

// Elector campaigns for one Lease. Create it with New and call Run once.
type Elector struct {
	leases *client.Client[*coordinationv1.Lease]
	opts   Options
	log    *slog.Logger
	clock  clock.Clock

	mu        sync.Mutex
	observed  *coordinationv1.Lease // the Lease as last read or written
	seenAt    time.Time             // our clock when its holder or renew time last changed
	renewedAt time.Time             // our clock when our last successful write was sent
	leading   bool
	fenced    bool          // leadership ended: the fence refuses writes until we lead again
	inFlight  int           // fenced writes under way
	drained   chan struct{} // closed when inFlight drops to 0 while fenced
	lastErr   error         // the last attempt's error; nil after a success or a conflict
}

// New returns an Elector for the Lease in opts. leases is the Lease client.
func New(leases *client.Client[*coordinationv1.Lease], opts Options) (*Elector, error) {
	if opts.Namespace == "" || opts.Name == "" {
		return nil, errors.New("leaderelection: Options.Namespace and Options.Name are required")
	}
	if opts.OnStartedLeading == nil {
		return nil, errors.New("leaderelection: Options.OnStartedLeading is required")
	}
	if opts.LeaseDuration <= 0 {
		opts.LeaseDuration = 15 * time.Second
	}
	if opts.RenewDeadline <= 0 {
		opts.RenewDeadline = 10 * time.Second
	}
	if opts.RetryPeriod <= 0 {
		opts.RetryPeriod = 2 * time.Second
	}
	if opts.RenewDeadline >= opts.LeaseDuration {
		return nil, fmt.Errorf("leaderelection: RenewDeadline (%s) must be shorter than LeaseDuration (%s)", opts.RenewDeadline, opts.LeaseDuration)
	}
	if opts.RetryPeriod >= opts.RenewDeadline {
		return nil, fmt.Errorf("leaderelection: RetryPeriod (%s) must be shorter than RenewDeadline (%s)", opts.RetryPeriod, opts.RenewDeadline)
	}
	if opts.Identity == "" {
		host, _ := os.Hostname()
		opts.Identity = host + "_" + rand.String(8)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Elector{
		leases: leases.Namespace(opts.Namespace),
		opts:   opts,
		log:    log.With("lease", opts.Namespace+"/"+opts.Name, "identity", opts.Identity),
		clock:  clock.OrReal(opts.clock),
	}, nil
}

// Identity returns this candidate's identity.
func (e *Elector) Identity() string { return e.opts.Identity }

// IsLeader reports whether this candidate leads now.
func (e *Elector) IsLeader() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.leading
}

// Run campaigns until this candidate leads, then leads until ctx ends or
// the Lease cannot be renewed. It returns nil when ctx ends (after
// releasing the Lease, unless KeepOnCancel) and ErrLeadershipLost, at
// once, when renewal failed. Run must be called once.
//
// Leadership is safe against a leader that stalls, as long as the
// candidates' clocks run at about the same rate: a leader stops leading,
// and its fence refuses writes, at most RenewDeadline after its last
// successful renewal was sent, while another candidate takes over no
// sooner than LeaseDuration after it saw that renewal. The difference
// between the two is the margin for a write still on its way to the
// server.
func (e *Elector) Run(ctx context.Context) error {
	if !e.acquire(ctx) {
		return nil // ctx ended before we led
	}
	e.log.Info("became leader")
	leadCtx, stopLeading := context.WithCancel(ctx)
	workDone := make(chan struct{})
	go func() {
		defer close(workDone)
		e.opts.OnStartedLeading(rest.WithFence(leadCtx, e))
	}()
	lost := e.renew(leadCtx)
	stopLeading()
	if lost {
		// Fence first, then report: the work may run on, but it can no
		// longer write.
		e.fence()
		e.log.Error("lost leadership: could not renew the lease", "renewDeadline", e.opts.RenewDeadline, "err", e.LastError())
		if e.opts.OnStoppedLeading != nil {
			e.opts.OnStoppedLeading()
		}
		return ErrLeadershipLost
	}
	t := e.clock.NewTimer(e.opts.RenewDeadline)
	select {
	case <-workDone:
	case <-t.C():
		e.log.Warn("leader work did not return after its context ended; releasing the lease with its writes fenced", "waited", e.opts.RenewDeadline)
	}
	t.Stop()
	drained := e.fence()
	if e.opts.OnStoppedLeading != nil {
		e.opts.OnStoppedLeading()
	}
	if !e.opts.KeepOnCancel {
		// Writes already under way end within RenewDeadline (their
		// deadline); the next leader must not start before they have.
		<-drained
		e.release()
	}
	return nil
}

// fence ends leadership: from now on the fence refuses writes. It returns
// a channel closed once no fenced write is under way.
func (e *Elector) fence() <-chan struct{} {
	e.mu.Lock()
	defer e.mu.Unlock()
	e.leading, e.fenced = false, true
	e.drained = make(chan struct{})
	if e.inFlight == 0 {
		close(e.drained)
	}
	return e.drained
}

// Enter lets the leader's writes through, as a rest.Fence: while this
// candidate leads, a write may take until RenewDeadline after the last
// successful renewal (by then either the Lease was renewed, or leadership
// is lost); otherwise the write is refused with ErrLeadershipLost.
func (e *Elector) Enter() (time.Duration, func(), error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if !e.leading {
		return 0, nil, ErrLeadershipLost
	}
	remaining := e.renewedAt.Add(e.opts.RenewDeadline).Sub(e.clock.Now())
	if remaining <= 0 {
		return 0, nil, ErrLeadershipLost
	}
	e.inFlight++
	var once sync.Once
	return remaining, func() {
		once.Do(func() {
			e.mu.Lock()
			e.inFlight--
			if e.inFlight == 0 && e.fenced {
				close(e.drained)
			}
			e.mu.Unlock()
		})
	}, nil
}

// LastError returns the error of the last attempt to acquire or renew the
// Lease, or nil if it succeeded (or lost a race to another candidate).
// Errors such as Forbidden (RBAC) or NotFound (a missing namespace) keep a
// candidate from ever leading; the manager reports them in /readyz.
func (e *Elector) LastError() error {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.lastErr
}

// attempted records the outcome of one attempt and logs a failure: a
// conflict (another candidate wrote first) at debug level, anything else
// as an error the first time it is seen.
func (e *Elector) attempted(ctx context.Context, err error, what string) {
	if ctx.Err() != nil {
		return
	}
	if apierrors.IsConflict(err) {
		err = nil
	}
	e.mu.Lock()
	prev := e.lastErr
	e.lastErr = err
	e.mu.Unlock()
	switch {
	case err == nil:
	case prev == nil || prev.Error() != err.Error():
		e.log.Error("could not "+what+" the lease", "err", err)
	default:
		e.log.Debug("could not "+what+" the lease", "err", err)
	}
}

// acquire tries until it holds the Lease or ctx ends: every RetryPeriod,
// and at the moment the holder's Lease expires by our clock when that
// comes sooner, so that a leader that died is followed at once rather
// than up to RetryPeriod later.
func (e *Elector) acquire(ctx context.Context) bool {
	for {
		ok, err := e.tryAcquireOrRenew(ctx)
		e.attempted(ctx, err, "acquire")
		if ok {
			return true
		}
		next := e.opts.RetryPeriod
		if left := e.untilExpiry(); left > 0 && left < next {
			next = left
		}
		if !e.wait(ctx, next) {
			return false
		}
	}
}

// renew renews every RetryPeriod until ctx ends (false) or renewal has
// failed for RenewDeadline (true: leadership lost).
func (e *Elector) renew(ctx context.Context) (lost bool) {
	for {
		if !e.wait(ctx, e.opts.RetryPeriod) {
			return false
		}
		// The deadline counts from the last renewal that succeeded, so the
		// leader gives up at most RenewDeadline after it, before others
		// (who wait LeaseDuration from seeing it) may take over.
		e.mu.Lock()
		deadline := e.renewedAt.Add(e.opts.RenewDeadline)
		e.mu.Unlock()
		rctx, cancel := context.WithTimeout(ctx, deadline.Sub(e.clock.Now()))
		renewed := false
		for !renewed && rctx.Err() == nil {
			ok, err := e.tryAcquireOrRenew(rctx)
			e.attempted(rctx, err, "renew")
			if ok {
				renewed = true
				break
			}
			if !e.holds() {
				break // someone else holds it: no point retrying
			}
			e.wait(rctx, e.opts.RetryPeriod/4)
		}
		cancel()
		if ctx.Err() != nil {
			return false
		}
		if !renewed {
			return true
		}
	}
}

// holds reports whether the Lease as last seen names us as holder.
func (e *Elector) holds() bool {
	e.mu.Lock()
	defer e.mu.Unlock()
	return e.observed != nil && holder(e.observed) == e.opts.Identity
}

func holder(l *coordinationv1.Lease) string {
	if l.Spec.HolderIdentity == nil {
		return ""
	}
	return *l.Spec.HolderIdentity
}

// tryAcquireOrRenew makes one attempt to become or stay the holder.
func (e *Elector) tryAcquireOrRenew(ctx context.Context) (bool, error) {
	start := e.clock.Now()
	now := metav1.NewMicroTime(start)
	dur := int32(e.opts.LeaseDuration / time.Second)
	if dur < 1 {
		dur = 1
	}
	lease, err := e.leases.Get(ctx, e.opts.Name, metav1.GetOptions{})
	if apierrors.IsNotFound(err) {
		me := e.opts.Identity
		created, err := e.leases.Create(ctx, &coordinationv1.Lease{
			ObjectMeta: metav1.ObjectMeta{Name: e.opts.Name, Namespace: e.opts.Namespace, Labels: maps.Clone(e.opts.Labels)},
			Spec: coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: &dur,
				AcquireTime: &now, RenewTime: &now, LeaseTransitions: new(int32)},
		}, metav1.CreateOptions{})
		if err != nil {
			return false, err
		}
		e.observe(created)
		e.wrote(start)
		return true, nil
	}
	if err != nil {
		return false, err
	}
	e.observe(lease)
	cur := holder(lease)
	if cur != "" && cur != e.opts.Identity && !e.expired() {
		e.mu.Lock()
		e.leading = false
		e.mu.Unlock()
		return false, nil // held by someone else, who renewed recently
	}
	next := lease.DeepCopy()
	if cur != e.opts.Identity {
		next.Spec.AcquireTime = &now
		t := int32(1)
		if next.Spec.LeaseTransitions != nil {
			t += *next.Spec.LeaseTransitions
		}
		next.Spec.LeaseTransitions = &t
		for k, v := range e.opts.Labels {
			if next.Labels == nil {
				next.Labels = map[string]string{}
			}
			next.Labels[k] = v
		}
	}
	me := e.opts.Identity
	next.Spec.HolderIdentity = &me
	next.Spec.RenewTime = &now
	next.Spec.LeaseDurationSeconds = &dur
	updated, err := e.leases.Update(ctx, next, metav1.UpdateOptions{})
	if err != nil {
		return false, err // a 409 means another candidate wrote first
	}
	e.observe(updated)
	e.wrote(start)
	return true, nil
}

// wrote records a successful write of ours, sent at start.
func (e *Elector) wrote(start time.Time) {
	e.mu.Lock()
	e.renewedAt, e.leading, e.fenced = start, true, false
	e.mu.Unlock()
}

// observe records the Lease as read or written.
func (e *Elector) observe(l *coordinationv1.Lease) {
	e.mu.Lock()
	prev := e.observed
	changed := prev == nil || holder(prev) != holder(l) || !prev.Spec.RenewTime.Equal(l.Spec.RenewTime)
	if changed {
		e.seenAt = e.clock.Now()
	}
	e.observed = l
	notify := prev == nil || holder(prev) != holder(l)
	e.mu.Unlock()
	if notify && e.opts.OnNewLeader != nil {
		e.opts.OnNewLeader(holder(l))
	}
}

// expired reports whether the observed Lease has gone unchanged, by our
// clock, for its duration.
func (e *Elector) expired() bool { return e.untilExpiry() <= 0 }

// untilExpiry is the time left, by our clock, until the observed Lease
// has gone unchanged for its duration; 0 or less once it has.
func (e *Elector) untilExpiry() time.Duration {
	e.mu.Lock()
	defer e.mu.Unlock()
	d := e.opts.LeaseDuration
	if e.observed != nil && e.observed.Spec.LeaseDurationSeconds != nil {
		d = time.Duration(*e.observed.Spec.LeaseDurationSeconds) * time.Second
	}
	return e.seenAt.Add(d).Sub(e.clock.Now())
}

// release clears the holder so another candidate can acquire at once.
func (e *Elector) release() {
	ctx, cancel := context.WithTimeout(context.Background(), e.opts.RenewDeadline)
	defer cancel()
	e.mu.Lock()
	l := e.observed
	e.mu.Unlock()
	if l == nil || holder(l) != e.opts.Identity {
		return
	}
	next := l.DeepCopy()
	next.Spec.HolderIdentity = nil
	one := int32(1)
	next.Spec.LeaseDurationSeconds = &one
	now := metav1.NewMicroTime(e.clock.Now())
	next.Spec.RenewTime = &now
	if _, err := e.leases.Update(ctx, next, metav1.UpdateOptions{}); err != nil {
		e.log.Warn("could not release the lease", "err", err)
		return
	}
	e.log.Info("released the lease")
}

// wait sleeps d on the elector's clock; false if ctx ended first.
func (e *Elector) wait(ctx context.Context, d time.Duration) bool {
	t := e.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
