package cache

import (
	"context"
	"reflect"
	"strconv"
	"testing"
	"unsafe"
)

// TestDeltaFIFOReleasesAfterBurst checks that a DeltaFIFO that empties
// after holding more keys than it keeps room for makes its map anew, and
// that one that held few keeps it.
func TestDeltaFIFOReleasesAfterBurst(t *testing.T) {
	for _, tc := range []struct {
		n        int
		released bool
	}{
		{n: 3000, released: true},
		{n: fifoReleaseAbove, released: false},
		{n: 10, released: false},
	} {
		f := NewDeltaFIFO(DeltaFIFOOptions[string]{KeyFunc: func(s string) (string, error) { return s, nil }})
		for i := range tc.n {
			if err := f.Add(strconv.Itoa(i)); err != nil {
				t.Fatal(err)
			}
		}
		before := f.items
		for i := range tc.n {
			err := f.Pop(context.Background(), func(key string, deltas []Delta[string]) error {
				if key != strconv.Itoa(i) || len(deltas) != 1 {
					t.Errorf("burst of %d: popped %q with %d deltas, want %d with 1", tc.n, key, len(deltas), i)
				}
				return nil
			})
			if err != nil {
				t.Fatal(err)
			}
		}
		f.mu.Lock()
		released, peak := reflect.ValueOf(f.items).UnsafePointer() != reflect.ValueOf(before).UnsafePointer(), f.peak
		f.mu.Unlock()
		if released != tc.released {
			t.Errorf("burst of %d: map made anew %v (peak now %d), want %v", tc.n, released, peak, tc.released)
		}
		// It still works.
		if err := f.Add("x"); err != nil {
			t.Fatal(err)
		}
		if err := f.Pop(context.Background(), func(key string, _ []Delta[string]) error {
			if key != "x" {
				t.Errorf("burst of %d: popped %q after it, want x", tc.n, key)
			}
			return nil
		}); err != nil {
			t.Fatal(err)
		}
	}
}

// TestDeltaFIFOKeepsMapThroughReplace checks that a Replace taken in
// pieces keeps the map while its pages empty the queue in turn, and that
// its end releases it once the queue is empty.
func TestDeltaFIFOKeepsMapThroughReplace(t *testing.T) {
	f := NewDeltaFIFO(DeltaFIFOOptions[string]{KeyFunc: func(s string) (string, error) { return s, nil }})
	mapOf := func() unsafe.Pointer {
		f.mu.Lock()
		defer f.mu.Unlock()
		return reflect.ValueOf(f.items).UnsafePointer()
	}
	drain := func() {
		for f.Len() > 0 {
			if err := f.Pop(context.Background(), func(string, []Delta[string]) error { return nil }); err != nil {
				t.Fatal(err)
			}
		}
	}
	f.beginReplace()
	first := mapOf()
	for page := range 3 {
		var objs []string
		for i := range 2 * fifoReleaseAbove {
			objs = append(objs, strconv.Itoa(page*10000+i))
		}
		if err := f.replaceItems(objs); err != nil {
			t.Fatal(err)
		}
		drain()
		if m := mapOf(); m != first {
			t.Fatalf("page %d: the map was made anew during the Replace", page)
		}
	}
	if err := f.endReplace(); err != nil {
		t.Fatal(err)
	}
	if mapOf() == first {
		t.Error("the map of the Replace was kept after it ended with the queue empty")
	}
}
