package intern

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Key identifies encoded bytes of one Go type. The bytes determine the
// value's length too (elements, entries or bytes), so a key does not
// carry it: a table entry is as small as it can be.
type Key struct {
	a, b uint64
	typ  unsafe.Pointer // the value's type, so equal bytes of two types never meet
}

var seedA, seedB = maphash.MakeSeed(), maphash.MakeSeed()

// KeyOf returns the key of the encoded bytes b, to be decoded as a value of
// the type typ (any stable pointer that names the type: a reflect type's
// descriptor).
func KeyOf(b []byte, typ unsafe.Pointer) Key {
	return Key{a: maphash.Bytes(seedA, b), b: maphash.Bytes(seedB, b), typ: typ}
}

const shards = 64

// Table maps keys to values that live only as long as something else
// holds them. The zero value is not usable; call [New]. Safe for
// concurrent use.
type Table struct {
	shards [shards]shard
	size   atomic.Int64
	rm     func(Key) // remove, made once: a cleanup per entry costs no closure
	// recent remembers the keys of values met lately that the table did
	// not hold, so that a value gets an entry only when it is met a
	// second time. Each key has one byte-wide slot, which holds 8 bits of
	// the key (its fingerprint); the latest key wins the slot. Four slots
	// share a word. Made on first use.
	recent atomic.Pointer[[recentSlots / 4]atomic.Uint32]
}

// recentSlots is the number of keys Table remembers (256 KB). Values met
// twice within about this many lookups of misses get an entry; the
// others, most of them unique, are decoded into their object's own memory
// and cost the table nothing. A slot of 8 bits rather than 32 remembers
// four times the keys in the same memory, at the cost of taking about
// one unknown key in 255 whose slot is full for a known one.
const recentSlots = 1 << 18

type shard struct {
	mu   sync.Mutex
	m    map[Key]weak.Pointer[byte]
	peak int // the most entries m has held since it was made
}

// New returns an empty table.
func New() *Table {
	t := &Table{}
	t.rm = t.remove
	for i := range t.shards {
		t.shards[i].m = map[Key]weak.Pointer[byte]{}
	}
	return t
}

func (t *Table) shard(k Key) *shard { return &t.shards[k.a%shards] }

// Get returns the value stored under k, or nil if there is none or it has
// been collected. The pointer returned keeps the value alive.
func (t *Table) Get(k Key) unsafe.Pointer {
	s := t.shard(k)
	s.mu.Lock()
	w, ok := s.m[k]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return unsafe.Pointer(w.Value())
}

// Put stores p (the start of a heap allocation holding the decoded value)
// under k, replacing a collected entry, and returns the value now stored
// under k: p, or the value another goroutine stored first. The entry is
// removed once p's allocation is collected. Values smaller than 16 bytes
// without pointers must not be stored: the runtime may batch them with
// other objects, so their entries might never go.
func (t *Table) Put(k Key, p unsafe.Pointer) unsafe.Pointer {
	s := t.shard(k)
	s.mu.Lock()
	if w, ok := s.m[k]; ok {
		if q := w.Value(); q != nil {
			s.mu.Unlock()
			return unsafe.Pointer(q)
		}
	} else {
		t.size.Add(1)
	}
	w := weak.Make((*byte)(p))
	s.m[k] = w
	s.peak = max(s.peak, len(s.m))
	s.mu.Unlock()
	runtime.AddCleanup((*byte)(p), t.rm, k)
	return p
}

// remove deletes k's entry if its value has been collected. (A value
// stored under k again since then is alive, and keeps its entry; its own
// cleanup removes it later.)
func (t *Table) remove(k Key) {
	s := t.shard(k)
	s.mu.Lock()
	if w, ok := s.m[k]; ok && w.Value() == nil {
		delete(s.m, k)
		t.size.Add(-1)
		s.shrink()
	}
	s.mu.Unlock()
}

// shrink makes m anew once it holds fewer than half of its peak entries:
// a Go map never gives back room, and a process whose objects went
// elsewhere (a shard after the ring grew, say) would otherwise keep the
// table's peak size. Each rebuild costs about as much as the removals
// that led to it. s.mu must be held.
func (s *shard) shrink() {
	if s.peak < shrinkFrom || len(s.m) >= s.peak/2 {
		return
	}
	m := make(map[Key]weak.Pointer[byte], len(s.m)) // maps.Clone would keep the room
	for k, w := range s.m {
		m[k] = w
	}
	s.m, s.peak = m, len(m)
}

// shrinkFrom is the least peak of a shard's map worth rebuilding.
const shrinkFrom = 64

// MetBefore reports whether k was asked about (and missing) recently, and
// remembers it for the next time. It can be wrong either way: a key
// forgotten (its slot taken by another) is met anew, and two keys with
// the same fingerprint in one slot pass for each other. Either costs a
// copy more or an entry more, never a wrong value.
func (t *Table) MetBefore(k Key) bool {
	r := t.recent.Load()
	if r == nil {
		t.recent.CompareAndSwap(nil, new([recentSlots / 4]atomic.Uint32))
		r = t.recent.Load()
	}
	// The fingerprint comes from the bytes' other hash and the type, and
	// is 1 to 255: 0 is the empty slot.
	fp := uint32((k.a^uint64(uintptr(k.typ)))%255) + 1
	i := k.b % recentSlots
	w, shift := &r[i/4], 8*(i%4)
	for {
		old := w.Load()
		if (old>>shift)&0xff == fp {
			return true
		}
		if w.CompareAndSwap(old, old&^(0xff<<shift)|fp<<shift) {
			return false
		}
	}
}

// Len returns the number of entries, collected or not yet removed.
func (t *Table) Len() int { return int(t.size.Load()) }
