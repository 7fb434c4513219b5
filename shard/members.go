package shard

import (
	"context"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
)

// MembersOptions configure [NewMembers]. Ring and Namespace are required.
type MembersOptions struct {
	// Ring names the ring; Namespace holds its Leases.
	Ring, Namespace string
	// Ring configures the ring built from the live shards.
	RingOptions RingOptions
	// Logger receives a line per change of the ring. Nil means discard.
	Logger *slog.Logger

	clock clock.Clock // tests only
}

// Members watches the shard Leases of a ring and keeps the ring of the
// live shards. A shard is live while its Lease names a holder and has
// been renewed, as seen by this process's clock, within the Lease's
// duration; a deleted Lease (a shard that left) drops out at once.
// Clocks of different machines are never compared.
type Members struct {
	leases *client.Client[*coordinationv1.Lease] // in the namespace
	inf    *cache.Informer[*coordinationv1.Lease]
	opts   MembersOptions
	log    *slog.Logger
	clock  clock.Clock

	mu   sync.Mutex
	seen map[string]observed // by Lease name
	ring *Ring
	subs []chan struct{}
}

type observed struct {
	holder   string
	renew    time.Time     // the Lease's renewTime, to notice a renewal
	seenAt   time.Time     // our clock when the renewal was first seen
	duration time.Duration // the Lease's duration
}

// NewMembers returns a Members for the ring's Leases, read through leases.
func NewMembers(leases *client.Client[*coordinationv1.Lease], opts MembersOptions) (*Members, error) {
	if opts.Namespace == "" {
		return nil, fmt.Errorf("%w: MembersOptions.Namespace is required", ErrInvalid)
	}
	if err := validate(opts.Ring, ""); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	inf := cache.NewInformer(cache.ListWatch(leases, cache.ListWatchOptions{
		Namespace: opts.Namespace, LabelSelector: RingLabel + "=" + opts.Ring,
	}), cache.InformerOptions[*coordinationv1.Lease]{Name: "shard leases " + opts.Ring, Logger: log})
	m := &Members{
		leases: leases.Namespace(opts.Namespace), inf: inf, opts: opts, log: log.With("ring", opts.Ring), clock: clock.OrReal(opts.clock),
		seen: map[string]observed{}, ring: NewRing(nil, opts.RingOptions),
	}
	h := cache.HandlerFuncs[*coordinationv1.Lease]{
		Add:    func(l *coordinationv1.Lease, _ bool) { m.observe(l) },
		Update: func(_, l *coordinationv1.Lease) { m.observe(l) },
		Delete: func(l *coordinationv1.Lease, _ bool) {
			m.mu.Lock()
			delete(m.seen, l.Name)
			m.mu.Unlock()
			m.update()
		},
	}
	if _, err := inf.AddHandler(h, cache.HandlerOptions{Inline: true}); err != nil {
		return nil, err
	}
	return m, nil
}

// observe records a Lease as seen now.
func (m *Members) observe(l *coordinationv1.Lease) {
	var o observed
	if l.Spec.HolderIdentity != nil {
		o.holder = *l.Spec.HolderIdentity
	}
	if l.Spec.RenewTime != nil {
		o.renew = l.Spec.RenewTime.Time
	}
	o.duration = 15 * time.Second
	if l.Spec.LeaseDurationSeconds != nil {
		o.duration = time.Duration(*l.Spec.LeaseDurationSeconds) * time.Second
	}
	m.mu.Lock()
	prev, ok := m.seen[l.Name]
	if ok && prev.holder == o.holder && prev.renew.Equal(o.renew) {
		o.seenAt = prev.seenAt
	} else {
		o.seenAt = m.clock.Now()
	}
	m.seen[l.Name] = o
	m.mu.Unlock()
	m.update()
}

