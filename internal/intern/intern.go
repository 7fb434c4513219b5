package intern

import (
	"hash/maphash"
	"runtime"
	"sync"
	"sync/atomic"
	"unsafe"
	"weak"
)

// Key identifies encoded bytes of one Go type.
type Key struct {
	a, b uint64
	typ  unsafe.Pointer // the value's type, so equal bytes of two types never meet
	n    int            // the value's length (elements, entries or bytes)
}

var seedA, seedB = maphash.MakeSeed(), maphash.MakeSeed()

// KeyOf returns the key of the encoded bytes b, to be decoded as a value of
// the type typ (any stable pointer that names the type: a reflect type's
// descriptor) and length n.
func KeyOf(b []byte, typ unsafe.Pointer, n int) Key {
	return Key{a: maphash.Bytes(seedA, b), b: maphash.Bytes(seedB, b), typ: typ, n: n}
}

const shards = 64

// Table maps keys to values that live only as long as something else
// holds them. The zero value is not usable; call [New]. Safe for
// concurrent use.
type Table struct {
	shards [shards]shard
	size   atomic.Int64
}

type shard struct {
	mu sync.Mutex
	m  map[Key]weak.Pointer[byte]
}

// New returns an empty table.
func New() *Table {
	t := &Table{}
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
	s.mu.Unlock()
	runtime.AddCleanup((*byte)(p), t.remove, entry{k, w})
	return p
}

type entry struct {
	k Key
	w weak.Pointer[byte]
}

// remove deletes e's key if it still maps to e's value.
func (t *Table) remove(e entry) {
	s := t.shard(e.k)
	s.mu.Lock()
	if w, ok := s.m[e.k]; ok && w == e.w {
		delete(s.m, e.k)
		t.size.Add(-1)
	}
	s.mu.Unlock()
}

// Len returns the number of entries, collected or not yet removed.
func (t *Table) Len() int { return int(t.size.Load()) }
