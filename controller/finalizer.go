package controller

import (
	"reflect"
	"slices"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// AddFinalizer adds the finalizer name to obj's metadata.finalizers, unless
// it is there already, and reports whether obj changed. It only changes obj
// in memory: the caller must write obj to the server (Update, or a patch of
// metadata.finalizers) for the finalizer to take effect, and should do so
// before creating anything the finalizer is meant to clean up.
//
// A finalizer turns deletion into an update: the server sets
// metadata.deletionTimestamp and keeps the object until every finalizer is
// removed (see [RemoveFinalizer]).
//
// The slice obj held before is not modified, so obj may have been copied
// shallowly from a shared object. An empty name and a nil obj are ignored
// (false); the server rejects names that are not qualified names such as
// "example.com/cleanup".
func AddFinalizer(obj metav1.Object, name string) (changed bool) {
	if isNil(obj) || name == "" {
		return false
	}
	fs := obj.GetFinalizers()
	if slices.Contains(fs, name) {
		return false
	}
	obj.SetFinalizers(append(slices.Clip(fs), name))
	return true
}

// RemoveFinalizer removes every occurrence of the finalizer name from obj's
// metadata.finalizers and reports whether obj changed. It only changes obj
// in memory: the caller must write obj to the server, typically once the
// clean-up the finalizer stood for is done; the server deletes an object
// that has a deletionTimestamp as soon as its last finalizer is gone.
//
// The slice obj held before is not modified. A nil obj is ignored (false).
func RemoveFinalizer(obj metav1.Object, name string) (changed bool) {
	if isNil(obj) {
		return false
	}
	fs := obj.GetFinalizers()
	if !slices.Contains(fs, name) {
		return false
	}
	kept := make([]string, 0, len(fs)-1)
	for _, f := range fs {
		if f != name {
			kept = append(kept, f)
		}
	}
	if len(kept) == 0 {
		kept = nil
	}
	obj.SetFinalizers(kept)
	return true
}

// HasFinalizer reports whether obj's metadata.finalizers holds name. A nil
// obj has none.
func HasFinalizer(obj metav1.Object, name string) bool {
	if isNil(obj) {
		return false
	}
	return slices.Contains(obj.GetFinalizers(), name)
}

// isNil reports whether obj is nil, or a nil pointer in an interface, whose
// methods would panic.
func isNil(obj any) bool {
	if obj == nil {
		return true
	}
	v := reflect.ValueOf(obj)
	switch v.Kind() {
	case reflect.Pointer, reflect.Map, reflect.Slice, reflect.Interface, reflect.Func, reflect.Chan:
		return v.IsNil()
	}
	return false
}
