package shard

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// ShardOptions configure [New]. Ring and Identity are required; Members
// and Member are required by Start.
type ShardOptions struct {
	// Ring names the ring; Identity names this shard in it.
	Ring, Identity string
	// Kinds are the sharded kinds (see AssignerOptions.Kinds).
	Kinds []schema.GroupKind
	// Members is the ring's membership, started by the caller.
	Members *Members
	// Member holds this shard's Lease, started by the caller: Start
	// publishes in it the buckets this shard claims.
	Member *Member
	// Relist lists this shard's informers of the sharded kinds again, and
	// returns once they hold what their selector (Selector) selects now.
	// Start calls it after each change of the buckets this shard claims,
	// and cancels its context when the ring changes so that the list is
	// out of date (see Start): it should then return soon, with any
	// error. Nil means nothing to list.
	Relist func(context.Context) error
	// Narrow makes this shard's informers of the sharded kinds let go of
	// the cached objects that keep rejects, and watch on with their new
	// selector (Selector) without listing again, returning once they
	// have. Start calls it instead of Relist when the buckets this shard
	// claims only shrank, as when a replica joins the ring: so the API
	// server sends each shard's objects again only to the shard that
	// takes them. keep sees the cached objects, and keeps those without
	// a bucket label (which a Transform may have taken off). Nil means
	// Relist is called then too.
	Narrow func(ctx context.Context, keep func(metav1.Object) bool) error
	// Metrics observes hand-overs. Nil means none.
	Metrics Metrics
	// Logger receives a line per hand-over. Nil means discard.
	Logger *slog.Logger
}

// Shard is one replica's side of a ring: the buckets it holds, which its
// controllers may reconcile, and the hand-over of buckets between shards
// when the ring changes. Every object of a sharded kind carries its bucket
// in BucketLabel (see [Key] and [Bucket]), so no object is written when a
// bucket changes hands.
//
// A shard claims, in its Lease, the buckets it holds and those the ring
// gives it; its informers select the objects of those buckets (Selector).
// It takes a claimed bucket once its informers hold the bucket's objects
// and a read of the ring's Leases made after its claim was written shows
// no other live shard claiming it. It gives a bucket up once no reconcile
// of it is in flight, and then writes its claims without it. So no two
// shards hold a bucket at once: of two that claim it, each would have had
// to read the Leases before the other's claim was written, and after its
// own. A shard that stops renewing its Lease stops writing before the
// others count it dead (see MemberOptions.RenewDeadline).
type Shard struct {
	opts ShardOptions
	log  *slog.Logger

	mu           sync.Mutex
	draining     time.Time       // when the buckets being given up began to be
	wants        [Buckets]bool   // the buckets the ring gives this shard
	selecting    []int           // the buckets the informers select
	listed       []int           // Start's own: the buckets the informers hold
	unlisted     bool            // Start's own: a list was stopped, listed is not known
	stoppedLists int             // Start's own: lists stopped in a row by a ring change
	published    []int           // Start's own: the claims last written in the Lease
	held         [Buckets]uint64 // 0, or the number of the take by which it is held
	takes        uint64          // the takes so far
	releasing    [Buckets]bool
	inFlight     [Buckets]int
	subs         []chan struct{}

	looks       atomic.Int64 // reads of the others' claims, for tests
	listChanges atomic.Int64 // ring changes seen during lists, for tests
	narrows     atomic.Int64 // calls of Narrow, for tests
}

// New returns the shard opts describes.
func New(opts ShardOptions) (*Shard, error) {
	if opts.Identity == "" {
		return nil, fmt.Errorf("%w: ShardOptions.Identity is required", ErrInvalid)
	}
	if err := validate(opts.Ring, opts.Identity); err != nil {
		return nil, err
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	return &Shard{opts: opts, log: log.With("ring", opts.Ring, "shard", opts.Identity)}, nil
}

// Ring returns the ring's name.
func (s *Shard) Ring() string { return s.opts.Ring }

// Identity returns this shard's identity.
func (s *Shard) Identity() string { return s.opts.Identity }

// Sharded reports whether objects of kind gk are sharded.
func (s *Shard) Sharded(gk schema.GroupKind) bool { return slices.Contains(s.opts.Kinds, gk) }

// Selector returns the label selector of this shard's objects of the
// sharded kinds: those of the buckets it claims (none before Start has
// seen it on the ring).
func (s *Shard) Selector() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return bucketSelector(BucketLabel(s.opts.Ring), s.selecting)
}

