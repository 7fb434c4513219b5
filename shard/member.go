package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"strings"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/rand"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
)

// MemberOptions configure [NewMember]. Ring and Namespace are required;
// every other zero value means the documented default.
type MemberOptions struct {
	// Ring names the ring; Namespace holds its Leases.
	Ring, Namespace string
	// Identity names this shard: its Lease is named "<ring>-<identity>"
	// and names it as the holder. Default:
	// the host name (lower case) and a random suffix, unique per process.
	Identity string
	// LeaseDuration is how long the others wait, from the last renewal
	// they saw, before they count this shard dead. Default 15 s.
	LeaseDuration time.Duration
	// RenewDeadline is how long this shard keeps trying to renew before
	// it gives up: Start then returns ErrShardLost, and the fence refuses
	// writes. It must be shorter than LeaseDuration. Default 10 s.
	RenewDeadline time.Duration
	// RetryPeriod is the time between renewals. Default 2 s.
	RetryPeriod time.Duration
	// Logger receives progress messages. Nil means discard.
	Logger *slog.Logger

	clock clock.Clock // tests only
}

// ErrShardLost is returned by [Member.Start] when the shard could not
// renew its Lease within RenewDeadline, and by its fence for writes
// attempted after that: other replicas may count it dead and take over
// its objects.
var ErrShardLost = errors.New("shard: lease lost")

// Member holds one shard's Lease: it creates the Lease, renews it, and
// deletes it when its work is done, so the others see at once that the
// shard has left. It is a rest.Fence: writes sent with a context from
// rest.WithFence(ctx, m) are refused once the shard may be counted dead.
type Member struct {
	leases *client.Client[*coordinationv1.Lease]
	opts   MemberOptions
	log    *slog.Logger
	clock  clock.Clock

	writing sync.Mutex // one write of the Lease at a time
	closed  bool       // under writing: the Lease is being deleted; no more writes

	mu        sync.Mutex
	claims    string                // the ClaimsAnnotation to write
	lease     *coordinationv1.Lease // as last written
	renewedAt time.Time             // our clock when our last successful write was sent
	held      bool
	inFlight  int
	drained   chan struct{} // closed when inFlight drops to 0 after held ends
}

// DefaultIdentity returns the identity a shard or leader candidate gets
// when none is given: the host name in lower case, cut to fit a label
// value, and a random suffix.
func DefaultIdentity() string {
	host, _ := os.Hostname()
	host = strings.ToLower(host)
	host = strings.Map(func(r rune) rune {
		if r >= 'a' && r <= 'z' || r >= '0' && r <= '9' || r == '-' {
			return r
		}
		return '-'
	}, host)
	host = strings.Trim(host, "-")
	if len(host) > 40 {
		host = strings.TrimRight(host[:40], "-")
	}
	if host == "" {
		host = "shard"
	}
	return host + "-" + rand.String(6)
}

