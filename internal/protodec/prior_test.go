package protodec

import (
	"testing"
	"unsafe"

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
