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
	return t.ChangedIn(v, reflect.Value{})
}

// ChangedIn is Changed for a write of w, an object to be written under
// the key of c, its cached version: it reports where c holds a part
// changed in place when w holds the same value at the same place, that
// is when w, a copy of c made after the change, say, would send the
// change. A w that holds a value of its own there (a new label map) is
// not reported. If w is not of c's type (or is the zero Value), it
// reports what Changed(c) does.
func (t *Table) ChangedIn(c, w reflect.Value) (path string, changed bool) {
	if t.Len() == 0 || !c.IsValid() || !holdsRefs(c.Type()) {
		return "", false
	}
	if w.IsValid() && w.Type() != c.Type() {
		w = reflect.Value{}
	}
	var at []string
	if !t.changed(c, w, &at, 0) {
		return "", false
	}
	var b strings.Builder
	for i := len(at) - 1; i >= 0; i-- {
		b.WriteString(at[i])
	}
	return b.String(), true
}

// changed reports whether v holds a changed part that w, a value of v's
// type walked alongside, holds too (compared by fingerprint); with w the
// zero Value, any changed part counts. If so, at gets the steps to it,
// innermost first.
func (t *Table) changed(v, w reflect.Value, at *[]string, depth int) bool {
	if depth > sumDepth {
		return false
	}
	all := !w.IsValid() // no write to compare with: any change counts
	switch v.Kind() {
	case reflect.Map:
		if v.Len() == 0 || !all && w.Len() == 0 {
			return false
		}
		if pt, ok := t.part(v.UnsafePointer()); ok {
			return carried(pt.sum, v, v, w)
		}
		if !holdsRefs(v.Type().Elem()) {
			return false
		}
		it := v.MapRange()
		for it.Next() {
			var wv reflect.Value
			if !all {
				if wv = w.MapIndex(it.Key()); !wv.IsValid() {
					continue // w has no such entry: nothing of v's to carry
				}
			}
			if t.changed(it.Value(), wv, at, depth+1) {
				*at = append(*at, "["+mapKey(it.Key())+"]")
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if v.Len() == 0 || !all && w.Len() == 0 {
			return false
		}
		if v.Kind() == reflect.Slice {
			if pt, ok := t.part(v.UnsafePointer()); ok {
				// Changed as put, whatever v's length now.
				return carried(pt.sum, reflect.SliceAt(v.Type().Elem(), v.UnsafePointer(), int(pt.n)), v, w)
			}
		}
		if !holdsRefs(v.Type().Elem()) {
			return false
		}
		n := v.Len()
		if !all {
			n = min(n, w.Len())
		}
		for i := range n {
			var wv reflect.Value
			if !all {
				wv = w.Index(i)
			}
			if t.changed(v.Index(i), wv, at, depth+1) {
				*at = append(*at, "["+strconv.Itoa(i)+"]")
				return true
			}
		}
	case reflect.Pointer:
		if v.IsNil() || !all && w.IsNil() {
			return false
		}
		if pt, ok := t.part(v.UnsafePointer()); ok {
			return carried(pt.sum, v, v, w)
		}
		return t.changed(v.Elem(), elem(w), at, depth+1)
	case reflect.Interface:
		if v.IsNil() || !all && (w.IsNil() || w.Elem().Type() != v.Elem().Type()) {
			return false
		}
		return t.changed(v.Elem(), elem(w), at, depth+1)
	case reflect.Struct:
		for _, i := range refFields(v.Type()) {
			var wv reflect.Value
			if !all {
				wv = w.Field(i)
			}
			if t.changed(v.Field(i), wv, at, depth+1) {
				*at = append(*at, "."+v.Type().Field(i).Name)
				return true
			}
		}
	}
	return false
}

// carried reports whether a part of the table changed (asPut, the part as
// it was put, no longer has the fingerprint sum) and w, unless it is the
// zero Value, holds what the part, v, holds now. asPut is v itself,
// except for a slice shortened since it was put.
func carried(sum uint32, asPut, v, w reflect.Value) bool {
	now := uint32(Sum(asPut))
	if now == sum {
		return false
	}
	if !w.IsValid() {
		return true
	}
	if v.Kind() == reflect.Slice && asPut.Len() != v.Len() {
		now = uint32(Sum(v))
	}
	return uint32(Sum(w)) == now
}

// elem is w.Elem(), or the zero Value for the zero Value.
func elem(w reflect.Value) reflect.Value {
	if !w.IsValid() {
		return w
	}
	return w.Elem()
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