// NewMember returns a Member for opts. leases is the Lease client.
func NewMember(leases *client.Client[*coordinationv1.Lease], opts MemberOptions) (*Member, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("%w: MemberOptions.Namespace is required", ErrInvalid)
	}
	if opts.Identity == "" {
		opts.Identity = DefaultIdentity()
	}
	if err := validate(opts.Ring, opts.Identity); err != nil {
		return nil, err
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
	if opts.RenewDeadline >= opts.LeaseDuration || opts.RetryPeriod >= opts.RenewDeadline {
		return nil, fmt.Errorf("%w: need RetryPeriod (%s) < RenewDeadline (%s) < LeaseDuration (%s)", ErrInvalid, opts.RetryPeriod, opts.RenewDeadline, opts.LeaseDuration)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Member{
		leases: leases.Namespace(opts.Namespace),
		opts:   opts,
		log:    log.With("ring", opts.Ring, "shard", opts.Identity),
		clock:  clock.OrReal(opts.clock),
	}, nil
}

// Identity returns the shard's identity.
func (m *Member) Identity() string { return m.opts.Identity }

// Start creates or takes over the shard's Lease and renews it every
// RetryPeriod until ctx ends; it then waits for fenced writes under way
// and deletes the Lease, and returns nil. It returns ErrShardLost when no
// renewal succeeded for RenewDeadline, and an error at once when the
// Lease cannot be written at all (such as RBAC's Forbidden) within
// RenewDeadline of starting.
func (m *Member) Start(ctx context.Context) error {
	m.mu.Lock()
	m.renewedAt = m.clock.Now()
	m.mu.Unlock()
	for {
		m.mu.Lock()
		deadline := m.renewedAt.Add(m.opts.RenewDeadline)
		m.mu.Unlock()
		var err error
		for {
			if err = m.write(ctx); err == nil || ctx.Err() != nil {
				break
			}
			m.log.Debug("could not write the shard lease", "err", err)
			if !m.clock.Now().Add(m.opts.RetryPeriod / 4).Before(deadline) {
				break
			}
			if !m.wait(ctx, m.opts.RetryPeriod/4) {
				break
			}
		}
		if ctx.Err() != nil {
			m.release()
			return nil
		}
		if err != nil {
			m.stop()
			m.log.Error("shard lease lost", "err", err)
			return fmt.Errorf("%w: %w", ErrShardLost, err)
		}
		if !m.wait(ctx, m.opts.RetryPeriod) {
			m.release()
			return nil
		}
	}
}

// Claim writes the buckets bs (see ClaimsAnnotation) in the Lease, and
// keeps them there at each renewal until the next call. It returns once
// the write succeeded, and ErrShardLost once the Lease is given up.
func (m *Member) Claim(ctx context.Context, bs []int) error {
	m.mu.Lock()
	m.claims = EncodeClaims(bs)
	m.mu.Unlock()
	var err error
	for range 3 { // a conflict with a renewal is read again and retried
		if err = m.write(ctx); err == nil || !apierrors.IsConflict(err) {
			break
		}
	}
	return err
}

// write creates or renews the Lease once.
func (m *Member) write(ctx context.Context) error {
	m.writing.Lock()
	defer m.writing.Unlock()
	if m.closed {
		return ErrShardLost
	}
	start := m.clock.Now()
	now := metav1.NewMicroTime(start)
	dur := max(int32(m.opts.LeaseDuration/time.Second), 1)
	me := m.opts.Identity
	m.mu.Lock()
	cur, claims := m.lease, m.claims
	m.mu.Unlock()
	var out *coordinationv1.Lease
	var err error
	if cur == nil {
		cur, err = m.leases.Get(ctx, leaseName(m.opts.Ring, me), metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			out, err = m.leases.Create(ctx, &coordinationv1.Lease{
				ObjectMeta: metav1.ObjectMeta{
					Name: leaseName(m.opts.Ring, me), Namespace: m.opts.Namespace,
					Labels:      map[string]string{RingLabel: m.opts.Ring},
					Annotations: map[string]string{ClaimsAnnotation: claims},
				},
				Spec: coordinationv1.LeaseSpec{HolderIdentity: &me, LeaseDurationSeconds: &dur, AcquireTime: &now, RenewTime: &now},
			}, metav1.CreateOptions{})
			cur = nil
		} else if err != nil {
			return err
		}
	}
	if cur != nil {
		next := cur.DeepCopy()
		if next.Labels == nil {
			next.Labels = map[string]string{}
		}
		next.Labels[RingLabel] = m.opts.Ring
		if next.Annotations == nil {
			next.Annotations = map[string]string{}
		}
		// A Lease taken over from an earlier process of this identity
		// loses that one's claims at once.
		next.Annotations[ClaimsAnnotation] = claims
		if next.Spec.HolderIdentity == nil || *next.Spec.HolderIdentity != me {
			next.Spec.AcquireTime = &now
		}
		next.Spec.HolderIdentity = &me
		next.Spec.LeaseDurationSeconds = &dur
		next.Spec.RenewTime = &now
		out, err = m.leases.Update(ctx, next, metav1.UpdateOptions{})
	}
	if err != nil {
		if apierrors.IsConflict(err) || apierrors.IsNotFound(err) {
			m.mu.Lock()
			m.lease = nil // read it again next time
			m.mu.Unlock()
		}
		return err
	}
	m.mu.Lock()
	m.lease, m.renewedAt, m.held = out, start, true
	m.mu.Unlock()
	return nil
}

// stop ends the right to write, and the writes of the Lease; it returns
// a channel closed once no fenced write is under way.
func (m *Member) stop() <-chan struct{} {
	m.writing.Lock()
	m.closed = true
	m.writing.Unlock()
	m.mu.Lock()
	defer m.mu.Unlock()
	m.held = false
	m.drained = make(chan struct{})
	if m.inFlight == 0 {
		close(m.drained)
	}
	return m.drained
}

// release waits up to RenewDeadline for fenced writes under way, then
// deletes the Lease.
func (m *Member) release() {
	drained := m.stop()
	t := m.clock.NewTimer(m.opts.RenewDeadline)
	select {
	case <-drained:
	case <-t.C():
		m.log.Warn("fenced writes still under way; deleting the shard lease anyway")
	}
	t.Stop()
	m.mu.Lock()
	l := m.lease
	m.mu.Unlock()
	if l == nil {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), m.opts.RenewDeadline)
	defer cancel()
	uid := l.UID
	err := m.leases.Delete(ctx, l.Name, metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &uid}})
	if err != nil && !apierrors.IsNotFound(err) {
		m.log.Warn("could not delete the shard lease", "err", err)
		return
	}
	m.log.Info("left the ring")
}

// Enter lets a shard's writes through, as a rest.Fence: while the Lease
// is held, a write may take until RenewDeadline after the last successful
// renewal; otherwise it is refused with ErrShardLost.
func (m *Member) Enter() (time.Duration, func(), error) {
	m.mu.Lock()
	defer m.mu.Unlock()
	remaining := m.renewedAt.Add(m.opts.RenewDeadline).Sub(m.clock.Now())
	if !m.held || remaining <= 0 {
		return 0, nil, ErrShardLost
	}
	m.inFlight++
	var once sync.Once
	return remaining, func() {
		once.Do(func() {
			m.mu.Lock()
			m.inFlight--
			if m.inFlight == 0 && !m.held && m.drained != nil {
				close(m.drained)
			}
			m.mu.Unlock()
		})
	}, nil
}

// wait sleeps d on the member's clock; false if ctx ended first.
func (m *Member) wait(ctx context.Context, d time.Duration) bool {
	t := m.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C():
		return true
	}
}
