package jsondec

import (
	"reflect"
	"unsafe"
)

// newArray allocates n zeroed elements of type t. reflect.MakeSlice would
// also allocate a slice header per call; this uses the runtime function
// behind it, which the runtime keeps reachable by linkname for exactly this
// use (see the "hall of shame" note on reflect_unsafe_NewArray in
// runtime/malloc.go).
func newArray(t reflect.Type, n int) unsafe.Pointer {
	return unsafe_NewArray(rtype(t), n)
}

//go:linkname unsafe_NewArray reflect.unsafe_NewArray
//go:noescape
func unsafe_NewArray(typ unsafe.Pointer, n int) unsafe.Pointer

// rtype returns the runtime type descriptor behind a reflect.Type.
func rtype(t reflect.Type) unsafe.Pointer {
	type iface struct{ tab, data unsafe.Pointer }
	return (*iface)(unsafe.Pointer(&t)).data
}

//go:linkname unsafe_New reflect.unsafe_New
//go:noescape
func unsafe_New(typ unsafe.Pointer) unsafe.Pointer
