package controller

import (
	"context"
	"errors"
	"sync"
	"time"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
)

// ownerUIDIndex files a sharded controller's owned objects under the UID
// of their controller owner, so that it can take them along when it
// releases the owner.
const ownerUIDIndex = "loom.dev/controller-uid"

// ownedSource is an owned source that a sharded controller can look into:
// *cache.Informer and *cache.CachedClient.
type ownedSource interface {
	AddObjectIndexer(name string, fn cache.IndexFunc[client.Object]) error
	ObjectsByIndex(name, value string) ([]client.Object, error)
	Resource(ctx context.Context) (client.Resource, error)
}

// indexOwned indexes src's objects by their controller owner's UID, when
// the controller is sharded and src can be indexed, so that release finds
// them.
func (c *Controller[T]) indexOwned(src Source) error {
	o, ok := src.(ownedSource)
	if c.shard == nil || !ok {
		return nil
	}
	err := o.AddObjectIndexer(ownerUIDIndex, func(obj client.Object) ([]string, error) {
		if ref := GetControllerOf(obj); ref != nil {
			return []string{string(ref.UID)}, nil
		}
		return nil, nil
	})
	if err != nil && !errors.Is(err, cache.ErrIndexExists) { // another sharded controller owns from src too
		return err
	}
	c.mu.Lock()
	c.owned = append(c.owned, o)
	c.mu.Unlock()
	return nil
}

// coverWait is how long a reconcile waits for the shard's informers of the
// kinds selected by bucket to hold its object's bucket (see
// shard.Shard.Covers) before it looks again.
const coverWait = 100 * time.Millisecond

// maxReleases is the most releases a controller has in flight at once.
const maxReleases = 32

// leaving reports whether obj, a cached object of a sharded controller,
// must be released instead of reconciled: it was released already and
// has not changed since (the cache has not yet seen it go), the leader
// asked for it (the drain label), or the ring gives it to another live
// shard.
func (c *Controller[T]) leaving(req Request, obj T) (release bool, skip bool) {
	if rv, ok := c.released.Load(req); ok && rv == obj.GetResourceVersion() {
		return false, true
	}
	if c.shard.Draining(obj) {
		return true, false
	}
	_, elsewhere := c.shard.Next(c.kind.GroupKind(), obj)
	return elsewhere, false
}

// releaseLater starts the release of obj, the cached object of req, which
// is leaving this shard, and returns. The worker holding req, which calls
// it, is the proof that no reconcile of req is in flight; none starts
// later either: until obj leaves the cache, or changes, it is marked as
// released (see leaving). So the release need not hold a worker: a drain
// of many objects goes as fast as the API server takes the writes, not at
// one write per worker. A failed release puts req back on the queue.
func (c *Controller[T]) releaseLater(ctx context.Context, req Request, obj T) {
	c.released.Store(req, obj.GetResourceVersion())
	select {
	case c.releaseSlots <- struct{}{}:
	case <-ctx.Done():
		c.released.Delete(req)
		return
	}
	c.releases.Go(func() {
		defer func() { <-c.releaseSlots }()
		if err := c.release(ctx, obj); err != nil && ctx.Err() == nil {
			c.released.Delete(req)
			c.log.Error("could not release an object to its new shard; retrying", "key", req.String(), "err", err)
			c.queue.AddRateLimited(req)
			return
		}
		c.queue.Forget(req)
	})
}

// watchRing queues, after each change of the ring, the cached objects that
// the ring now gives to another shard, so that they are released: a shard
// that sees a new one join hands over its objects itself, one write
// each, without waiting for the leader's drain label.
func (c *Controller[T]) watchRing(ctx context.Context) {
	changes := c.shard.Changes()
	if changes == nil {
		return
	}
	gk := c.kind.GroupKind()
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		for _, obj := range c.primary.Indexer().List() {
			if _, elsewhere := c.shard.Next(gk, obj); elsewhere {
				c.queue.Add(Request{Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
		}
	}
}

// release gives up obj, which is leaving for another shard. The objects it
// owns that this shard holds go first, to the same shard, so that they
// are in that shard's cache by the time it reconciles obj; then obj.
func (c *Controller[T]) release(ctx context.Context, obj T) error {
	res, err := c.primary.Resource(ctx)
	if err != nil {
		return err
	}
	if to, ok := c.shard.Next(res.Kind.GroupKind(), obj); ok {
		c.mu.Lock()
		owned := c.owned
		c.mu.Unlock()
		var wg sync.WaitGroup
		var mu sync.Mutex
		var errs []error
		for _, src := range owned {
			ores, err := src.Resource(ctx)
			if gk := ores.Kind.GroupKind(); err != nil || !c.shard.Sharded(gk) || c.shard.ByBucket(gk) {
				continue // not sharded, or selected by bucket: it stays where it is
			}
			objs, err := src.ObjectsByIndex(ownerUIDIndex, string(obj.GetUID()))
			if err != nil {
				return err
			}
			for _, o := range objs {
				wg.Go(func() {
					if err := c.shard.Follow(ctx, ores, o, to); err != nil {
						mu.Lock()
						errs = append(errs, err)
						mu.Unlock()
					}
				})
			}
		}
		wg.Wait()
		if err := errors.Join(errs...); err != nil {
			return err // retried; what moved stays moved
		}
	}
	return c.shard.Release(ctx, res, obj)
}
