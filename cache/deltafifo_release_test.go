package cache

import (
	"context"
	"reflect"
	"strconv"
	"testing"
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
