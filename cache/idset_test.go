package cache

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"testing"
)

// TestIDSetModel drives idSets through random adds and removes, over
// universes and id ranges that make them pass through every form, and
// compares them with a map after every step.
func TestIDSetModel(t *testing.T) {
	for _, tc := range []struct{ ids, universe int }{
		{10, 10}, {40, 1000}, {300, 300}, {5000, 5000}, {5000, 100000}, {2000, 2000},
	} {
		t.Run(fmt.Sprintf("ids=%d/universe=%d", tc.ids, tc.universe), func(t *testing.T) {
			r := rand.New(rand.NewPCG(uint64(tc.ids), uint64(tc.universe)))
			var s idSet
			model := map[uint32]bool{}
			forms := map[string]bool{}
			for step := range 20000 {
				// Phases of growth and shrinkage, so dense sets thin out.
				growing := (step/2000)%2 == 0
				id := uint32(r.IntN(tc.ids))
				if r.IntN(10) < 7 == growing {
					if !model[id] {
						s.add(id, tc.universe)
						model[id] = true
					}
				} else {
					s.remove(id)
					delete(model, id)
				}
				forms[s.form()] = true
				if s.form() == "unsorted slice" {
					t.Fatalf("step %d: ids not sorted: %v", step, s.ids)
				}
				if s.len() != len(model) {
					t.Fatalf("step %d: len = %d, want %d (%s)", step, s.len(), len(model), s.form())
				}
				if step%97 == 0 {
					got := slices.Collect(s.all())
					if !slices.IsSorted(got) {
						t.Fatalf("step %d: all() not in increasing order", step)
					}
					var want []uint32
					for id := range model {
						want = append(want, id)
					}
					slices.Sort(want)
					if !slices.Equal(got, want) {
						t.Fatalf("step %d: members = %v, want %v (%s)", step, got, want, s.form())
					}
					for range 20 {
						id := uint32(r.IntN(tc.ids + 64))
						if s.contains(id) != model[id] {
							t.Fatalf("step %d: contains(%d) = %v (%s)", step, id, !model[id], s.form())
						}
					}
				}
			}
			t.Logf("forms seen: %v", forms)
		})
	}
}

func (s *idSet) form() string {
	if s.bits != nil {
		return "bits"
	}
	if !slices.IsSorted(s.ids) {
		return "unsorted slice"
	}
	return "slice"
}

// TestIDSetForms checks the form a set takes for a few shapes.
func TestIDSetForms(t *testing.T) {
	tests := []struct {
		name     string
		n, every int // members 0, every, 2*every, ...
		universe int
		want     string
	}{
		{"few", 10, 1, 1000, "slice"},
		{"sparse", 100, 100, 10000, "slice"},
		{"dense", 5000, 2, 10000, "bits"},
		{"dense in a small store", 17, 1, 20, "bits"},
	}
	for _, tt := range tests {
		var s idSet
		for i := range tt.n {
			s.add(uint32(i*tt.every), tt.universe)
		}
		if got := s.form(); got != tt.want {
			t.Errorf("%s: form %s, want %s", tt.name, got, tt.want)
		}
	}
}

// TestIDRefModel files random ids under a few values of one index and
// compares each value's members with a map after every step. A value with
// one member must hold it inline, without an idSet.
func TestIDRefModel(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	idx := map[string]idRef{}
	model := map[string]map[uint32]bool{"a": {}, "b": {}, "c": {}}
	for step := range 5000 {
		v := string(rune('a' + r.IntN(3)))
		id := uint32(r.IntN(40))
		if r.IntN(2) == 0 {
			if !model[v][id] {
				addTo(idx, v, id, 40)
				model[v][id] = true
			}
		} else {
			removeFrom(idx, v, id)
			delete(model[v], id)
		}
		for v, want := range model {
			ref, ok := idx[v]
			if ok != (len(want) > 0) {
				t.Fatalf("step %d: value %q present = %v with %d members", step, v, ok, len(want))
			}
			if ref.len() != len(want) {
				t.Fatalf("step %d: value %q: len = %d, want %d", step, v, ref.len(), len(want))
			}
			if len(want) == 1 && ref.set != nil {
				t.Fatalf("step %d: value %q has one member in an idSet", step, v)
			}
			got := slices.Collect(ref.all())
			if len(got) != len(want) || !slices.IsSorted(got) {
				t.Fatalf("step %d: value %q: members %v, want %v", step, v, got, want)
			}
			for id := range uint32(41) {
				if ref.contains(id) != want[id] {
					t.Fatalf("step %d: value %q: contains(%d) = %v", step, v, id, !want[id])
				}
			}
		}
	}
}
