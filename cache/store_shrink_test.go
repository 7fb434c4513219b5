package cache

import (
	"strconv"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestStoreShrinks: a store that held many objects gives back its room
// once most are deleted, and still answers every read, indexes included.
func TestStoreShrinks(t *testing.T) {
	s := NewStore(StoreOptions[*metav1.ObjectMeta]{Indexers: Indexers[*metav1.ObjectMeta]{
		"parity": func(o *metav1.ObjectMeta) ([]string, error) { return []string{o.Labels["parity"]}, nil },
	}})
	const n = 4000
	for i := range n {
		p := strconv.Itoa(i % 2)
		if err := s.Add(&metav1.ObjectMeta{Namespace: "ns", Name: strconv.Itoa(i), Labels: map[string]string{"parity": p}}); err != nil {
			t.Fatal(err)
		}
	}
	for i := range n - 100 {
		if err := s.Delete(&metav1.ObjectMeta{Namespace: "ns", Name: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	if got := len(s.st.slots); got > 4*100 {
		t.Errorf("%d slots for 100 objects after deleting %d", got, n-100)
	}
	if got := len(s.List()); got != 100 {
		t.Fatalf("List: %d objects, want 100", got)
	}
	for i := n - 100; i < n; i++ {
		if _, ok := s.Get("ns/" + strconv.Itoa(i)); !ok {
			t.Fatalf("object %d lost", i)
		}
	}
	even, err := s.ByIndex("parity", "0")
	if err != nil || len(even) != 50 {
		t.Fatalf("ByIndex: %d objects, %v; want 50", len(even), err)
	}
	sel, err := s.Select("ns", labels.SelectorFromSet(labels.Set{"parity": "1"}))
	if err != nil || len(sel) != 50 {
		t.Fatalf("label selector: %d objects, %v; want 50", len(sel), err)
	}
}

// keptShare returns a store that held n objects and kept the first keep.
func keptShare(t *testing.T, n, keep int) *Store[*metav1.ObjectMeta] {
	t.Helper()
	s := NewStore(StoreOptions[*metav1.ObjectMeta]{})
	for i := range n {
		if err := s.Add(&metav1.ObjectMeta{Namespace: "ns", Name: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	for i := keep; i < n; i++ {
		if err := s.Delete(&metav1.ObjectMeta{Namespace: "ns", Name: strconv.Itoa(i)}); err != nil {
			t.Fatal(err)
		}
	}
	return s
}

// TestStoreShrinksToItsShare: a store that keeps 40 % of its objects (a
// replica's share after the ring grows from one to three) gives back the
// room of the rest, keeping at most a third more than it holds.
func TestStoreShrinksToItsShare(t *testing.T) {
	const n, keep = 1000, 400
	s := keptShare(t, n, keep)
	if got := len(s.st.slots); got > keep*4/3+1 {
		t.Errorf("%d slots for %d objects after deleting %d: the store kept more than a third extra", got, keep, n-keep)
	}
	if got := len(s.List()); got != keep {
		t.Fatalf("List: %d objects, want %d", got, keep)
	}
}

// TestStoreCompact: compact gives back all the room of deleted objects
// (shrink leaves up to a third), and the store still answers reads.
func TestStoreCompact(t *testing.T) {
	const keep = 400
	s := keptShare(t, 1000, keep)
	if len(s.st.slots) == keep {
		t.Fatal("the test needs a store with room left after its deletes")
	}
	s.compact()
	if got := len(s.st.slots); got != keep {
		t.Errorf("%d slots for %d objects after compact", got, keep)
	}
	for i := range keep {
		if _, ok := s.Get("ns/" + strconv.Itoa(i)); !ok {
			t.Fatalf("object %d lost by compact", i)
		}
	}
	if got := len(s.List()); got != keep {
		t.Fatalf("List: %d objects, want %d", got, keep)
	}
}
