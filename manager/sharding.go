package manager

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
	"github.com/loom-k8s/loom/webhook"
)

// Sharding configures a sharded manager (see package shard): every
// replica runs the controllers of the sharded kinds on its own share of
// their objects, instead of one leader running them on all. The zero value
// means no sharding.
type Sharding struct {
	// Ring names the ring of replicas and turns sharding on. Objects of
	// the sharded kinds carry the label "bucket.shard.loom.dev/<Ring>"
	// holding their bucket (shard.BucketLabel).
	Ring string
	// Namespace holds the replicas' shard Leases. Default: the namespace
	// of LeaderElection. One of the two is required.
	Namespace string
	// Kinds are the sharded kinds: the kinds of the sharded controllers,
	// and the kinds of the objects those controllers own (through a
	// controller owner reference), which share their owner's bucket and so
	// its shard. Informers of these kinds hold the objects of the buckets
	// this replica claims; informers of other kinds hold everything. A
	// controller of one of these kinds runs on every replica, and
	// reconciles the objects of the buckets its replica holds.
	Kinds []schema.GroupKind
	// Identity names this replica's shard. Default: LeaderElection's
	// Identity, or else the host name and a random suffix.
	Identity string
	// LeaseDuration, RenewDeadline and RetryPeriod are those of the shard
	// Lease, as in shard.MemberOptions (defaults 15 s, 10 s, 2 s). A
	// replica that cannot renew within RenewDeadline stops: Start returns
	// shard.ErrShardLost.
	LeaseDuration, RenewDeadline, RetryPeriod time.Duration
	// SyncPeriod is the time between the leader's passes over the sharded
	// objects (shard.AssignerOptions.SyncPeriod). Default 1 min.
	SyncPeriod time.Duration
}

// defaults fills in a sharded manager's options from leader election's,
// and turns leader election on (the leader runs the assigner).
func (s *Sharding) defaults(le *LeaderElection) error {
	if s.Ring == "" {
		return nil
	}
	s.Namespace = cmp.Or(s.Namespace, le.Namespace)
	if s.Namespace == "" {
		return fmt.Errorf("manager: %w: Sharding.Namespace (or LeaderElection.Namespace) is required", shard.ErrInvalid)
	}
	s.Identity = cmp.Or(s.Identity, le.Identity, shard.DefaultIdentity())
	if !le.Enabled {
		le.Enabled = true
		le.Namespace = cmp.Or(le.Namespace, s.Namespace)
		le.Name = cmp.Or(le.Name, s.Ring+"-leader")
	}
	le.Identity = cmp.Or(le.Identity, s.Identity)
	return nil
}

// sharded holds a sharded manager's parts: the ring's Leases, this
// replica's Lease, and its shard, which lists again or narrows the
// sharded kinds' informers of factory (set once the factory is made, with
// the shard's selector in its options).
type sharded struct {
	members *shard.Members
	member  *shard.Member
	shard   *shard.Shard
	factory *cache.Factory
}

func newSharded(rc *rest.Client, s Sharding, m *metrics, log *slog.Logger) (*sharded, error) {
	leases, err := client.For[coordinationv1.Lease](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	sh := &sharded{}
	if sh.members, err = shard.NewMembers(leases, shard.MembersOptions{Ring: s.Ring, Namespace: s.Namespace, Logger: log}); err != nil {
		return nil, err
	}
	sh.member, err = shard.NewMember(leases, shard.MemberOptions{
		Ring: s.Ring, Namespace: s.Namespace, Identity: s.Identity,
		LeaseDuration: s.LeaseDuration, RenewDeadline: s.RenewDeadline, RetryPeriod: s.RetryPeriod, Logger: log,
	})
	if err != nil {
		return nil, err
	}
	sh.shard, err = shard.New(shard.ShardOptions{
		Ring: s.Ring, Identity: s.Identity, Kinds: s.Kinds, Members: sh.members, Member: sh.member, Metrics: m, Logger: log,
		Relist: func(ctx context.Context) error { return sh.factory.Relist(ctx, s.Kinds...) },
		Narrow: func(ctx context.Context, keep func(metav1.Object) bool) error {
			return sh.factory.Narrow(ctx, func(o client.Object) bool { return keep(o) }, s.Kinds...)
		},
	})
	return sh, err
}

// selector is the label selector of the informers of kind gk: the
// buckets this replica claims, for a sharded kind.
func (sh *sharded) selector(gk schema.GroupKind) string {
	if sh.shard.Sharded(gk) {
		return sh.shard.Selector()
	}
	return ""
}

// ShardWebhook serves the sharding assignment webhook (see shard.Admission)
// on srv, the manager's webhook server (see Webhooks), and returns its
// path. A MutatingWebhookConfiguration with the webhook of
// shard.MutatingWebhook, pointed at that path, then labels new objects of
// the sharded kinds as they are created; without it, the leader labels
// them a moment later. It fails when sharding is off.
func (m *Manager) ShardWebhook(srv *webhook.Server) (string, error) {
	if m.sharded == nil {
		return "", errors.New("manager: ShardWebhook: sharding is off (Options.Sharding)")
	}
	path := "/shard-" + m.opts.Sharding.Ring
	srv.Register(path, webhook.Admission(shard.Admission(shard.AdmissionOptions{
		Ring: m.opts.Sharding.Ring, Kinds: m.opts.Sharding.Kinds, Metrics: m.metrics,
	})))
	return path, nil
}

// Shard returns this replica's shard, or nil without sharding.
func (m *Manager) Shard() *shard.Shard {
	if m.sharded == nil {
		return nil
	}
	return m.sharded.shard
}

// partition is the controllers' Partition: the shard, or nil (not a nil
// *shard.Shard in an interface).
func (m *Manager) partition() controller.Partition {
	if m.sharded == nil {
		return nil
	}
	return m.sharded.shard
}

// startSharding starts the parts of a sharded manager: the watch of the
// ring's Leases and the hand-over of buckets. It returns this replica's
// shard Lease (to run until everything else has stopped) and the
// assigner (a leader runnable).
func (m *Manager) startSharding(ctx context.Context, wg *sync.WaitGroup) (*shard.Member, *shard.Assigner, error) {
	s, sh := m.opts.Sharding, m.sharded
	assigner, err := shard.NewAssigner(m.rc, shard.AssignerOptions{
		Ring: s.Ring, Members: sh.members, Kinds: s.Kinds, Mapper: m.mapper, Namespace: m.opts.Namespace,
		SyncPeriod: s.SyncPeriod, Metrics: m.metrics, Logger: m.log,
	})
	if err != nil {
		return nil, nil, fmt.Errorf("manager: %w", err)
	}
	wg.Go(func() { _ = sh.members.Start(ctx) })
	wg.Go(func() { _ = sh.shard.Start(ctx) })
	return sh.member, assigner, nil
}

// keepBucket returns the hook by which a sharded manager's cached clients
// give each object of a sharded kind they create or update its bucket
// label (shard.SetBucket). An object created is then in its shard's cache
// (an owned one in its owner's) from its first watch event, without the
// webhook or the leader labelling it; an update that replaced the labels
// keeps it there. resource tells the client's kind.
func (m *Manager) keepBucket(resource func(context.Context) (client.Resource, error)) func(context.Context, client.Object) error {
	return func(ctx context.Context, obj client.Object) error {
		res, err := resource(ctx)
		if err != nil {
			return err
		}
		if gk := res.Kind.GroupKind(); slices.Contains(m.opts.Sharding.Kinds, gk) {
			shard.SetBucket(m.opts.Sharding.Ring, gk, obj)
		}
		return nil
	}
}
