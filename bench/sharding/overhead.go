package main

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"sync"
	"time"

	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
	"github.com/loom-k8s/loom/testenv"
)

// The leader's extra heap for sharding: what the ring's membership and the
// assigner hold once they have run, over n objects that are all assigned
// to a live shard. By design it should not grow with n: the assigner
// caches only unassigned objects and reads the rest a page at a time.

// passes counts the assigner's finished passes over the sharded kind.
type passes struct {
	mu sync.Mutex
	n  int
}

func (p *passes) ObserveRing(string, int)                       {}
func (p *passes) ObserveMove(string, string)                    {}
func (p *passes) ObserveDrain(string, time.Duration)            {}
func (p *passes) ObserveObjects(string, string, map[string]int) { p.mu.Lock(); p.n++; p.mu.Unlock() }
func (p *passes) count() int                                    { p.mu.Lock(); defer p.mu.Unlock(); return p.n }

// heapNow is the live heap after two GCs.
func heapNow() int64 {
	runtime.GC()
	runtime.GC()
	var ms runtime.MemStats
	runtime.ReadMemStats(&ms)
	return int64(ms.HeapAlloc)
}

// Overhead measures the leader's extra heap with each of counts objects,
// on one control plane, and writes a line per count.
func Overhead(ctx context.Context, counts []int, out func(format string, args ...any)) (map[int]int64, error) {
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		return nil, err
	}
	defer env.Stop()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		return nil, err
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return nil, err
	}
	defer rc.CloseIdleConnections()
	res := map[int]int64{} // the last run of each count
	for i, n := range counts {
		extra, err := overheadOnce(ctx, rc, i, n)
		if err != nil {
			return nil, err
		}
		res[n] = extra
		out("leader's extra heap with %6d objects: %.2f MB\n", n, float64(extra)/1e6)
	}
	return res, nil
}

func overheadOnce(ctx context.Context, rc *rest.Client, run, n int) (int64, error) {
	ns := fmt.Sprintf("overhead-%d-%d", run, n)
	ring := fmt.Sprintf("o%d-%d", run, n)
	nss, _ := client.For[corev1.Namespace](rc, client.Options{})
	if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
		return 0, err
	}
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	leases, _ := client.For[coordinationv1.Lease](rc, client.Options{})
	// One live shard, s1, holds every object: its Lease is renewed here.
	member, err := shard.NewMember(leases, shard.MemberOptions{Ring: ring, Namespace: ns, Identity: "s1"})
	if err != nil {
		return 0, err
	}
	mctx, stopMember := context.WithCancel(ctx)
	defer stopMember()
	go func() { _ = member.Start(mctx) }()
	work := make(chan int)
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for range 8 {
		wg.Go(func() {
			for i := range work {
				_, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
					Name: fmt.Sprintf("cm-%05d", i), Labels: map[string]string{
						shard.BucketLabel(ring): strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, &metav1.ObjectMeta{Namespace: ns, Name: fmt.Sprintf("cm-%05d", i)}))),
						"app":                   "overhead",
					}},
					Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
				if err != nil {
					select {
					case errs <- err:
					default:
					}
				}
			}
		})
	}
	for i := range n {
		work <- i
	}
	close(work)
	wg.Wait()
	select {
	case err := <-errs:
		return 0, err
	default:
	}

	before := heapNow()
	members, err := shard.NewMembers(leases, shard.MembersOptions{Ring: ring, Namespace: ns})
	if err != nil {
		return 0, err
	}
	p := &passes{}
	assigner, err := shard.NewAssigner(rc, shard.AssignerOptions{
		Ring: ring, Members: members, Kinds: []schema.GroupKind{{Kind: "ConfigMap"}},
		Mapper: discovery.MapperFor(rc), Namespace: ns, Metrics: p, SyncPeriod: time.Second,
	})
	if err != nil {
		return 0, err
	}
	actx, stop := context.WithCancel(ctx)
	defer stop()
	go func() { _ = members.Start(actx) }()
	go func() { _ = assigner.Start(actx) }()
	for deadline := time.Now().Add(2 * time.Minute); p.count() < 3; {
		if time.Now().After(deadline) {
			return 0, fmt.Errorf("the assigner made %d passes in 2 minutes", p.count())
		}
		time.Sleep(50 * time.Millisecond)
	}
	// Between passes: take the least of a few readings.
	extra := int64(1 << 62)
	for range 5 {
		extra = min(extra, heapNow()-before)
		time.Sleep(200 * time.Millisecond)
	}
	return extra, nil
}