// bucketSelector selects the objects whose label l holds one of the
// buckets bs (sorted), in the shorter of the two ways to say it.
func bucketSelector(l string, bs []int) string {
	switch {
	case len(bs) == 0:
		return l + "=none"
	case len(bs) == Buckets:
		return l
	}
	list := func(bs []int) string {
		var b strings.Builder
		for n, x := range bs {
			if n > 0 {
				b.WriteByte(',')
			}
			b.WriteString(strconv.Itoa(x))
		}
		return b.String()
	}
	if len(bs) <= Buckets/2 {
		return l + " in (" + list(bs) + ")"
	}
	others := make([]int, 0, Buckets-len(bs))
	for b, i := 0, 0; b < Buckets; b++ {
		if i < len(bs) && bs[i] == b {
			i++
			continue
		}
		others = append(others, b)
	}
	return l + "," + l + " notin (" + list(others) + ")"
}

// Begin asks to reconcile obj, an object of kind gk: it reports false when
// this shard does not hold obj's bucket, or is giving it up. Otherwise the
// reconcile may go ahead, and must call end when it is over: until then
// the bucket is not given up.
func (s *Shard) Begin(gk schema.GroupKind, obj metav1.Object) (end func(), ok bool) {
	b := Bucket(Key(gk, obj))
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.held[b] == 0 || s.releasing[b] {
		return nil, false
	}
	s.inFlight[b]++
	var once sync.Once
	return func() {
		once.Do(func() {
			s.mu.Lock()
			defer s.mu.Unlock()
			s.inFlight[b]--
		})
	}, true
}

// Held returns, by bucket, 0 if this shard does not hold it now, or else
// a number that changes each time the shard takes it again.
func (s *Shard) Held() [Buckets]uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.held
}

// Taken returns a channel that receives, each time this shard takes
// buckets, a function reporting whether an object of kind gk is in one of
// them (taken since the previous receive), until ctx ends. It subscribes
// before it returns (see [Shard.Changes]). A sharded controller queues
// the cached objects it reports: their reconciles were refused until then
// (see [Shard.Begin]). It makes *Shard a controller.Partition.
func (s *Shard) Taken(ctx context.Context, gk schema.GroupKind) <-chan func(obj metav1.Object) bool {
	changes := s.Changes()
	out := make(chan func(metav1.Object) bool)
	go func() {
		var had [Buckets]uint64
		for {
			select {
			case <-ctx.Done():
				return
			case <-changes:
			}
			held, prev := s.Held(), had
			took := func(obj metav1.Object) bool {
				b := Bucket(Key(gk, obj))
				return held[b] != 0 && held[b] != prev[b]
			}
			select {
			case <-ctx.Done():
				return
			case out <- took:
			}
			had = held
		}
	}()
	return out
}

// Changes returns a channel that receives a value after this shard takes
// buckets (one value for any number of changes not yet received). A
// sharded controller then queues the cached objects of those buckets,
// which it did not reconcile before.
func (s *Shard) Changes() <-chan struct{} {
	ch := make(chan struct{}, 1)
	s.mu.Lock()
	s.subs = append(s.subs, ch)
	s.mu.Unlock()
	return ch
}

// errNotReady is returned by Start without Members or Member.
var errNotReady = errors.New("shard: Start needs ShardOptions.Members and Member")

