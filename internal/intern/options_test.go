package intern

import (
	"fmt"
	"math/rand/v2"
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestHoldsTime(t *testing.T) {
	for _, tc := range []struct {
		t    reflect.Type
		want bool
	}{
		{reflect.TypeFor[corev1.Container](), false},
		{reflect.TypeFor[[]corev1.Volume](), false},
		{reflect.TypeFor[*corev1.PodSecurityContext](), false},
		{reflect.TypeFor[map[string]string](), false},
		{reflect.TypeFor[corev1.PodCondition](), true},
		{reflect.TypeFor[[]corev1.ContainerStatus](), true}, // through State.Running.StartedAt
		{reflect.TypeFor[metav1.ManagedFieldsEntry](), true},
		{reflect.TypeFor[*metav1.Time](), true},
		{reflect.TypeFor[corev1.PodSpec](), false},
	} {
		if got := HoldsTime(tc.t); got != tc.want {
			t.Errorf("HoldsTime(%v) = %v, want %v", tc.t, got, tc.want)
		}
	}
}

func TestOptionsStopLookingUpUniqueFields(t *testing.T) {
	tab := New()
	// One numbered field, one named.
	unique, common := NewField(), Named("common")
	o := Options{Share: tab, Stats: &Stats{}}
	v := new([32]byte)
	ck := KeyOf([]byte("common"), nil)
	tab.Put(ck, unsafe.Pointer(v), arrayPtr, 0)
	for i := range 2 * warmup {
		if !o.Sharing(common) {
			t.Fatalf("a field found on every lookup stopped being looked up after %d", i)
		}
		o.Lookup(common, ck)
		if o.Sharing(unique) {
			o.Lookup(unique, KeyOf([]byte{byte(i), byte(i >> 8)}, nil))
		}
	}
	if o.Sharing(unique) {
		t.Error("a field never found is still looked up")
	}
	if other := (Options{Share: tab, Stats: &Stats{}}); !other.Sharing(unique) {
		t.Error("stats of another user stopped its lookups")
	}
	if none := (Options{Share: tab}); !none.Sharing(unique) {
		t.Error("without stats a field must always be looked up")
	}
	// A decoder names fields by strings it decoded: naming them costs
	// nothing once counted.
	name := string([]byte("common"))
	if n := testing.AllocsPerRun(100, func() { o.Sharing(Named(name)) }); n != 0 {
		t.Errorf("%.0f allocations to ask about a named field", n)
	}
	if n := testing.AllocsPerRun(100, func() { o.Sharing(unique) }); n != 0 {
		t.Errorf("%.0f allocations to ask about a numbered field", n)
	}
	// Numbered fields met in any order each keep their own counts.
	fields := make([]Field, 100)
	for i := range fields {
		fields[i] = NewField()
	}
	s := &Stats{}
	for i := len(fields) - 1; i >= 0; i-- {
		c := s.of(fields[i])
		c.tries.Add(int64(i))
	}
	for i, f := range fields {
		if got := s.of(f).tries.Load(); got != int64(i) {
			t.Fatalf("field %d: %d tries, want %d", i, got, i)
		}
	}
	runtime.KeepAlive(v)
}

// A value is put in the table only when it is met again: the first miss
// says to decode it in place, the second to put it, and that second
// meeting counts as found.
// The memory of misses, 256 KB, recalls most keys met again after 65,536
// others, and rarely mistakes a new key for one it holds.
func TestMetBeforeCapacity(t *testing.T) {
	tab := New()
	key := func(set, i int) Key { return KeyOf(fmt.Appendf(nil, "%d/%d", set, i), nil) }
	const n = 1 << 16
	mistaken := 0
	for i := range n {
		if tab.MetBefore(key(0, i)) {
			mistaken++
		}
	}
	recalled := 0
	for i := range n {
		if tab.MetBefore(key(0, i)) {
			recalled++
		}
	}
	// Key i survives the n-i keys met after it, and the i before it met
	// again, with odds (1-1/recentSlots) each: about 78% on average. With
	// 32-bit slots in the same memory it would be 37%.
	if share := float64(recalled) / n; share < 0.7 {
		t.Errorf("recalled %.2f of %d keys, want at least 0.7", share, n)
	}
	for i := range n {
		if tab.MetBefore(key(1, i)) {
			mistaken++
		}
	}
	if share := float64(mistaken) / (2 * n); share > 0.01 {
		t.Errorf("%.4f of %d new keys passed for known ones, want at most 0.01", share, 2*n)
	}
}

// The same bytes of two types are two keys: a part decoded as a struct
// must not make the table take the same bytes decoded as a map for a part
// met before. Each table here holds 200 keys, so that one unknown key
// takes a known one's slot about once in 1,300 lookups, and then passes
// for it once in 255. Before, the bytes alone chose the slot, and the
// map's key passed for the struct's one time in 255: about 20 times in
// these 5,000.
func TestMetBeforeTellsTypesApart(t *testing.T) {
	// Types are told apart by their addresses: pairs of addresses that
	// differ by all sorts of amounts stand for them.
	types := make([]byte, 1<<20)
	rnd := rand.New(rand.NewPCG(1, 2))
	mistaken := 0
	var tab *Table
	for i := range 5000 {
		if i%100 == 0 {
			tab = New()
		}
		typed, untyped := unsafe.Pointer(&types[rnd.IntN(len(types))]), unsafe.Pointer(&types[rnd.IntN(len(types))])
		if typed == untyped {
			continue
		}
		b := fmt.Appendf(nil, `{"app":"web-%d"}`, i)
		tab.MetBefore(KeyOf(b, typed))
		if tab.MetBefore(KeyOf(b, untyped)) {
			mistaken++
		}
	}
	if mistaken > 2 {
		t.Errorf("%d of 5,000 keys passed for the same bytes of another type, want at most 2", mistaken)
	}
}

func TestLookupPutsWhatIsMetTwice(t *testing.T) {
	o := Options{Share: New(), Stats: &Stats{}}
	f := NewField()
	k := KeyOf([]byte("a volume"), nil)
	if v, put := o.Lookup(f, k); v != nil || put {
		t.Fatalf("first lookup: %v, put %v; want a miss without put", v, put)
	}
	if v, put := o.Lookup(f, k); v != nil || !put {
		t.Fatalf("second lookup: %v, put %v; want a miss with put", v, put)
	}
	if c := o.Stats.of(f); c.tries.Load() != 2 || c.hits.Load() != 1 {
		t.Errorf("counted %d tries, %d found; want 2, 1", c.tries.Load(), c.hits.Load())
	}
	v := new([32]byte)
	o.Share.Put(k, unsafe.Pointer(v), arrayPtr, 0)
	if got, _ := o.Lookup(f, k); got != unsafe.Pointer(v) {
		t.Error("the value put is not found")
	}
	runtime.KeepAlive(v)
}
