package intern

import (
	"reflect"
	"runtime"
	"strconv"
	"testing"
	"unsafe"
)

// arrayPtr is the type of the values the tests put.
var arrayPtr = reflect.TypeFor[*[32]byte]()

// TestTableShrinks: once most values are collected, the table's maps are
// made anew at the size of what is left, and the values still alive are
// still found.
func TestTableShrinks(t *testing.T) {
	tab := New()
	typ := unsafe.Pointer(new(byte))
	const n, keep = 64 * 400, 64 * 40
	var kept []*[32]byte
	keys := make([]Key, n)
	for i := range n {
		keys[i] = KeyOf([]byte("value "+strconv.Itoa(i)), typ)
		v := new([32]byte)
		copy(v[:], strconv.Itoa(i))
		if got := tab.Put(keys[i], unsafe.Pointer(v), arrayPtr, 0); got != unsafe.Pointer(v) {
			t.Fatalf("Put of a new key %d returned another value", i)
		}
		if i%(n/keep) == 0 {
			kept = append(kept, v)
		}
	}
	for i := 0; tab.Len() > len(kept); i++ {
		if i == 200 {
			t.Fatalf("%d entries left after 200 GCs, want %d", tab.Len(), len(kept))
		}
		runtime.GC()
	}
	total := 0
	for i := range tab.shards {
		s := &tab.shards[i]
		s.mu.Lock()
		l, peak := len(s.m), s.peak
		s.mu.Unlock()
		total += l
		// A shard rebuilt its map when it fell below three quarters of
		// its peak, so its peak is now at most a third more than what it
		// holds (or too small to be worth rebuilding).
		if peak >= shrinkFrom && 3*peak > 4*l+3 {
			t.Errorf("shard %d: %d entries, map made for a peak of %d", i, l, peak)
		}
	}
	if total != len(kept) {
		t.Errorf("%d entries in the shards, want %d", total, len(kept))
	}
	parts := 0
	for i := range tab.parts {
		ps := &tab.parts[i]
		ps.mu.Lock()
		l, peak := len(ps.m), ps.peak
		ps.mu.Unlock()
		parts += l
		if peak >= shrinkFrom && 3*peak > 4*l+3 {
			t.Errorf("parts shard %d: %d parts, map made for a peak of %d", i, l, peak)
		}
	}
	if parts != len(kept) {
		t.Errorf("%d parts known by address, want %d (one per value still held)", parts, len(kept))
	}
	for j, v := range kept {
		i := j * (n / keep)
		if got := tab.Get(keys[i]); got != unsafe.Pointer(v) {
			t.Fatalf("value %d, still held, not found after the table shrank", i)
		}
	}
	runtime.KeepAlive(kept)
}
