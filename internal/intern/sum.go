package intern

import (
	"encoding/binary"
	"hash/maphash"
	"math"
	"reflect"
	"unsafe"

	"gopkg.in/inf.v0"
	"k8s.io/apimachinery/pkg/api/resource"
)

// sumSeed seeds the fingerprints of values; like the keys' seeds, it
// differs per process.
var sumSeed = maphash.MakeSeed()

// Sum returns a fingerprint of the value v holds, deep: everything it
// points to counts, map entries in any order. Two values that are equal
// (as reflect.DeepEqual sees them, but a Quantity by its value and
// format, whatever its caches hold) have the same fingerprint, and a
// value changed anywhere almost surely gets another. It is for telling whether a value was changed in place
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
		word(sumMap(v, depth))
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
		if v.CanInterface() {
			sumAny(h, v.Interface(), depth)
			return
		}
		e := v.Elem() // as sumAny does for types it does not know
		h.WriteByte(9)
		h.WriteString(e.Type().String())
		sum(h, e, depth+1)
	case reflect.Struct:
		if v.Type() == quantityType {
			sumQuantity(h, v)
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

// sumMap returns the fingerprints of m's entries, added: the same for
// any order. The maps decoders share most (string maps, resource lists,
// unstructured objects) are read without reflection, which would copy
// every key and value to the heap.
func sumMap(m reflect.Value, depth int) uint64 {
	var all uint64
	var e maphash.Hash
	entry := func() {
		all += e.Sum64()
		e.Reset()
	}
	e.SetSeed(sumSeed)
	t, p := m.Type(), m.UnsafePointer()
	switch {
	case t.Key().Kind() == reflect.String && t.Elem().Kind() == reflect.String:
		for k, x := range *(*map[string]string)(unsafe.Pointer(&p)) {
			e.WriteString(k)
			e.WriteByte(0)
			e.WriteString(x)
			entry()
		}
	case t.Key().Kind() == reflect.String && t.Elem() == quantityType:
		for k, q := range *(*map[string]resource.Quantity)(unsafe.Pointer(&p)) {
			e.WriteString(k)
			e.WriteByte(0)
			writeQuantity(&e, &q)
			entry()
		}
	case t == anyMapType:
		for k, x := range *(*map[string]any)(unsafe.Pointer(&p)) {
			e.WriteString(k)
			e.WriteByte(0)
			sumAny(&e, x, depth+1)
			entry()
		}
	default:
		it := m.MapRange()
		for it.Next() {
			sum(&e, it.Key(), depth+1)
			sum(&e, it.Value(), depth+1)
			entry()
		}
	}
	return all
}

var anyMapType = reflect.TypeFor[map[string]any]()

// sumAny writes x, the value of an interface, with its dynamic type: the
// values of unstructured objects without reflection, anything else with
// it.
func sumAny(h *maphash.Hash, x any, depth int) {
	if depth > sumDepth {
		return
	}
	var b [8]byte
	word := func(tag byte, x uint64) {
		h.WriteByte(tag)
		binary.LittleEndian.PutUint64(b[:], x)
		h.Write(b[:])
	}
	switch x := x.(type) {
	case nil:
		h.WriteByte(0)
	case string:
		word(1, uint64(len(x)))
		h.WriteString(x)
	case int64:
		word(2, uint64(x))
	case float64:
		word(3, math.Float64bits(x))
	case bool:
		if x {
			word(4, 1)
		} else {
			word(4, 0)
		}
	case map[string]any:
		if x == nil {
			h.WriteByte(5)
			return
		}
		word(6, uint64(len(x)))
		word(6, sumMap(reflect.ValueOf(x), depth+1))
	case []any:
		if x == nil {
			h.WriteByte(7)
			return
		}
		word(8, uint64(len(x)))
		for _, y := range x {
			sumAny(h, y, depth+1)
		}
	default:
		v := reflect.ValueOf(x)
		h.WriteByte(9)
		h.WriteString(v.Type().String())
		sum(h, v, depth+1)
	}
}

// writeQuantity writes q's value and format: not its caches (String fills
// one in place), and the same value whether it is held as an integer or,
// after AsDec, as a decimal, so that reading a Quantity never counts as a
// change.
func writeQuantity(h *maphash.Hash, q *resource.Quantity) {
	if !quantityLayoutOK {
		c := *q // a copy: its caches are its own
		h.WriteString(c.String())
		return
	}
	l := (*quantityLayout)(unsafe.Pointer(q))
	h.WriteString(l.format)
	h.WriteByte(0)
	if l.dec == nil {
		writeScaled(h, l.value, int64(l.scale))
		return
	}
	u := l.dec.UnscaledBig()
	if u.IsInt64() {
		writeScaled(h, u.Int64(), -int64(l.dec.Scale()))
		return
	}
	var b [8]byte
	h.WriteByte(2)
	binary.LittleEndian.PutUint64(b[:], uint64(l.dec.Scale()))
	h.Write(b[:])
	h.WriteByte(byte(u.Sign() + 1))
	for _, w := range u.Bits() {
		binary.LittleEndian.PutUint64(b[:], uint64(w))
		h.Write(b[:])
	}
}

// writeScaled writes value×10^scale, the same for every way of writing
// it (10×10^0 and 1×10^1).
func writeScaled(h *maphash.Hash, value, scale int64) {
	for value != 0 && value%10 == 0 {
		value /= 10
		scale++
	}
	if value == 0 {
		scale = 0
	}
	var b [17]byte
	b[0] = 1
	binary.LittleEndian.PutUint64(b[1:], uint64(value))
	binary.LittleEndian.PutUint64(b[9:], uint64(scale))
	h.Write(b[:])
}

// quantityLayout is resource.Quantity's memory, read without reflection
// or copies when quantityLayoutOK says it matches.
type quantityLayout struct {
	value  int64 // i.value
	scale  int32 // i.scale
	dec    *inf.Dec
	s      string
	format string
}

var quantityLayoutOK = func() bool {
	t := quantityType
	want := reflect.TypeFor[quantityLayout]()
	if t.Size() != want.Size() || t.NumField() != 4 {
		return false
	}
	i, d, str, f := t.Field(0), t.Field(1), t.Field(2), t.Field(3)
	return i.Name == "i" && i.Type.Size() == 16 && i.Type.NumField() == 2 &&
		i.Type.Field(0).Type.Kind() == reflect.Int64 && i.Type.Field(1).Type.Kind() == reflect.Int32 && i.Type.Field(1).Offset == want.Field(1).Offset &&
		d.Name == "d" && d.Offset == want.Field(2).Offset && d.Type.NumField() == 1 && d.Type.Field(0).Type == want.Field(2).Type &&
		str.Name == "s" && str.Offset == want.Field(3).Offset && str.Type.Kind() == reflect.String &&
		f.Name == "Format" && f.Offset == want.Field(4).Offset && f.Type.Kind() == reflect.String
}()

// sumQuantity writes the Quantity v holds (see writeQuantity).
func sumQuantity(h *maphash.Hash, v reflect.Value) {
	if v.CanAddr() {
		writeQuantity(h, (*resource.Quantity)(v.Addr().UnsafePointer()))
		return
	}
	if v.CanInterface() {
		q := v.Interface().(resource.Quantity)
		writeQuantity(h, &q)
		return
	}
	// Unaddressable and read-only, which API types never make: field by
	// field, but for the cached string.
	for i := range v.NumField() {
		if v.Type().Field(i).Name != "s" {
			sum(h, v.Field(i), 0)
		}
	}
}