// update rebuilds the ring if the live shards changed, and tells the
// subscribers.
func (m *Members) update() {
	m.mu.Lock()
	defer m.mu.Unlock()
	now := m.clock.Now()
	var live []string
	for _, o := range m.seen {
		if o.holder != "" && now.Before(o.seenAt.Add(o.duration)) {
			live = append(live, o.holder)
		}
	}
	slices.Sort(live)
	live = slices.Compact(live)
	if slices.Equal(live, m.ring.Members()) {
		return
	}
	m.ring = NewRing(live, m.opts.RingOptions)
	m.log.Info("ring changed", "shards", live)
	for _, ch := range m.subs {
		select {
		case ch <- struct{}{}:
		default:
		}
	}
}

// claimed reads the ring's Leases from the API server (not from the
// watch, which may lag) and returns, by bucket, whether a live shard
// other than me claims it (see ClaimsAnnotation). A Lease counts as live
// unless it names no holder, or this process has seen it keep the same
// renewal for its whole duration: a Lease it has not seen yet, or has seen
// renewed since, is live. A claim that cannot be read claims everything.
func (m *Members) claimed(ctx context.Context, me string) ([Buckets]bool, error) {
	var out [Buckets]bool
	list, err := m.leases.List(ctx, metav1.ListOptions{LabelSelector: RingLabel + "=" + m.opts.Ring})
	if err != nil {
		return out, fmt.Errorf("shard: list the ring's leases: %w", err)
	}
	now := m.clock.Now()
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, l := range list.Items {
		holder := ""
		if l.Spec.HolderIdentity != nil {
			holder = *l.Spec.HolderIdentity
		}
		if holder == "" || holder == me {
			continue
		}
		if o, ok := m.seen[l.Name]; ok && o.holder == holder && l.Spec.RenewTime != nil &&
			o.renew.Equal(l.Spec.RenewTime.Time) && !now.Before(o.seenAt.Add(o.duration)) {
			continue // dead: its renewal has not changed for its duration
		}
		claims, err := DecodeClaims(l.Annotations[ClaimsAnnotation])
		if err != nil {
			m.log.Warn("a shard's claims cannot be read; counting them all claimed", "lease", l.Name, "err", err)
			for b := range out {
				out[b] = true
			}
			continue
		}
		for b, c := range claims {
			out[b] = out[b] || c
		}
	}
	return out, nil
}

// Ring returns the ring of the shards live now. It is empty until the
// Leases have been listed (see HasSynced).
func (m *Members) Ring() *Ring {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.ring
}

// Live reports whether shard is live now.
func (m *Members) Live(shard string) bool {
	return slices.Contains(m.Ring().Members(), shard)
}

// HasSynced reports whether the Leases have been listed once.
func (m *Members) HasSynced() bool { return m.inf.HasSynced() }

// Changes returns a channel that receives a value after the ring changes
// (one value for any number of changes not yet received).
func (m *Members) Changes() <-chan struct{} {
	ch := make(chan struct{}, 1)
	m.mu.Lock()
	m.subs = append(m.subs, ch)
	m.mu.Unlock()
	return ch
}

// Start watches the Leases until ctx ends, and checks for Leases that
// expired at the moment the next one would, and at least every second; it
// returns what the informer's Start returns (nil when ctx ended).
func (m *Members) Start(ctx context.Context) error {
	done := make(chan error, 1)
	go func() { done <- m.inf.Start(ctx) }()
	for {
		t := m.clock.NewTimer(m.nextCheck())
		select {
		case err := <-done:
			t.Stop()
			return err
		case <-t.C():
			m.update()
		}
	}
}

// nextCheck is the time until the next live Lease would expire by our
// clock, and at most a second.
func (m *Members) nextCheck() time.Duration {
	m.mu.Lock()
	defer m.mu.Unlock()
	now, next := m.clock.Now(), time.Second
	for _, o := range m.seen {
		if left := o.seenAt.Add(o.duration).Sub(now); o.holder != "" && left > 0 && left < next {
			next = left
		}
	}
	return next
}
