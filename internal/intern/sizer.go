package intern

import "sync/atomic"

// Sizer learns how many bytes of strings the objects one decoder reads
// (an informer's, say) keep per byte of their encoding, so that the
// decoder can keep each object's first string block no larger than the
// object is likely to fill. Strings decoded for a part taken from, or put
// into, a table are not counted: they live in blocks of their own. Objects
// of one kind keep a steady share of their bytes as strings (names, UIDs,
// resource versions, a managed-fields entry's manager), so a running mean
// guesses well. The zero value has learnt nothing, and a nil *Sizer
// guesses nothing. A Sizer is safe for concurrent use; concurrent
// updates may lose one another, which only slows the learning.
type Sizer struct {
	ratio atomic.Uint32 // kept bytes per 1<<16 encoded bytes, plus one; 0: nothing learnt
}

// sizerShift scales the ratio; sizerWeight is the running mean's weight
// of the past (1 - 1/2^sizerWeight).
const (
	sizerShift  = 16
	sizerWeight = 3
)

// Guess returns the bytes of strings an encoding of n bytes (the rest of
// an object) is likely to hold, with headroom for objects that keep a
// little more than the mean: a sixteenth more, plus 16 bytes. It returns 0
// when nothing has been learnt, and the caller then goes by its own
// estimate.
func (s *Sizer) Guess(n int) int {
	if s == nil || n <= 0 {
		return 0
	}
	r := s.ratio.Load()
	if r == 0 {
		return 0
	}
	est := int(uint64(n) * uint64(r-1) >> sizerShift)
	return est + est>>4 + 16
}

// Learn records that an object whose encoding has n bytes kept that many
// bytes of strings (kept) in its own blocks.
func (s *Sizer) Learn(n, kept int) {
	if s == nil || n <= 0 || kept < 0 {
		return
	}
	obs := uint32(min(uint64(kept)<<sizerShift/uint64(n), 1<<sizerShift))
	old := s.ratio.Load()
	if old == 0 {
		s.ratio.Store(obs + 1)
		return
	}
	prev := old - 1
	// prev + (obs - prev) / 2^sizerWeight, in signed arithmetic.
	next := int64(prev) + (int64(obs)-int64(prev))>>sizerWeight
	s.ratio.Store(uint32(next) + 1)
}
