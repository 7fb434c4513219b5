package cache

import (
	"runtime"
	"testing"
	"unsafe"
	"weak"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestIndexesKeepNoReplacedObject checks that the store's indexes do not
// keep the memory of an object's strings once a later version has
// replaced it. Decoders put an object's strings in blocks of their own;
// an index keyed with the first version's label value would keep its
// block alive as long as the value stays indexed.
func TestIndexesKeepNoReplacedObject(t *testing.T) {
	// version returns an object whose label key and values (one label
	// held by no other object, one held by two) and custom index value
	// lie in a block of its own, and a weak pointer to that block.
	version := func(name string) (*metav1.ObjectMeta, weak.Pointer[byte]) {
		block := []byte("tier" + "web-" + name + "frontend")
		s := unsafe.String(&block[0], len(block))
		k, v, shared := s[:4], s[4:8+len(name)], s[8+len(name):]
		return &metav1.ObjectMeta{Namespace: "ns", Name: name, Labels: map[string]string{k: v, "shared": shared}}, weak.Make(&block[0])
	}
	s := NewStore(StoreOptions[*metav1.ObjectMeta]{Indexers: Indexers[*metav1.ObjectMeta]{
		"tier": func(o *metav1.ObjectMeta) ([]string, error) { return []string{o.Labels["tier"]}, nil },
	}})
	for _, name := range []string{"a", "b"} {
		first, firstBlock := version(name)
		if err := s.Add(first); err != nil {
			t.Fatal(err)
		}
		next, nextBlock := version(name) // equal labels, in other memory
		next.ResourceVersion = "2"
		if err := s.Update(next); err != nil {
			t.Fatal(err)
		}
		first = nil
		runtime.GC()
		runtime.GC()
		if firstBlock.Value() != nil {
			t.Errorf("%s: the replaced version's strings are still reachable", name)
		}
		if nextBlock.Value() == nil {
			t.Fatalf("%s: the stored version's strings were collected", name) // cannot happen: the store holds it
		}
	}
	// Deleting one of the two holders of "frontend" leaves the value
	// indexed for the other: it must not be keyed by the deleted one's.
	b, _ := s.Get("ns/b")
	_, bBlock := weak.Pointer[byte]{}, weak.Make(unsafe.StringData(b.Labels["shared"]))
	if err := s.Delete(b); err != nil {
		t.Fatal(err)
	}
	b = nil
	runtime.GC()
	runtime.GC()
	if bBlock.Value() != nil {
		t.Error("a deleted object's strings are still reachable")
	}
	if got, err := s.ByIndex("tier", "web-a"); err != nil || len(got) != 1 {
		t.Fatalf("ByIndex(tier, web-a) = %v, %v", got, err)
	}
}
