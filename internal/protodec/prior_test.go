package protodec

import (
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// TestPriorBlobs checks that an object decoded with its previous version
// takes the managed-fields blobs whose bytes did not change from it.
func TestPriorBlobs(t *testing.T) {
	old := managedPod("p")
	old.ManagedFields = append(old.ManagedFields, metav1.ManagedFieldsEntry{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app":{}}}}`)}})
	for _, tc := range []struct {
		name  string
		opts  intern.Options
		reuse bool
	}{
		{"all", intern.Options{Share: intern.New(), Structs: true}, true},
		{"bytes", intern.Options{Share: intern.New()}, true},
		{"off", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prior := decodeShared(t, tc.opts, old)
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			next.ManagedFields[1].FieldsV1.Raw = []byte(`{"f:metadata":{"f:labels":{"f:tier":{}}}}`)
			o := tc.opts
			o.Prior = prior
			got := decodeShared(t, o, next) // checks that it decodes to next
			raw := func(p *metav1.ManagedFieldsEntry) *byte { return unsafe.SliceData(p.FieldsV1.Raw) }
			if s := raw(&got.ManagedFields[0]) == raw(&prior.ManagedFields[0]); s != tc.reuse {
				t.Errorf("the unchanged blob is the previous version's: %v, want %v", s, tc.reuse)
			}
			if raw(&got.ManagedFields[1]) == raw(&prior.ManagedFields[1]) {
				t.Error("the changed blob is the previous version's")
			}
			if b := got.ManagedFields[0].FieldsV1.Raw; tc.reuse && cap(b) != len(b) {
				t.Errorf("a blob has room to grow (len %d, cap %d): an append would write into a shared array", len(b), cap(b))
			}
		})
	}
}

// TestPriorParts checks that an object's next version, decoded with the
// previous one as Prior, takes the parts that did not change from it
// rather than putting them in the table, where meeting them a second
// time would otherwise put them: a relist that brings every object back
// changed would add a table entry for each of their parts.
func TestPriorParts(t *testing.T) {
	same := func(a, b unsafe.Pointer) bool { return a != nil && a == b }
	mapPtr := func(m map[string]string) unsafe.Pointer { return *(*unsafe.Pointer)(unsafe.Pointer(&m)) }
	for _, tc := range []struct {
		name  string
		prior bool
	}{{"with the previous version", true}, {"without", false}} {
		t.Run(tc.name, func(t *testing.T) {
			o := intern.Options{Share: intern.New(), Structs: true}
			old := managedPod("p")
			old.UID, old.ResourceVersion = "5f0c6b3a-3e8a-4c1e-9d7a-0b1c2d3e4f50", "1"
			old.Spec.NodeSelector = map[string]string{"zone": "a"}
			prior := decodeShared(t, o, old) // met once: the object's own parts
			if n := o.Share.Len(); n != 0 {
				t.Fatalf("the first version took %d table entries", n)
			}
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			next.Status.PodIP = "10.0.0.2"
			next.Spec.NodeSelector = map[string]string{"zone": "b"} // changed: not the previous version's
			if tc.prior {
				o.Prior = prior
			}
			got := decodeShared(t, o, next)
			for what, s := range map[string]bool{
				"containers":       same(unsafe.Pointer(unsafe.SliceData(got.Spec.Containers)), unsafe.Pointer(unsafe.SliceData(prior.Spec.Containers))),
				"labels":           same(mapPtr(got.Labels), mapPtr(prior.Labels)),
				"security context": same(unsafe.Pointer(got.Spec.SecurityContext), unsafe.Pointer(prior.Spec.SecurityContext)),
			} {
				if s != tc.prior {
					t.Errorf("%s are the previous version's: %v, want %v", what, s, tc.prior)
				}
			}
			if same(mapPtr(got.Spec.NodeSelector), mapPtr(prior.Spec.NodeSelector)) {
				t.Error("the changed node selector is the previous version's")
			}
			// Unchanged strings too, outside the parts and inside them.
			str := func(s string) unsafe.Pointer { return unsafe.Pointer(unsafe.StringData(s)) }
			if s := same(str(string(got.UID)), str(string(prior.UID))) && same(str(string(got.Status.Phase)), str(string(prior.Status.Phase))); s != tc.prior {
				t.Errorf("unchanged strings are the previous version's: %v, want %v", s, tc.prior)
			}
			if same(str(got.Status.PodIP), str(prior.Status.PodIP)) || same(str(got.ResourceVersion), str(prior.ResourceVersion)) {
				t.Error("a changed string is the previous version's")
			}
			if c := got.Spec.Containers; cap(c) != len(c) {
				t.Errorf("containers have room to grow (len %d, cap %d): an append would write into a shared array", len(c), cap(c))
			}
			if n := o.Share.Len(); tc.prior && n != 0 {
				t.Errorf("the next version took %d table entries, want 0", n)
			} else if !tc.prior && n == 0 {
				t.Error("without the previous version, the parts met twice are not in the table")
			}
		})
	}
}

// FuzzPriorDifferential decodes b as a Pod with a's decoding as its
// previous version, after a was met once, so that b's parts are met a
// second time: the decoders must agree on whether b decodes (see agree),
// and the result must be what the generated code decodes b to.
func FuzzPriorDifferential(f *testing.F) {
	p := managedPod("p")
	p.Spec.NodeSelector = map[string]string{"zone": "a"}
	a, _ := p.Marshal()
	p.Labels["app"] = "other"
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "X"})
	p.ResourceVersion = "2"
	b, _ := p.Marshal()
	f.Add(a, b)
	f.Add(a, a)
	f.Add(b, a)
	f.Fuzz(func(t *testing.T, a, b []byte) {
		o := intern.Options{Share: intern.New(), Structs: true}
		var prior, got, want corev1.Pod
		if UnmarshalWith(a, &prior, o) != nil {
			return
		}
		o.Prior = &prior
		gerr := UnmarshalWith(b, &got, o)
		werr := want.Unmarshal(b)
		if agree(t, b, reflect.TypeFor[corev1.Pod](), werr, gerr) && !reflect.DeepEqual(&got, &want) {
			t.Fatalf("with a previous version:\n got %+v\nwant %+v", &got, &want)
		}
	})
}
