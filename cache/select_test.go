package cache_test

import (
	"fmt"
	"math/rand/v2"
	"slices"
	"strconv"
	"testing"

	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/selection"

	"github.com/loom-k8s/loom/cache"
)

// The label domain of the random tests: few keys and values, so that
// selectors match often and index sets grow past the small-set size.
var (
	labelKeys   = []string{"app", "tier", "ver", "zone", "id"}
	labelValues = []string{"", "a", "b", "c", "1", "2", "10"}
	// zone has more values than Select probes per candidate, so that
	// "exists" and "!" on it fall back to reading labels.
	zoneValues = []string{"z0", "z1", "z2", "z3", "z4", "z5", "z6", "z7", "z8", "z9", "z10", "z11"}
	// id has about as many values as a small store has objects, so that
	// most of its values are held by one object, some by two or three,
	// and the index keeps passing between a lone member and a set.
	namespaces = []string{"", "ns1", "ns2", "ns3"}
	operators  = []selection.Operator{
		selection.Equals, selection.DoubleEquals, selection.In, selection.NotIn, selection.NotEquals,
		selection.Exists, selection.DoesNotExist, selection.GreaterThan, selection.LessThan,
	}
)

func randObj(r *rand.Rand, version, names int) *obj {
	o := &obj{Namespace: namespaces[r.IntN(len(namespaces))], Name: "o" + strconv.Itoa(r.IntN(names)), Version: version}
	if r.IntN(8) != 0 {
		o.Labels = map[string]string{}
		for _, k := range labelKeys {
			if r.IntN(10) < 7 {
				o.Labels[k] = randValue(r, k)
			}
		}
	}
	return o
}

func randValue(r *rand.Rand, key string) string {
	if key == "id" && r.IntN(5) != 0 {
		return "i" + strconv.Itoa(r.IntN(50))
	}
	if key == "zone" && r.IntN(4) != 0 {
		return zoneValues[r.IntN(len(zoneValues))]
	}
	return labelValues[r.IntN(len(labelValues))]
}

func randSelector(r *rand.Rand) labels.Selector {
	sel := labels.NewSelector()
	for range r.IntN(4) {
		op := operators[r.IntN(len(operators))]
		key := labelKeys[r.IntN(len(labelKeys))]
		var vals []string
		switch op {
		case selection.Equals, selection.DoubleEquals, selection.NotEquals:
			vals = []string{randValue(r, key)}
		case selection.In, selection.NotIn:
			for range 1 + r.IntN(3) {
				vals = append(vals, randValue(r, key))
			}
		case selection.GreaterThan, selection.LessThan:
			vals = []string{strconv.Itoa(r.IntN(12))}
		}
		req, err := labels.NewRequirement(key, op, vals)
		if err != nil {
			panic(err)
		}
		sel = sel.Add(*req)
	}
	return sel
}

func keyOfObj(o *obj) string {
	k, _ := cache.MetaNamespaceKey(o)
	return k
}

// checkSelect compares Select with a scan of model, the test's own record
// of what the store should hold.
func checkSelect(t *testing.T, s *cache.Store[*obj], model map[string]*obj, ns string, sel labels.Selector) {
	t.Helper()
	got, err := s.Select(ns, sel)
	if err != nil {
		t.Fatalf("Select(%q, %q): %v", ns, sel, err)
	}
	gotKeys := make([]string, len(got))
	for i, o := range got {
		gotKeys[i] = keyOfObj(o)
	}
	slices.Sort(gotKeys)
	var want []string
	for k, o := range model {
		if (ns == "" || o.Namespace == ns) && sel.Matches(labels.Set(o.Labels)) {
			want = append(want, k)
		}
	}
	slices.Sort(want)
	if !slices.Equal(gotKeys, want) {
		t.Fatalf("Select(%q, %q) = %q, scan = %q", ns, sel, gotKeys, want)
	}
}

// TestSelectMatchesScan is a property test: after random writes, Select
// returns exactly what a scan with selector.Matches returns, for random
// selectors over every operator, with and without a namespace. Small
// stores make index sets slices and bitmaps; large ones make maps too.
func TestSelectMatchesScan(t *testing.T) {
	for seed := range uint64(40) {
		names, steps := 40, 600
		if seed%10 == 9 {
			names, steps = 1500, 3000
		}
		t.Run(fmt.Sprint(seed), func(t *testing.T) {
			r := rand.New(rand.NewPCG(seed, 1))
			s := cache.NewStore(cache.StoreOptions[*obj]{})
			model := map[string]*obj{}
			for step := range steps {
				switch n := r.IntN(100); {
				case n < 55:
					o := randObj(r, step, names)
					if err := s.Add(o); err != nil {
						t.Fatal(err)
					}
					model[keyOfObj(o)] = o
				case n < 90:
					o := randObj(r, step, names)
					if err := s.Delete(o); err != nil {
						t.Fatal(err)
					}
					delete(model, keyOfObj(o))
				case n < 92:
					var objs []*obj
					clear(model)
					for range r.IntN(2 * names) {
						o := randObj(r, step, names)
						objs = append(objs, o)
						model[keyOfObj(o)] = o
					}
					if err := s.Replace(objs); err != nil {
						t.Fatal(err)
					}
				default:
					for range 10 {
						checkSelect(t, s, model, namespaces[r.IntN(len(namespaces))], randSelector(r))
					}
				}
			}
			for range 50 {
				checkSelect(t, s, model, namespaces[r.IntN(len(namespaces))], randSelector(r))
			}
		})
	}
}

// FuzzSelect drives a store with writes decoded from ops and compares
// Select for a parsed selector with a scan.
func FuzzSelect(f *testing.F) {
	f.Add([]byte{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 200, 3, 4}, "app=a", "")
	f.Add([]byte{9, 9, 9, 1, 0, 255, 17, 33}, "app in (a,b),tier!=c", "ns1")
	f.Add([]byte{0, 0, 0, 0}, "!zone,ver", "ns2")
	f.Add([]byte{7, 1, 7, 2, 7, 3, 7, 4}, "ver>1,ver<10", "")
	f.Add([]byte{42, 43, 44}, "app notin (a),zone", "ns3")
	f.Fuzz(func(t *testing.T, ops []byte, selector, ns string) {
		sel, err := labels.Parse(selector)
		if err != nil {
			t.Skip()
		}
		s := cache.NewStore(cache.StoreOptions[*obj]{})
		model := map[string]*obj{}
		r := rand.New(rand.NewPCG(uint64(len(ops)), 7))
		for i, b := range ops {
			o := randObj(r, i, 40)
			if b%4 == 0 {
				_ = s.Delete(o)
				delete(model, keyOfObj(o))
				continue
			}
			if err := s.Update(o); err != nil {
				t.Fatal(err)
			}
			model[keyOfObj(o)] = o
		}
		checkSelect(t, s, model, ns, sel)
	})
}
