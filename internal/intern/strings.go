package intern

import (
	"bytes"
	"hash/maphash"
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
// string's slots hold live strings, the first one is taken over. So the memory it takes never grows past the array and
// its entries, whatever the objects decoded. A string that loses its slot
// stays correct: the next object to meet it gets a new copy.
//
// The zero value is ready to use. Safe for concurrent use.
type Strings struct {
	slots [stringSlots]atomic.Pointer[stringEntry]
}

// stringSlots is the number of slots: 128 KB of pointers, plus an entry of
// 24 bytes per slot in use.
const stringSlots = 1 << 14

// MaxInterned is the length of the longest string [Strings] keeps.
// Longer strings are rarely identical across objects (an image with its
// digest, a checksum), and each lookup hashes the whole string.
const MaxInterned = 128

type stringEntry struct {
	w weak.Pointer[byte]
	n int
}

// Get returns a string equal to b: the copy a slot holds if there is one
// (found), else a new copy, stored in b's slot. b must be 1 to
// [MaxInterned] bytes long.
func (s *Strings) Get(b []byte) (str string, found bool) {
	h := maphash.Bytes(seedA, b)
	first, second := &s.slots[h%stringSlots], &s.slots[(h>>32)%stringSlots]
	free := first
	for _, slot := range [2]*atomic.Pointer[stringEntry]{first, second} {
		e := slot.Load()
		if e == nil {
			free = slot
			continue
		}
		p := e.w.Value()
		if p == nil {
			free = slot
			continue
		}
		if e.n == len(b) && bytes.Equal(unsafe.Slice(p, e.n), b) {
			return unsafe.String(p, e.n), true
		}
	}
	// A copy of its own: at least 16 bytes, so that the runtime never
	// puts it in a block with other small values, which would keep it
	// alive (and its weak pointer valid) as long as they are.
	buf := make([]byte, max(len(b), 16))
	copy(buf, b)
	free.Store(&stringEntry{w: weak.Make(&buf[0]), n: len(b)})
	return unsafe.String(&buf[0], len(b)), false
}
