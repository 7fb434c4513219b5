package intern

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"reflect"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
)

// sumSeed seeds the fingerprints of values; like the keys' seeds, it
// differs per process.
var sumSeed = maphash.MakeSeed()

// Sum returns a fingerprint of the value v holds, deep: everything it
// points to counts, map entries in any order. Two values that are equal
// (as reflect.DeepEqual sees them, a Quantity by its canonical form)
// have the same fingerprint, and a value changed anywhere almost surely
// gets another. It is for telling whether a value was changed in place
// since it was fingerprinted, not a hash for maps.
func Sum(v reflect.Value) uint64 {
	var h maphash.Hash
	h.SetSeed(sumSeed)
	sum(&h, v, 0)
	return h.Sum64()
}

// sumDepth bounds how deep Sum goes: decoded objects are far shallower,
// and a value that points back at itself (which no decoder makes) ends.
const sumDepth = 100

var quantityType = reflect.TypeFor[resource.Quantity]()

func sum(h *maphash.Hash, v reflect.Value, depth int) {
	if depth > sumDepth {
		return
	}
	var b [8]byte
	word := func(x uint64) {
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	switch v.Kind() {
	case reflect.Bool:
		if v.Bool() {
			h.WriteByte(1)
		} else {
			h.WriteByte(0)
		}
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		word(uint64(v.Int()))
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		word(v.Uint())
	case reflect.Float32, reflect.Float64:
		word(math.Float64bits(v.Float()))
	case reflect.Complex64, reflect.Complex128:
		c := v.Complex()
		word(math.Float64bits(real(c)))
		word(math.Float64bits(imag(c)))
	case reflect.String:
		word(uint64(v.Len()))
		h.WriteString(v.String())
	case reflect.Slice:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		h.WriteByte(1)
		word(uint64(v.Len()))
		if v.Type().Elem().Kind() == reflect.Uint8 {
			h.Write(unsafe.Slice((*byte)(v.UnsafePointer()), v.Len()))
			return
		}
		for i := range v.Len() {
			sum(h, v.Index(i), depth+1)
		}
	case reflect.Array:
		for i := range v.Len() {
			sum(h, v.Index(i), depth+1)
		}
	case reflect.Map:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		h.WriteByte(1)
		word(uint64(v.Len()))
		// Entries in any order: the fingerprints of the entries, added.
		var all uint64
		it := v.MapRange()
		for it.Next() {
			var e maphash.Hash
			e.SetSeed(sumSeed)
			sum(&e, it.Key(), depth+1)
			sum(&e, it.Value(), depth+1)
			all += e.Sum64()
		}
		word(all)
	case reflect.Pointer:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		h.WriteByte(1)
		sum(h, v.Elem(), depth+1)
	case reflect.Interface:
		if v.IsNil() {
			h.WriteByte(0)
			return
		}
		e := v.Elem()
		h.WriteByte(1)
		h.WriteString(e.Type().String())
		sum(h, e, depth+1)
	case reflect.Struct:
		if v.Type() == quantityType {
			sumQuantity(h, v, depth)
			return
		}
		for i := range v.NumField() {
			sum(h, v.Field(i), depth+1)
		}
	default: // channels, functions, unsafe pointers: by identity
		if !v.IsNil() {
			word(uint64(uintptr(v.UnsafePointer())))
		}
	}
}

// sumQuantity writes q's canonical form: reading a Quantity (String,
// AsDec) may fill its caches in place without changing its value, and that
// must not count as a change. (A Quantity reached through an unexported
// field, which API types do not have, counts field by field.)
func sumQuantity(h *maphash.Hash, v reflect.Value, depth int) {
	if !v.CanInterface() {
		for i := range v.NumField() {
			sum(h, v.Field(i), depth+1)
		}
		return
	}
	q := v.Interface().(resource.Quantity) // a copy: its caches are its own
	h.WriteString(q.String())
}
