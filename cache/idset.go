package cache

import (
	"iter"
	"math/bits"
)

// smallSetMax is the size up to which an idSet is a plain slice. Most
// index values (a pod-template-hash, a node name) hold a handful of
// objects, where a slice is smaller and faster than a map.
const smallSetMax = 16

// An idSet holds a set of slot ids in one of three forms, chosen by size
// and density so that each costs at most a few bytes per member:
//
//   - a slice, up to smallSetMax members;
//   - a map, for sparse larger sets (about 10 to 15 bytes per member);
//   - a bitmap over the ids, for sets holding at least 1 in 32 of the
//     store's slots (at most 4 bytes per member, usually far less: a
//     label every object has costs one bit per object). It returns to a
//     map when it falls below 1 in 64 of the ids it spans.
//
// Dense sets are the ones a selector meets most (tier=frontend,
// environment=prod, a namespace), so the bitmap also makes membership
// tests cheap where they are most frequent. The zero value is an empty
// set. An idSet is not safe for concurrent use.
type idSet struct {
	small []uint32
	big   map[uint32]struct{}
	bits  []uint64
	n     int // members, in the bitmap form
}

// add adds id, which must not be in the set. universe is the number of
// slots of the store, which decides when a set is dense.
func (s *idSet) add(id uint32, universe int) {
	switch {
	case s.bits != nil:
		w := int(id >> 6)
		if w >= len(s.bits) {
			if s.n+1 < w+1 { // fewer members than words: under 1 in 64
				s.toMap()
				s.big[id] = struct{}{}
				return
			}
			s.bits = append(s.bits, make([]uint64, w+1-len(s.bits))...)
		}
		s.bits[w] |= 1 << (id & 63)
		s.n++
	case s.big != nil:
		s.big[id] = struct{}{}
		if len(s.big)*32 >= universe {
			s.toBits()
		}
	default:
		s.small = append(s.small, id)
		if len(s.small) > smallSetMax {
			if len(s.small)*32 >= universe {
				s.toBits()
			} else {
				s.toMap()
			}
		}
	}
}

// remove removes id if present.
func (s *idSet) remove(id uint32) {
	switch {
	case s.bits != nil:
		w := int(id >> 6)
		if w >= len(s.bits) || s.bits[w]&(1<<(id&63)) == 0 {
			return
		}
		s.bits[w] &^= 1 << (id & 63)
		s.n--
		if s.n < len(s.bits) || s.n <= smallSetMax { // under 1 in 64, or small
			s.toMap()
		}
	case s.big != nil:
		delete(s.big, id)
		if len(s.big) <= smallSetMax/2 {
			s.toSmall()
		}
	default:
		for i, x := range s.small {
			if x == id {
				last := len(s.small) - 1
				s.small[i] = s.small[last]
				s.small = s.small[:last]
				return
			}
		}
	}
}

// toMap converts the set to the map form, or to the slice form if small.
func (s *idSet) toMap() {
	if s.len() <= smallSetMax && s.big == nil {
		s.toSmall()
		return
	}
	m := make(map[uint32]struct{}, s.len()+1)
	for id := range s.all() {
		m[id] = struct{}{}
	}
	*s = idSet{big: m}
}

func (s *idSet) toSmall() {
	small := make([]uint32, 0, s.len())
	for id := range s.all() {
		small = append(small, id)
	}
	*s = idSet{small: small}
}

func (s *idSet) toBits() {
	var maxID uint32
	for id := range s.all() {
		maxID = max(maxID, id)
	}
	b := make([]uint64, maxID>>6+1)
	n := 0
	for id := range s.all() {
		b[id>>6] |= 1 << (id & 63)
		n++
	}
	*s = idSet{bits: b, n: n}
}

func (s *idSet) len() int {
	switch {
	case s == nil:
		return 0
	case s.bits != nil:
		return s.n
	case s.big != nil:
		return len(s.big)
	}
	return len(s.small)
}

func (s *idSet) contains(id uint32) bool {
	switch {
	case s == nil:
		return false
	case s.bits != nil:
		w := int(id >> 6)
		return w < len(s.bits) && s.bits[w]&(1<<(id&63)) != 0
	case s.big != nil:
		_, ok := s.big[id]
		return ok
	}
	for _, x := range s.small {
		if x == id {
			return true
		}
	}
	return false
}

// all yields every id once; in increasing order for a bitmap, in no
// particular order otherwise.
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
		case s.big != nil:
			for id := range s.big {
				if !yield(id) {
					return
				}
			}
		default:
			for _, id := range s.small {
				if !yield(id) {
					return
				}
			}
		}
	}
}
