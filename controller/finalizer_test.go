package controller

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

const fin = "example.com/cleanup"

// withFinalizers returns a typed and an unstructured object holding fs.
func withFinalizers(fs ...string) []metav1.Object {
	u := &unstructured.Unstructured{}
	u.SetFinalizers(fs)
	return []metav1.Object{&corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: fs}}, u}
}

func TestAddFinalizer(t *testing.T) {
	tests := []struct {
		name    string
		have    []string
		add     string
		want    []string
		changed bool
	}{
		{"to none", nil, fin, []string{fin}, true},
		{"to others", []string{"a/b"}, fin, []string{"a/b", fin}, true},
		{"already there", []string{fin, "a/b"}, fin, []string{fin, "a/b"}, false},
		{"empty name ignored", []string{"a/b"}, "", []string{"a/b"}, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, obj := range withFinalizers(tt.have...) {
				if got := AddFinalizer(obj, tt.add); got != tt.changed {
					t.Errorf("%T: changed = %v, want %v", obj, got, tt.changed)
				}
				if got := obj.GetFinalizers(); !slices.Equal(got, tt.want) {
					t.Errorf("%T: finalizers = %v, want %v", obj, got, tt.want)
				}
				if !HasFinalizer(obj, fin) && slices.Contains(tt.want, fin) {
					t.Errorf("%T: HasFinalizer = false after adding", obj)
				}
			}
		})
	}
}

func TestAddFinalizerDoesNotWriteSharedSlice(t *testing.T) {
	backing := make([]string, 1, 4) // room to append in place
	backing[0] = "a/b"
	shared := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: backing}}
	cp := *shared // a shallow copy, sharing the slice
	AddFinalizer(&cp, fin)
	AddFinalizer(shared, "x/y")
	if got := cp.Finalizers; !slices.Equal(got, []string{"a/b", fin}) {
		t.Fatalf("copy's finalizers = %v; the shared backing array was written", got)
	}
}

func TestRemoveFinalizer(t *testing.T) {
	tests := []struct {
		name    string
		have    []string
		want    []string
		changed bool
	}{
		{"the only one", []string{fin}, nil, true},
		{"among others", []string{"a/b", fin, "c/d"}, []string{"a/b", "c/d"}, true},
		{"every copy", []string{fin, "a/b", fin}, []string{"a/b"}, true},
		{"absent", []string{"a/b"}, []string{"a/b"}, false},
		{"none", nil, nil, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for _, obj := range withFinalizers(tt.have...) {
				before := slices.Clone(obj.GetFinalizers())
				fs := obj.GetFinalizers()
				if got := RemoveFinalizer(obj, fin); got != tt.changed {
					t.Errorf("%T: changed = %v, want %v", obj, got, tt.changed)
				}
				if got := obj.GetFinalizers(); !slices.Equal(got, tt.want) {
					t.Errorf("%T: finalizers = %v, want %v", obj, got, tt.want)
				}
				if HasFinalizer(obj, fin) {
					t.Errorf("%T: HasFinalizer = true after removing", obj)
				}
				if _, typed := obj.(*corev1.ConfigMap); typed && !slices.Equal(fs, before) {
					t.Errorf("the old slice was modified: %v, was %v", fs, before)
				}
			}
		})
	}
}

func TestHasFinalizer(t *testing.T) {
	tests := []struct {
		name string
		have []string
		want bool
	}{
		{"present", []string{"a/b", fin}, true},
		{"absent", []string{"a/b"}, false},
		{"none", nil, false},
	}
	for _, tt := range tests {
		for _, obj := range withFinalizers(tt.have...) {
			if got := HasFinalizer(obj, fin); got != tt.want {
				t.Errorf("%s, %T: HasFinalizer = %v, want %v", tt.name, obj, got, tt.want)
			}
		}
	}
}

func TestFinalizersNilObject(t *testing.T) {
	var typedNil *corev1.ConfigMap
	for _, obj := range []metav1.Object{nil, typedNil} {
		if AddFinalizer(obj, fin) || RemoveFinalizer(obj, fin) || HasFinalizer(obj, fin) {
			t.Errorf("%T: nil object reported a finalizer change or presence", obj)
		}
	}
}
