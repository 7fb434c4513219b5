// Package shard holds the parts of sharded controllers: replicas of one
// controller that each cache and reconcile a share of the objects, instead
// of one elected replica doing all the work.
//
// Today it holds the assignment: a [Ring] maps an object's key to one of
// the live shards by consistent hashing with virtual nodes, so that every
// replica computes the same assignment from the same membership, and a
// membership change moves few objects. [Key] makes the key of an object:
// the object's own, or its controller owner's, so owned objects land on
// their owner's shard.
//
// Membership (a Lease per replica), labelling new objects, moving objects
// through a drain label and the manager option are not built yet.
package shard
