package cache

import "iter"

// smallSetMax is the size up to which an idSet is a plain slice. Most
// index values (a pod-template-hash, a node name) hold a handful of
// objects, where a slice is smaller and faster than a map.
const smallSetMax = 16

// idSet is a set of slot ids: a slice while small, a map once large.
// The zero value is an empty set. It is not safe for concurrent use.
type idSet struct {
	small []uint32
	big   map[uint32]struct{}
}

// add adds id, which must not be in the set.
func (s *idSet) add(id uint32) {
	if s.big != nil {
		s.big[id] = struct{}{}
		return
	}
	if len(s.small) < smallSetMax {
		s.small = append(s.small, id)
		return
	}
	s.big = make(map[uint32]struct{}, 2*smallSetMax)
	for _, x := range s.small {
		s.big[x] = struct{}{}
	}
	s.big[id] = struct{}{}
	s.small = nil
}

// remove removes id if present.
func (s *idSet) remove(id uint32) {
	if s.big != nil {
		delete(s.big, id)
		return
	}
	for i, x := range s.small {
		if x == id {
			last := len(s.small) - 1
			s.small[i] = s.small[last]
			s.small = s.small[:last]
			return
		}
	}
}

func (s *idSet) len() int {
	if s == nil {
		return 0
	}
	if s.big != nil {
		return len(s.big)
	}
	return len(s.small)
}

func (s *idSet) contains(id uint32) bool {
	if s == nil {
		return false
	}
	if s.big != nil {
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

// all yields every id once, in no particular order.
func (s *idSet) all() iter.Seq[uint32] {
	return func(yield func(uint32) bool) {
		if s == nil {
			return
		}
		if s.big != nil {
			for id := range s.big {
				if !yield(id) {
					return
				}
			}
			return
		}
		for _, id := range s.small {
			if !yield(id) {
				return
			}
		}
	}
}
