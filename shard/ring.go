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

// Ring assigns keys to members by consistent hashing: each member has
// VirtualNodes points on a circle of 64-bit hashes, and a key belongs to
// the member of the first point at or after the key's hash. The hash is
// fixed (FNV-1a, then a 64-bit finalizer), so every process computes the
// same assignment from the same members, whatever their order.
//
// Adding a member to N takes about 1/(N+1) of the keys, all from the
// others; removing one moves only its own keys. A Ring is immutable and
// safe for concurrent use; make a new one when the members change.
type Ring struct {
	members []string
	points  []point // sorted by hash
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
func (r *Ring) Shard(key string) (string, bool) {
	if len(r.points) == 0 {
		return "", false
	}
	h := hashString(key)
	i := sort.Search(len(r.points), func(i int) bool { return r.points[i].hash >= h })
	if i == len(r.points) {
		i = 0 // past the last point: the circle wraps
	}
	return r.members[r.points[i].member], true
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