// Start follows the ring until ctx ends, then returns nil: after each
// change it gives up the buckets the ring gave away (each once its
// reconciles in flight are over), claims those it gives this shard, lists
// them, and takes each once no other live shard claims it. It looks again
// every 100 ms while a bucket waits for a reconcile or another shard.
//
// A list that the ring makes out of date before it ends (the ring changed
// so that this shard would claim other buckets) is stopped, and the
// buckets the new ring gives are claimed and listed instead: replicas that
// start together see each other join one after another, and would
// otherwise each list first a share of a smaller ring. A list is stopped
// so at most maxStoppedLists (3) times in a row; the next one runs to its
// end, so that a ring that keeps changing cannot keep the informers from
// ever catching up.
func (s *Shard) Start(ctx context.Context) error {
	if s.opts.Members == nil || s.opts.Member == nil {
		return errNotReady
	}
	changes := s.opts.Members.Changes()
	for {
		pending, again, err := s.step(ctx, changes)
		var wait <-chan time.Time
		switch {
		case ctx.Err() != nil:
			return nil
		case err != nil:
			s.log.Error("could not hand buckets over; retrying", "err", err)
			wait = time.After(time.Second)
		case again:
			continue
		case pending:
			wait = time.After(100 * time.Millisecond)
		}
		select {
		case <-ctx.Done():
			return nil
		case <-changes:
		case <-wait:
		}
	}
}

// maxStoppedLists is how many lists in a row a ring change may stop.
const maxStoppedLists = 3

// wanted returns the buckets the ring gives this shard now.
func (s *Shard) wanted() []int {
	if ring := s.opts.Members.Ring(); ring.Has(s.opts.Identity) {
		return ring.Buckets(s.opts.Identity)
	}
	return nil
}

// step makes one round of hand-over; pending reports buckets that wait
// for a reconcile to end or for another shard to give them up, and again
// that the ring changed while it listed (it takes nothing then): the next
// round is due at once.
func (s *Shard) step(ctx context.Context, changes <-chan struct{}) (pending, again bool, err error) {
	want := s.wanted()
	released, busy := s.release(want)
	s.mu.Lock()
	// A bucket is claimed while the ring gives it, and while it is held.
	var claims []int
	for b := range Buckets {
		if s.wants[b] || s.held[b] != 0 {
			claims = append(claims, b)
		}
	}
	publish := !slices.Equal(claims, s.published)
	list := !slices.Equal(claims, s.listed) || s.unlisted
	took := time.Since(s.draining)
	s.mu.Unlock()
	if publish {
		if err := s.opts.Member.Claim(ctx, claims); err != nil {
			return false, false, err
		}
		s.published = claims
		if released > 0 {
			if s.opts.Metrics != nil {
				s.opts.Metrics.ObserveDrain(s.opts.Ring, took)
			}
			s.log.Info("gave buckets up", "buckets", released, "took", took, "waiting", busy)
		}
	}
	if list {
		s.mu.Lock()
		s.selecting = claims
		s.mu.Unlock()
		if s.opts.Narrow != nil && !s.unlisted && subset(claims, s.listed) {
			// Only fewer buckets: the informers hold the objects of
			// these already, and let the others go.
			keep, err := keepBuckets(BucketLabel(s.opts.Ring), claims)
			if err == nil {
				err = s.opts.Narrow(ctx, keep)
			}
			if err != nil {
				// Some informers may have let go already: what they
				// hold is not known, so the next round lists.
				s.unlisted = true
				return false, false, fmt.Errorf("let the given-up buckets go: %w", err)
			}
			s.narrows.Add(1)
		} else if s.opts.Relist != nil {
			done, changed, err := s.relist(ctx, changes, want)
			if err != nil {
				return false, false, fmt.Errorf("list the claimed buckets: %w", err)
			}
			if !done {
				// The informers may hold part of what they began to
				// list, or all of it: list again whatever is claimed.
				s.unlisted = true
				s.log.Info("the ring changed during a list; listing the new claims instead")
				return false, true, nil
			}
			again = changed
		}
		s.listed, s.unlisted = claims, false
	}
	// The claims are written and listed: the buckets the ring gives can
	// be taken.
	pending, err = s.acquire(ctx)
	return pending || busy, again, err
}

