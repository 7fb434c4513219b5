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
//     the label [BucketLabel] holding its bucket, when the assignment
//     webhook ([Admission]) did not, and corrects wrong ones. Objects are
//     written once, and never when the ring changes.
//   - [Shard] is one replica's side: the buckets it holds, which its
//     controllers may reconcile ([Shard.Begin]), and the hand-over of
//     buckets between shards. A shard claims buckets in its Lease
//     ([ClaimsAnnotation]), selects their objects in its informers
//     ([Shard.Selector]), and takes a bucket only once its informers have
//     listed it and no other live shard claims it; it gives a bucket up
//     once no reconcile of it is in flight. No two shards hold a bucket
//     at once.
package shard
