package intern

import (
	"hash/maphash"
	"reflect"
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
	// parts finds a value by its address, with the fingerprint it had
	// when it was put (see Changed).
	parts [shards]partShard
	size  atomic.Int64
	rm    func(Key) // remove, made once: a cleanup per entry costs no closure
	// recent remembers the keys of values met lately that the table did
	// not hold, so that a value gets an entry only when it is met a
	// second time. Each key has one byte-wide slot, which holds 8 bits of
	// the key (its fingerprint); the latest key wins the slot. Four slots
	// share a word. Made on first use.
	recent atomic.Pointer[[recentSlots / 4]atomic.Uint32]
	// caches are the caches whose objects share parts through the table,
	// by resource (see AddCache).
	caches caches
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
	m    map[Key]entry
	peak int // the most entries m has held since it was made
}

type entry struct {
	w weak.Pointer[byte]
	p uintptr // the value's address, to find its part when it goes
}

// partShard holds what Changed knows of the values whose addresses fall
// in one shard, by address.
type partShard struct {
	mu   sync.Mutex
	m    map[uintptr]part
	peak int // as in shard
}

// part is what Changed knows of a value in the table.
type part struct {
	w   weak.Pointer[byte] // the value, to tell it from a later one at its address
	sum uint32             // its fingerprint when it was put (half of it: a change goes unseen once in 4 billion)
	n   uint32             // its length, for an array
}

// New returns an empty table.
func New() *Table {
	t := &Table{}
	t.rm = t.remove
	for i := range t.shards {
		t.shards[i].m = map[Key]entry{}
		t.parts[i].m = map[uintptr]part{}
	}
	return t
}

func (t *Table) shard(k Key) *shard { return &t.shards[k.a%shards] }

// Get returns the value stored under k, or nil if there is none or it has
// been collected. The pointer returned keeps the value alive.
func (t *Table) Get(k Key) unsafe.Pointer {
	s := t.shard(k)
	s.mu.Lock()
	e, ok := s.m[k]
	s.mu.Unlock()
	if !ok {
		return nil
	}
	return unsafe.Pointer(e.w.Value())
}

// Put stores p (the start of a heap allocation holding the decoded value)
// under k, replacing a collected entry, and returns the value now stored
// under k: p, or the value another goroutine stored first. The entry is
// removed once p's allocation is collected. Values smaller than 16 bytes
// without pointers must not be stored: the runtime may batch them with
// other objects, so their entries might never go.
//
// typ and n say what p is, so that [Table.Changed] can later tell whether
// the value was changed in place: a map type (p is the map), a pointer
// type (p is what it points to), or a slice type with n elements (p is
// the first). The value must be complete: Put takes its fingerprint.
func (t *Table) Put(k Key, p unsafe.Pointer, typ reflect.Type, n int) unsafe.Pointer {
	sum := Sum(valueAt(typ, p, n))
	s := t.shard(k)
	s.mu.Lock()
	if e, ok := s.m[k]; ok {
		if q := e.w.Value(); q != nil {
			s.mu.Unlock()
			return unsafe.Pointer(q)
		}
		t.forget(e.p) // collected, its cleanup yet to run
	} else {
		t.size.Add(1)
	}
	w := weak.Make((*byte)(p))
	s.m[k] = entry{w, uintptr(p)}
	s.peak = max(s.peak, len(s.m))
	ps := t.partShard(uintptr(p))
	ps.mu.Lock()
	ps.m[uintptr(p)] = part{w, uint32(sum), uint32(n)}
	ps.peak = max(ps.peak, len(ps.m))
	ps.mu.Unlock()
	s.mu.Unlock()
	runtime.AddCleanup((*byte)(p), t.rm, k)
	return p
}

// valueAt returns the value p is, as Put describes it.
func valueAt(typ reflect.Type, p unsafe.Pointer, n int) reflect.Value {
	switch typ.Kind() {
	case reflect.Map:
		return reflect.NewAt(typ, unsafe.Pointer(&p)).Elem()
	case reflect.Slice:
		return reflect.SliceAt(typ.Elem(), p, n)
	default:
		return reflect.NewAt(typ.Elem(), p)
	}
}

func (t *Table) partShard(p uintptr) *partShard { return &t.parts[(p>>4)%shards] }

// forget removes the part at p if its value has been collected (a value
// put since then at the same address keeps its own).
func (t *Table) forget(p uintptr) {
	ps := t.partShard(p)
	ps.mu.Lock()
	if pt, ok := ps.m[p]; ok && pt.w.Value() == nil {
		delete(ps.m, p)
		if ps.peak >= shrinkFrom && 4*len(ps.m) < 3*ps.peak {
			m := make(map[uintptr]part, len(ps.m))
			for p, pt := range ps.m {
				m[p] = pt
			}
			ps.m, ps.peak = m, len(m)
		}
	}
	ps.mu.Unlock()
}

// remove deletes k's entry if its value has been collected. (A value
// stored under k again since then is alive, and keeps its entry; its own
// cleanup removes it later.)
func (t *Table) remove(k Key) {
	s := t.shard(k)
	s.mu.Lock()
	if e, ok := s.m[k]; ok && e.w.Value() == nil {
		delete(s.m, k)
		t.forget(e.p)
		t.size.Add(-1)
		s.shrink()
	}
	s.mu.Unlock()
}

// shrink makes m anew once it holds fewer than three quarters of its
// peak entries: a Go map never gives back room, and a process whose
// objects went elsewhere (a shard after the ring grew, say) would
// otherwise keep the table's peak size. Each rebuild costs about three
// times the removals that led to it. s.mu must be held.
func (s *shard) shrink() {
	if s.peak < shrinkFrom || 4*len(s.m) >= 3*s.peak {
		return
	}
	m := make(map[Key]entry, len(s.m)) // maps.Clone would keep the room
	for k, e := range s.m {
		m[k] = e
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
	// is 1 to 255: 0 is the empty slot. The slot too depends on the type:
	// the same bytes decoded as a struct and as a map (a Deployment's
	// labels, typed and unstructured) are different keys, and in one
	// slot each would pass for the other one time in 255.
	typ := uint64(uintptr(k.typ))
	fp := uint32((k.a^typ)%255) + 1
	i := (k.b ^ typ*0x9e3779b97f4a7c15) % recentSlots
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

// process is the table Loom's informers share parts through, made when
// first needed.
var process = sync.OnceValue(New)

// Process returns the process's table: informers share the parts of the
// objects they decode through it, and writes look in it for shared parts
// changed in place ([Table.Changed]).
func Process() *Table { return process() }
