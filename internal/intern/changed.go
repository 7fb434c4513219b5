package intern

import (
	"reflect"
	"strconv"
	"strings"
	"sync"
	"unsafe"
)

// Changed looks through v (an object about to be written, say) for values
// that t holds, and reports the first whose fingerprint differs from the
// one it had when it was put: a value shared by cached objects that
// someone changed in place. It returns the path to that value within v
// (".Spec.Containers", `["spec"]["template"]`). Parts v holds of its own
// are looked through; a part found unchanged is not, since its
// fingerprint covers everything below it. The values are read, never
// changed; a value changed while Changed runs makes a data race.
func (t *Table) Changed(v reflect.Value) (path string, changed bool) {
	if t.Len() == 0 || !v.IsValid() || !holdsRefs(v.Type()) {
		return "", false
	}
	var at []string
	if !t.changed(v, &at, 0) {
		return "", false
	}
	var b strings.Builder
	for i := len(at) - 1; i >= 0; i-- {
		b.WriteString(at[i])
	}
	return b.String(), true
}

// changed reports whether v holds a changed part; if so, at gets the
// steps to it, innermost first.
func (t *Table) changed(v reflect.Value, at *[]string, depth int) bool {
	if depth > sumDepth {
		return false
	}
	switch v.Kind() {
	case reflect.Map:
		if v.Len() == 0 {
			return false
		}
		if pt, ok := t.part(v.UnsafePointer()); ok {
			return uint32(Sum(v)) != pt.sum
		}
		if !holdsRefs(v.Type().Elem()) {
			return false
		}
		it := v.MapRange()
		for it.Next() {
			if t.changed(it.Value(), at, depth+1) {
				*at = append(*at, "["+mapKey(it.Key())+"]")
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 {
			return false
		}
		if v.Kind() == reflect.Slice {
			if pt, ok := t.part(v.UnsafePointer()); ok {
				// The array as it was put, whatever v's length now.
				return uint32(Sum(reflect.SliceAt(v.Type().Elem(), v.UnsafePointer(), int(pt.n)))) != pt.sum
			}
		}
		if !holdsRefs(v.Type().Elem()) {
			return false
		}
		for i := range v.Len() {
			if t.changed(v.Index(i), at, depth+1) {
				*at = append(*at, "["+strconv.Itoa(i)+"]")
				return true
			}
		}
	case reflect.Pointer:
		if v.IsNil() {
			return false
		}
		if pt, ok := t.part(v.UnsafePointer()); ok {
			return uint32(Sum(v)) != pt.sum
		}
		return t.changed(v.Elem(), at, depth+1)
	case reflect.Interface:
		if v.IsNil() {
			return false
		}
		return t.changed(v.Elem(), at, depth+1)
	case reflect.Struct:
		for _, i := range refFields(v.Type()) {
			if t.changed(v.Field(i), at, depth+1) {
				*at = append(*at, "."+v.Type().Field(i).Name)
				return true
			}
		}
	}
	return false
}

// part returns what t knows of the value at p, if t holds it.
func (t *Table) part(p unsafe.Pointer) (part, bool) {
	ps := t.partShard(uintptr(p))
	ps.mu.Lock()
	pt, ok := ps.m[uintptr(p)]
	ps.mu.Unlock()
	if !ok || unsafe.Pointer(pt.w.Value()) != p {
		return part{}, false // none, or one collected whose address p reuses
	}
	return pt, true
}

func mapKey(k reflect.Value) string {
	if k.Kind() == reflect.String {
		return strconv.Quote(k.String())
	}
	return "?"
}

var (
	refTypes      sync.Map // reflect.Type → bool
	refFieldLists sync.Map // reflect.Type → []int
)

// refFields returns the indexes of the fields of t, a struct type, that
// can hold references (see holdsRefs).
func refFields(t reflect.Type) []int {
	if f, ok := refFieldLists.Load(t); ok {
		return f.([]int)
	}
	var f []int
	for i := range t.NumField() {
		if holdsRefs(t.Field(i).Type) {
			f = append(f, i)
		}
	}
	refFieldLists.Store(t, f)
	return f
}

// holdsRefs reports whether a value of type t can hold a map, a slice or
// a pointer: the parts a table holds. (Strings are never changed in
// place.)
func holdsRefs(t reflect.Type) bool {
	if r, ok := refTypes.Load(t); ok {
		return r.(bool)
	}
	r := holdsRefsOf(t, map[reflect.Type]bool{})
	refTypes.Store(t, r)
	return r
}

func holdsRefsOf(t reflect.Type, seen map[reflect.Type]bool) bool {
	if seen[t] {
		return false // a cycle: the answer comes from another path
	}
	seen[t] = true
	switch t.Kind() {
	case reflect.Map, reflect.Slice, reflect.Pointer, reflect.Interface:
		return true
	case reflect.Array:
		return holdsRefsOf(t.Elem(), seen)
	case reflect.Struct:
		for i := range t.NumField() {
			if holdsRefsOf(t.Field(i).Type, seen) {
				return true
			}
		}
	}
	return false
}
