package shard

import (
	"hash/fnv"
	"slices"
	"sort"
	"strconv"
)

// RingOptions configure a [Ring]. The zero value is valid.
type RingOptions struct {
	// VirtualNodes is the number of points each member has on the ring.
	// More points spread the objects more evenly and make the ring larger.
	// Default 256.
	VirtualNodes int
}

// Buckets is the number of hash buckets: a key's bucket is the top ten
// bits of its hash (see [Bucket]), fixed for good, and a ring assigns
// whole buckets. An object's bucket can thus be written into it once,
// and a shard can select the objects of its buckets by label, however
// often the ring changes.
const Buckets = 1024

// bucketShift turns a 64-bit hash into its bucket.
const bucketShift = 64 - 10

// Bucket returns the bucket of key: a number in [0, Buckets).
func Bucket(key string) int { return int(hashString(key) >> bucketShift) }

// Ring assigns keys to members by consistent hashing: each member has
// VirtualNodes points on a circle of 64-bit hashes. The circle is cut
// into Buckets equal arcs, and each bucket belongs to the member of the
// first point at or after the bucket's middle; a key belongs to its
// bucket's member. The hash is fixed (FNV-1a, then a 64-bit finalizer),
// so every process computes the same assignment from the same members,
// whatever their order.
//
// Adding a member to N takes about 1/(N+1) of the buckets, all from the
// others; removing one moves only its own. A Ring is immutable and safe
// for concurrent use; make a new one when the members change.
type Ring struct {
	members []string
	points  []point // sorted by hash
	owners  []int32 // by bucket: index into members; nil without members
}

type point struct {
	hash   uint64
	member int32 // index into members
}

// NewRing returns the ring of the given members (shard names, such as the
// identities of the replicas). Duplicates and empty names are ignored.
func NewRing(members []string, opts RingOptions) *Ring {
	vn := opts.VirtualNodes
	if vn <= 0 {
		vn = 256
	}
	ms := slices.Clone(members)
	slices.Sort(ms)
	ms = slices.Compact(ms)
	ms = slices.DeleteFunc(ms, func(m string) bool { return m == "" })
	r := &Ring{members: ms, points: make([]point, 0, len(ms)*vn)}
	for i, m := range ms {
		for v := range vn {
			r.points = append(r.points, point{hash: hashString(m + "#" + strconv.Itoa(v)), member: int32(i)})
		}
	}
	// Ties (two points of one hash) go to the smaller member name, so
	// the order is total and the same in every process.
	sort.Slice(r.points, func(i, j int) bool {
		a, b := r.points[i], r.points[j]
		return a.hash < b.hash || a.hash == b.hash && a.member < b.member
	})
	if len(r.points) == 0 {
		return r
	}
	r.owners = make([]int32, Buckets)
	i := 0
	for b := range r.owners {
		mid := uint64(b)<<bucketShift | 1<<(bucketShift-1)
		for i < len(r.points) && r.points[i].hash < mid {
			i++
		}
		if i == len(r.points) {
			r.owners[b] = r.points[0].member // past the last point: the circle wraps
		} else {
			r.owners[b] = r.points[i].member
		}
	}
	return r
}

// Members returns the ring's members, sorted.
func (r *Ring) Members() []string { return slices.Clone(r.members) }

// Has reports whether member is one of the ring's members.
func (r *Ring) Has(member string) bool {
	_, ok := slices.BinarySearch(r.members, member)
	return ok
}

// Shard returns the member that key belongs to, and false if the ring has
// no members.
func (r *Ring) Shard(key string) (string, bool) { return r.Owner(Bucket(key)) }

// Owner returns the member that bucket b belongs to, and false if the ring
// has no members or b is not a bucket.
func (r *Ring) Owner(b int) (string, bool) {
	if r.owners == nil || b < 0 || b >= Buckets {
		return "", false
	}
	return r.members[r.owners[b]], true
}

// Buckets returns, in order, the buckets that member owns.
func (r *Ring) Buckets(member string) []int {
	m, ok := slices.BinarySearch(r.members, member)
	if !ok {
		return nil
	}
	var bs []int
	for b, o := range r.owners {
		if int(o) == m {
			bs = append(bs, b)
		}
	}
	return bs
}

// hashString is FNV-1a 64 followed by a finalizer (from SplitMix64) that
// spreads the nearby hashes FNV gives similar strings.
func hashString(s string) uint64 {
	h := fnv.New64a()
	_, _ = h.Write([]byte(s))
	x := h.Sum64()
	x ^= x >> 30
	x *= 0xbf58476d1ce4e5b9
	x ^= x >> 27
	x *= 0x94d049bb133111eb
	x ^= x >> 31
	return x
}
