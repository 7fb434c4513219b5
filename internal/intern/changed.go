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

// ChangedIn is Changed for a write of w, an object to be written under
// the key of c, its cached version: it reports where c holds a part
// changed in place when w holds the same value at the same place, that
// is when w, a copy of c made after the change, say, would send the
// change. A w that holds a value of its own there (a new label map) is
// not reported. If w is not of c's type, it reports what Changed(c)
// does.
func (t *Table) ChangedIn(c, w reflect.Value) (path string, changed bool) {
	if t.Len() == 0 || !c.IsValid() || !holdsRefs(c.Type()) {
		return "", false
	}
	var at []string
	if !w.IsValid() || w.Type() != c.Type() {
		changed = t.changed(c, &at, 0)
	} else {
		changed = t.changedIn(c, w, &at, 0)
	}
	if !changed {
		return "", false
	}
	var b strings.Builder
	for i := len(at) - 1; i >= 0; i-- {
		b.WriteString(at[i])
	}
	return b.String(), true
}

// changedIn is changed for c, walking w, a value of c's type, alongside:
// a changed part of c counts only if w holds an equal value (by
// fingerprint) at its place.
func (t *Table) changedIn(c, w reflect.Value, at *[]string, depth int) bool {
	if depth > sumDepth {
		return false
	}
	carried := func(pt part, cv reflect.Value) bool {
		now := uint32(Sum(cv))
		return now != pt.sum && uint32(Sum(w)) == now
	}
	switch c.Kind() {
	case reflect.Map:
		if c.Len() == 0 || w.Len() == 0 {
			return false
		}
		if pt, ok := t.part(c.UnsafePointer()); ok {
			return carried(pt, c)
		}
		if !holdsRefs(c.Type().Elem()) {
			return false
		}
		it := c.MapRange()
		for it.Next() {
			if wv := w.MapIndex(it.Key()); wv.IsValid() && t.changedIn(it.Value(), wv, at, depth+1) {
				*at = append(*at, "["+mapKey(it.Key())+"]")
				return true
			}
		}
	case reflect.Slice, reflect.Array:
		if c.Len() == 0 || w.Len() == 0 {
			return false
		}
		if c.Kind() == reflect.Slice {
			if pt, ok := t.part(c.UnsafePointer()); ok {
				// Changed as put, whatever c's length now; carried if w
				// holds what c shows.
				if uint32(Sum(reflect.SliceAt(c.Type().Elem(), c.UnsafePointer(), int(pt.n)))) == pt.sum {
					return false
				}
				return uint32(Sum(w)) == uint32(Sum(c))
			}
		}
		if !holdsRefs(c.Type().Elem()) {
			return false
		}
		for i := range min(c.Len(), w.Len()) {
			if t.changedIn(c.Index(i), w.Index(i), at, depth+1) {
				*at = append(*at, "["+strconv.Itoa(i)+"]")
				return true
			}
		}
	case reflect.Pointer:
		if c.IsNil() || w.IsNil() {
			return false
		}
		if pt, ok := t.part(c.UnsafePointer()); ok {
			return carried(pt, c)
		}
		return t.changedIn(c.Elem(), w.Elem(), at, depth+1)
	case reflect.Interface:
		if c.IsNil() || w.IsNil() || c.Elem().Type() != w.Elem().Type() {
			return false
		}
		return t.changedIn(c.Elem(), w.Elem(), at, depth+1)
	case reflect.Struct:
		for _, i := range refFields(c.Type()) {
			if t.changedIn(c.Field(i), w.Field(i), at, depth+1) {
				*at = append(*at, "."+c.Type().Field(i).Name)
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
