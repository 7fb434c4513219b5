// Package shard holds the parts of sharded controllers: replicas of one
// manager that each cache and reconcile a share of the objects, instead of
// one elected replica doing all the work. Most programs turn it on through
// manager.Options.Sharding and never use this package directly; see
// docs/sharding.md for the design.
//
// The parts:
//
//   - [Ring] maps an object's key, through its fixed hash [Bucket], to one
//     of the live shards by consistent hashing with virtual nodes, so that
//     every replica computes the same assignment from the same membership,
//     and a membership change moves few objects. [Key] makes the key of an
//     object: the object's own, or its controller owner's, so owned objects
//     land on their owner's shard.
//   - [Member] holds one replica's shard Lease, labelled with the ring
//     ([RingLabel]), renews it, and deletes it when the replica stops. It
//     is a rest.Fence for the replica's writes.
//   - [Members] watches the ring's Leases and keeps the ring of the live
//     shards, by this process's clock.
//   - [Assigner], on the leader, gives every object of the sharded kinds
//     the label [Label] naming its shard, moves objects off a shard that
//     is gone, and asks live shards with the [DrainLabel] for the objects
//     they did not release by themselves after a ring change.
//   - [Shard] is one replica's side: the selector of its objects, the
//     ring's changes, and [Shard.Release] and [Shard.Follow], which a
//     sharded controller calls instead of reconciling an object that the
//     ring moved off its shard (or that is draining). Owned kinds that no
//     sharded controller reconciles are selected by bucket instead
//     ([Shard.ByBucket], [BucketLabel]): their objects keep their owner's
//     bucket for good, and each shard lists the buckets the ring gives it
//     again when the ring changes ([Shard.Want], [Shard.Covers]).
package shard
