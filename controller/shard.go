package controller

import (
	"context"

	"github.com/loom-k8s/loom/shard"
)

// watchBuckets queues, each time the controller's shard takes buckets,
// the cached objects of those buckets: a reconcile of them was refused
// until then (see shard.Shard.Begin), and the shard that held them before
// may not have seen their last change. changes is the shard's (see
// shard.Shard.Changes).
func (c *Controller[T]) watchBuckets(ctx context.Context, changes <-chan struct{}) {
	gk := c.kind.GroupKind()
	var had [shard.Buckets]uint64
	for {
		select {
		case <-ctx.Done():
			return
		case <-changes:
		}
		held := c.shard.Held()
		for _, obj := range c.primary.Indexer().List() {
			if b := shard.Bucket(shard.Key(gk, obj)); held[b] != 0 && held[b] != had[b] {
				c.queue.Add(Request{Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
		}
		had = held
	}
}