// subset reports whether every element of a is in b; both are sorted.
func subset(a, b []int) bool {
	for _, x := range a {
		if _, ok := slices.BinarySearch(b, x); !ok {
			return false
		}
	}
	return true
}

// keepBuckets returns a test of whether a cached object is one that
// bucketSelector(l, bs) selects: that selector itself, so the two agree
// on every label value, even one that is not a bucket. A cached object
// without label l is kept: no bucket selector selects one, so a
// Transform took the label off after the object was selected, and which
// bucket it is in is not known.
func keepBuckets(l string, bs []int) (func(metav1.Object) bool, error) {
	sel, err := labels.Parse(bucketSelector(l, bs))
	if err != nil {
		return nil, err
	}
	return func(obj metav1.Object) bool {
		set := labels.Set(obj.GetLabels())
		return !set.Has(l) || sel.Matches(set)
	}, nil
}

// relist calls Relist, and stops it (done false) if the ring changes
// meanwhile so that it gives this shard other buckets than want, unless
// maxStoppedLists lists in a row were stopped so. changed reports a ring
// change that did not stop it: the caller steps again to see to it.
func (s *Shard) relist(ctx context.Context, changes <-chan struct{}, want []int) (done, changed bool, err error) {
	lctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var stopped, seen atomic.Bool
	mayStop := s.stoppedLists < maxStoppedLists
	watching := make(chan struct{})
	go func() {
		defer close(watching)
		for {
			select {
			case <-lctx.Done():
				return
			case <-changes:
				seen.Store(true)
				s.listChanges.Add(1)
				if mayStop && !slices.Equal(s.wanted(), want) {
					stopped.Store(true)
					cancel()
					return
				}
			}
		}
	}()
	err = s.opts.Relist(lctx)
	cancel()
	<-watching
	if stopped.Load() && ctx.Err() == nil {
		s.stoppedLists++
		return false, true, nil
	}
	s.stoppedLists = 0
	return err == nil, seen.Load(), err
}

// release gives up the held buckets that are not in want and that no
// reconcile is in flight in: it stops new reconciles of all of those, and
// returns how many it gave up and whether any wait for a reconcile.
func (s *Shard) release(want []int) (gone int, busy bool) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.wants = [Buckets]bool{}
	for _, b := range want {
		s.wants[b] = true
	}
	already := slices.Contains(s.releasing[:], true)
	for b := range Buckets {
		if s.wants[b] {
			s.releasing[b] = false // the ring gave it back before it went
			continue
		}
		if s.held[b] == 0 {
			continue
		}
		if !already {
			s.draining, already = time.Now(), true
		}
		s.releasing[b] = true
		if s.inFlight[b] > 0 {
			busy = true
			continue
		}
		s.held[b], s.releasing[b] = 0, false
		gone++
	}
	return gone, busy
}

// acquire takes the buckets that the ring gives this shard and that no
// other live shard claims, as read from the Leases now. step calls it only
// once this shard's claims, which hold those buckets, are written in its
// Lease and listed by its informers.
func (s *Shard) acquire(ctx context.Context) (pending bool, err error) {
	s.mu.Lock()
	var missing []int
	for b := range Buckets {
		if s.wants[b] && s.held[b] == 0 {
			missing = append(missing, b)
		}
	}
	s.mu.Unlock()
	if len(missing) == 0 {
		return false, nil
	}
	others, err := s.opts.Members.claimed(ctx, s.opts.Identity)
	if err != nil {
		return false, err
	}
	s.looks.Add(1)
	s.mu.Lock()
	got := 0
	for _, b := range missing {
		if !others[b] {
			s.takes++
			s.held[b] = s.takes
			got++
		}
	}
	subs := s.subs
	s.mu.Unlock()
	if got > 0 {
		for _, ch := range subs {
			select {
			case ch <- struct{}{}:
			default:
			}
		}
		if s.opts.Metrics != nil {
			for range got {
				s.opts.Metrics.ObserveMove(s.opts.Ring, "handover")
			}
		}
		s.log.Info("took buckets", "buckets", got, "waiting", len(missing)-got)
	}
	return got < len(missing), nil
}
