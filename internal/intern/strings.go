package intern

import (
	"bytes"
	"hash/maphash"
	"runtime"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Strings keeps one copy of short strings that many decoded objects hold:
// namespaces, label keys and values, images, condition types and reasons,
// manager names, and the keys of unstructured objects. The decoders would
// otherwise copy such a string into the string block of every object that
// holds it.
//
// It is a fixed array of slots, each with a weak pointer to one string's
// bytes. A string may sit in either of two slots that its hash picks. A
// string lives exactly as long as the objects that hold it; a slot whose
// string has been collected is reused first, and when both of a new
// string's slots hold live strings, the first one is taken over. So the
// memory it takes never grows past the array and its entries, whatever the
// objects decoded. A string that loses its slot
// stays correct: the next object to meet it gets a new copy. After each
// garbage collection, the slots of the strings it collected are emptied,
// so that their entries go too: a process whose objects went elsewhere (a
// shard after the ring grew, say) keeps no entry for their strings.
//
// The zero value is ready to use. Safe for concurrent use.
type Strings struct {
	slots    [stringSlots]atomic.Pointer[stringEntry]
	sweeping atomic.Bool // the sweep after each collection is armed
}

// stringSlots is the number of slots: 128 KB of pointers, plus an entry of
// 24 bytes (and the runtime's handle of its weak pointer) per slot that
// holds a live string.
const stringSlots = 1 << 14

// MaxInterned is the length of the longest string [Strings] keeps.
// Longer strings are rarely identical across objects (an image with its
// digest, a checksum), and each lookup hashes the whole string.
const MaxInterned = 128

type stringEntry struct {
	w     weak.Pointer[byte] // the start of the string's allocation
	n     int
	boxed bool // the allocation starts with the string's box
}

// A string is kept in an allocation of at least 16 bytes, so that the
// runtime never puts it in a block with other small values, which would
// keep it alive (and its weak pointer valid) as long as they are.
//
// A string asked for in an interface ([Strings.Boxed]) is kept boxed: its
// allocation starts with a string header, the box an interface points at,
// followed by the bytes. The header points into its own allocation, which
// holds no other pointer, so the garbage collector has nothing in it to
// follow and it is allocated as bytes. Unstructured objects' string values
// then need no box of their own. Other strings are kept without a box,
// which would cost them 16 bytes each.
const boxSize = unsafe.Sizeof("")

// Get returns a string equal to b: the copy a slot holds if there is one
// (found), else a new copy, stored in b's slot. b must be 1 to
// [MaxInterned] bytes long.
func (s *Strings) Get(b []byte) (str string, found bool) {
	p, boxed, found := s.lookup(b, false)
	if boxed {
		return *(*string)(p), found
	}
	return unsafe.String((*byte)(p), len(b)), found
}

// Boxed is Get for a string in an interface: the interface points at the
// string's shared box, and making it allocates nothing once the string is
// held boxed.
func (s *Strings) Boxed(b []byte) (v any, found bool) {
	p, _, found := s.lookup(b, true)
	return boxed(p), found
}

// boxed returns an interface holding the string whose box is at box.
func boxed(box unsafe.Pointer) (v any) {
	e := (*eface)(unsafe.Pointer(&v))
	e.typ, e.data = stringType, box
	return v
}

type eface struct{ typ, data unsafe.Pointer }

// stringType is the type word of an interface holding a string.
var stringType = func() unsafe.Pointer {
	var v any = ""
	return (*eface)(unsafe.Pointer(&v)).typ
}()

// lookup returns the allocation that keeps the string equal to b, and
// whether it starts with a box. With box, the string is kept boxed: one
// found without a box is copied into a boxed allocation, which takes its
// slot.
func (s *Strings) lookup(b []byte, box bool) (p unsafe.Pointer, boxed, found bool) {
	h := maphash.Bytes(seedA, b)
	first, second := &s.slots[h%stringSlots], &s.slots[(h>>32)%stringSlots]
	free := first
	for _, slot := range [2]*atomic.Pointer[stringEntry]{first, second} {
		e := slot.Load()
		if e == nil {
			free = slot
			continue
		}
		q := unsafe.Pointer(e.w.Value())
		if q == nil {
			free = slot
			continue
		}
		bytesAt := q
		if e.boxed {
			bytesAt = unsafe.Add(q, boxSize)
		}
		if e.n == len(b) && bytes.Equal(unsafe.Slice((*byte)(bytesAt), e.n), b) {
			if e.boxed || !box {
				return q, e.boxed, true
			}
			free = slot // held without a box: a boxed copy replaces it
			found = true
			break
		}
	}
	size := uintptr(max(len(b), 16))
	if box {
		size += boxSize
	}
	buf := make([]byte, size)
	p = unsafe.Pointer(&buf[0])
	if box {
		copy(buf[boxSize:], b)
		*(*string)(p) = unsafe.String(&buf[boxSize], len(b))
	} else {
		copy(buf, b)
	}
	free.Store(&stringEntry{w: weak.Make(&buf[0]), n: len(b), boxed: box})
	if !s.sweeping.Load() && s.sweeping.CompareAndSwap(false, true) {
		sweepAfterGC(weak.Make(s))
	}
	return p, box, found
}

// sweepToken is what sweepAfterGC hangs its cleanup on: it holds a
// pointer, so that the runtime never puts it in a block with other small
// values, which would keep it alive.
type sweepToken struct{ _ *byte }

// sweepAfterGC empties, after the next garbage collection, the slots of
// s whose strings were collected, and arms itself again, for as long as s
// lives. It holds s weakly, so a Strings that is dropped is collected.
func sweepAfterGC(s weak.Pointer[Strings]) {
	runtime.AddCleanup(&sweepToken{}, func(s weak.Pointer[Strings]) {
		if t := s.Value(); t != nil {
			t.sweep()
			sweepAfterGC(s)
		}
	}, s)
}

// sweep empties the slots whose strings have been collected.
func (s *Strings) sweep() {
	for i := range s.slots {
		if e := s.slots[i].Load(); e != nil && e.w.Value() == nil {
			s.slots[i].CompareAndSwap(e, nil)
		}
	}
}
