package cache

import (
	"iter"
	"math/bits"
	"slices"
	"strings"
)

// smallSetMax is the size up to which an idSet always stays a slice, so
// that tiny sets in tiny stores do not flap between forms.
const smallSetMax = 16

// An idSet holds a set of slot ids in one of two forms, chosen by
// density so that each costs at most 4 bytes per member:
//
//   - a sorted slice of ids, for sparse sets: 4 bytes per member;
//     membership by binary search; adding or removing costs a copy of
//     the ids after the position, at most a few microseconds since a
//     sparse set holds under 1 in 32 of the store's objects;
//   - a bitmap over the ids, once a set holds at least 1 in 32 of the
//     store's slots: at most 4 bytes per member and usually far less (a
//     label every object has costs one bit per object), with membership
//     by a bit test. It returns to a slice when it falls below 1 in 64 of
//     the ids it spans.
//
// Dense sets are the ones selectors meet most (tier=frontend,
// environment=prod, a namespace), so the bitmap also makes the most
// frequent membership tests the cheapest. The zero value is an empty
// set. An idSet is not safe for concurrent use.
type idSet struct {
	ids  []uint32 // sorted; the slice form
	bits []uint64 // the bitmap form, when non-nil
	n    int      // members, in the bitmap form
}

// add adds id, which must not be in the set. universe is the number of
// slots of the store, which decides when a set is dense.
func (s *idSet) add(id uint32, universe int) {
	if s.bits != nil {
		w := int(id >> 6)
		if w >= len(s.bits) {
			if s.n+1 < w+1 { // fewer members than words: under 1 in 64
				s.toSlice()
				s.insert(id)
				return
			}
			s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
		}
		s.bits[w] |= 1 << (id & 63)
		s.n++
		return
	}
	s.insert(id)
	if len(s.ids) > smallSetMax && len(s.ids)*32 >= universe {
		s.toBits()
	}
}

// insert adds id to the slice form, keeping it sorted.
func (s *idSet) insert(id uint32) {
	if n := len(s.ids); n == 0 || s.ids[n-1] < id { // the common case: a new slot
		s.ids = append(s.ids, id)
		return
	}
	if i, found := slices.BinarySearch(s.ids, id); !found {
		s.ids = slices.Insert(s.ids, i, id)
	}
}

// remove removes id if present.
func (s *idSet) remove(id uint32) {
	if s.bits != nil {
		w := int(id >> 6)
		if w >= len(s.bits) || s.bits[w]&(1<<(id&63)) == 0 {
			return
		}
		s.bits[w] &^= 1 << (id & 63)
		s.n--
		if s.n < len(s.bits) || s.n <= smallSetMax { // under 1 in 64, or small
			s.toSlice()
		}
		return
	}
	if i, found := slices.BinarySearch(s.ids, id); found {
		s.ids = slices.Delete(s.ids, i, i+1)
		if cap(s.ids) > 64 && len(s.ids) < cap(s.ids)/4 {
			s.ids = slices.Clip(slices.Clone(s.ids)) // give back memory
		}
	}
}

func (s *idSet) toSlice() {
	ids := make([]uint32, 0, s.n)
	for id := range s.all() {
		ids = append(ids, id)
	}
	*s = idSet{ids: ids}
}

func (s *idSet) toBits() {
	b := make([]uint64, s.ids[len(s.ids)-1]>>6+1)
	for _, id := range s.ids {
		b[id>>6] |= 1 << (id & 63)
	}
	*s = idSet{bits: b, n: len(s.ids)}
}

func (s *idSet) len() int {
	switch {
	case s == nil:
		return 0
	case s.bits != nil:
		return s.n
	}
	return len(s.ids)
}

func (s *idSet) contains(id uint32) bool {
	switch {
	case s == nil:
		return false
	case s.bits != nil:
		w := int(id >> 6)
		return w < len(s.bits) && s.bits[w]&(1<<(id&63)) != 0
	case len(s.ids) <= smallSetMax:
		return slices.Contains(s.ids, id)
	}
	_, found := slices.BinarySearch(s.ids, id)
	return found
}

// all yields every id once, in increasing order.
func (s *idSet) all() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		switch {
		case s == nil:
		case s.bits != nil:
			for wi, w := range s.bits {
				for w != 0 {
					if !yield(uint32(wi<<6 + bits.TrailingZeros64(w))) {
						return
					}
					w &= w - 1
				}
			}
		default:
			for _, id := range s.ids {
				if !yield(id) {
					return
				}
			}
		}
	}
}

// idRef is the members of one index value: most values are held by one
// object (a label whose values are names, say), so a value's single member
// is kept inline, in the index's map, and only a second member makes an
// idSet. A lone member then costs its map slot and nothing else; an idSet
// of one would cost about 70 bytes more. The zero value is empty.
type idRef struct {
	set *idSet // two members or more (or, briefly, fewer)
	one uint32 // the only member plus one, when set is nil; 0: none
}

func (r idRef) len() int {
	switch {
	case r.set != nil:
		return r.set.len()
	case r.one != 0:
		return 1
	}
	return 0
}

func (r idRef) contains(id uint32) bool {
	if r.set != nil {
		return r.set.contains(id)
	}
	return r.one == id+1
}

// all yields every member once, in increasing order.
func (r idRef) all() iter.Seq[uint32] {
	if r.set != nil {
		return r.set.all()
	}
	return func(yield func(uint32) bool) {
		if r.one != 0 {
			yield(r.one - 1)
		}
	}
}

// addTo files id, which must not be there yet, under v in idx. universe
// is as for idSet.add.
//
// Every write to idx keys it with a copy of v. A write to a map stores
// the key it is given, and v is usually a string of the object being
// filed (a label value, in the memory its decoder gave the object's
// strings): kept as the key, it would keep that memory alive after the
// object was replaced by its next version, for as long as the value stays
// in the index.
func addTo(idx map[string]idRef, v string, id uint32, universe int) {
	r := idx[v]
	switch {
	case r.set != nil:
		r.set.add(id, universe)
	case r.one != 0:
		set := &idSet{}
		set.add(r.one-1, universe)
		set.add(id, universe)
		idx[strings.Clone(v)] = idRef{set: set}
	default:
		idx[strings.Clone(v)] = idRef{one: id + 1}
	}
}

// removeFrom removes id from v's members in idx, if there, and v once it
// has none. A set left with one member goes back inline (keyed with a
// copy of v, as in addTo: v is the departing object's).
func removeFrom(idx map[string]idRef, v string, id uint32) {
	r, ok := idx[v]
	switch {
	case !ok:
	case r.set != nil:
		r.set.remove(id)
		switch r.set.len() {
		case 0:
			delete(idx, v)
		case 1:
			for last := range r.set.all() {
				idx[strings.Clone(v)] = idRef{one: last + 1}
			}
		}
	case r.one == id+1:
		delete(idx, v)
	}
}
