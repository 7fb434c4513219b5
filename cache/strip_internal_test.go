package cache

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
)

// TestStripManagedFieldsKeepsSharing checks that an informer knows
// StripManagedFields: given it as a Transform, directly or through a
// factory, it shares as with no Transform and skips managed fields while
// decoding, where any other Transform turns ShareAuto down to blobs.
func TestStripManagedFieldsKeepsSharing(t *testing.T) {
	other := func(p *corev1.Pod) (*corev1.Pod, error) { return p, nil }
	for _, tt := range []struct {
		name       string
		transform  func(*corev1.Pod) (*corev1.Pod, error)
		wantAll    bool // sharing at ShareAll
		wantNoMFld bool // managed fields skipped while decoding
	}{
		{"no transform", nil, true, false},
		{"StripManagedFields", StripManagedFields[*corev1.Pod], true, true},
		{"another transform", other, false, false},
	} {
		t.Run(tt.name, func(t *testing.T) {
			inf := NewInformer[*corev1.Pod](nil, InformerOptions[*corev1.Pod]{Transform: tt.transform})
			if got := inf.decode.Structs; got != tt.wantAll {
				t.Errorf("ShareAll = %v, want %v", got, tt.wantAll)
			}
			if got := inf.decode.SkipManagedFields; got != tt.wantNoMFld {
				t.Errorf("SkipManagedFields = %v, want %v", got, tt.wantNoMFld)
			}
		})
	}
	if stripsOnly(other) || stripsOnly(nil) || stripsOnly(func(o client.Object) (client.Object, error) { return StripManagedFields(o) }) {
		t.Error("stripsOnly took another function for StripManagedFields")
	}
	f := NewFactory(nil, FactoryOptions{Transform: StripManagedFields[client.Object]})
	inf, err := InformerFor[corev1.Pod](f, InformerForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !inf.decode.Structs || !inf.decode.SkipManagedFields {
		t.Errorf("a factory's StripManagedFields: ShareAll %v, SkipManagedFields %v; want both", inf.decode.Structs, inf.decode.SkipManagedFields)
	}
	// The objects still lose their managed fields where the decoders do
	// not see them (a ListerWatcher of the caller's own).
	p := &corev1.Pod{}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl"}}
	if out, _ := inf.transform(p); out.ManagedFields != nil {
		t.Error("the transform no longer strips managed fields")
	}
}
