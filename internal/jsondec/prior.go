package jsondec

import (
	"bytes"
	"encoding/json"
	"math"
	"reflect"
	"strconv"
	"strings"
	"unicode/utf8"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/intstr"
)

// A cache that holds an object's previous version hands it to the decoder
// (intern.Options.Prior). The parts of the new version whose text decodes
// to what the previous version holds are taken from it instead of being
// decoded again, so that a relist, in which every object comes back with
// one field changed, makes garbage of the changed parts only. Both
// versions are a cache's, and immutable, so sharing their parts is safe.

// managedFielder is an object with managed fields: a typed Prior whose
// blobs a new version may reuse.
type managedFielder interface {
	GetManagedFields() []metav1.ManagedFieldsEntry
}

// priorBlob gives the managed-fields blob field at fp (plan pl), whose
// value starts at p.i, the blob of the object's previous version
// (p.opts.Prior) whose text is the same, if there is one. It reports
// whether it did; when it did not, p.i is where it was.
func (p *parser) priorBlob(pl *tplan, fp unsafe.Pointer, depth int) (bool, error) {
	mf, ok := p.opts.Prior.(managedFielder)
	if !ok || p.opts.Share == nil || p.data[p.i] != '{' {
		return false, nil
	}
	start := p.i
	raw, err := p.skipValue(depth)
	if err != nil {
		return false, err
	}
	for _, e := range mf.GetManagedFields() {
		if e.FieldsV1 == nil || !bytes.Equal(e.FieldsV1.Raw, raw) {
			continue
		}
		if pl.kind == tPtr {
			*(**metav1.FieldsV1)(fp) = e.FieldsV1
		} else {
			*(*metav1.FieldsV1)(fp) = *e.FieldsV1
		}
		return true, nil
	}
	p.i = start
	return false, nil
}

// priorPart gives the shared field f at fp, whose value starts at p.i,
// the previous version's value at prior when the text decodes to it. It
// reports whether it did; when it did not, p.i is where it was.
func (p *parser) priorPart(f *tfield, fp, prior unsafe.Pointer, depth int) (bool, error) {
	if !p.opts.Structs {
		return false, nil
	}
	start := p.i
	raw, err := p.skipValue(depth)
	if err != nil {
		return false, err
	}
	if !sameTyped(raw, f.plan, prior) {
		p.i = start
		return false, nil
	}
	takePrior(f, fp, prior)
	return true, nil
}

// takePrior sets the shared field f at fp to the previous version's value
// at prior.
func takePrior(f *tfield, fp, prior unsafe.Pointer) {
	switch f.share {
	case shareSlice:
		*(*sliceHeader)(fp) = *(*sliceHeader)(prior)
	case sharePtr, shareMap:
		*(*unsafe.Pointer)(fp) = *(*unsafe.Pointer)(prior)
	case shareBlob:
		if f.plan.kind == tPtr {
			*(**metav1.FieldsV1)(fp) = *(**metav1.FieldsV1)(prior)
		} else {
			*(*metav1.FieldsV1)(fp) = *(*metav1.FieldsV1)(prior)
		}
	}
}

// unstructuredContent is an unstructured Prior (*unstructured.Unstructured).
type unstructuredContent interface {
	UnstructuredContent() map[string]any
}

// priorObject returns the unstructured content of o.Prior, or nil.
func priorObject(prior any) map[string]any {
	switch v := prior.(type) {
	case map[string]any:
		return v
	case unstructuredContent:
		return v.UnstructuredContent()
	}
	return nil
}

// priorElem parses the array element at p.i, whose previous version is
// prior: an object or array whose text decodes to prior is prior.
func (p *parser) priorElem(prior any, depth int) (any, error) {
	p.skipSpace()
	switch prior.(type) {
	case map[string]any, []any:
		if p.i < len(p.data) && (p.data[p.i] == '{' || p.data[p.i] == '[') {
			start := p.i
			raw, err := p.skipValue(depth)
			if err != nil {
				return nil, err
			}
			if sameJSON(raw, prior) {
				return prior, nil
			}
			p.i = start
		}
	}
	p.prior = prior // for the parts inside
	v, err := p.value(depth)
	p.prior = nil
	return v, err
}

// sameJSON reports whether the JSON text b, one well-formed value, decodes
// (as this package decodes unstructured objects) to a value deep-equal to
// v. It allocates nothing, and answers false where telling would take a
// decode: strings with escapes, for one.
func sameJSON(b []byte, v any) bool {
	c := comparer{b: b}
	if !c.value(v) {
		return false
	}
	c.space()
	return c.i == len(c.b)
}

type comparer struct {
	b []byte
	i int
}

func (c *comparer) space() {
	for c.i < len(c.b) && (c.b[c.i] == ' ' || c.b[c.i] == '\t' || c.b[c.i] == '\n' || c.b[c.i] == '\r') {
		c.i++
	}
}

// next consumes the byte want, after white space, and reports whether it
// was there.
func (c *comparer) next(want byte) bool {
	c.space()
	if c.i < len(c.b) && c.b[c.i] == want {
		c.i++
		return true
	}
	return false
}

func (c *comparer) value(v any) bool {
	c.space()
	if c.i >= len(c.b) {
		return false
	}
	switch c.b[c.i] {
	case '{':
		m, ok := v.(map[string]any)
		return ok && c.object(m)
	case '[':
		a, ok := v.([]any)
		return ok && c.array(a)
	case '"':
		s, ok := v.(string)
		if !ok {
			return false
		}
		t, ok := c.str()
		return ok && t == s
	case 't':
		return c.literal("true") && v == true
	case 'f':
		return c.literal("false") && v == false
	case 'n':
		return c.literal("null") && v == nil
	default:
		return c.number(v)
	}
}

func (c *comparer) object(m map[string]any) bool {
	c.i++ // '{'
	if c.next('}') {
		return len(m) == 0
	}
	// Every key of the text is in m, and there are as many: the same
	// keys, unless the text has one twice. Keys in order cannot repeat;
	// out of order, the first 32 are kept to look for repeats in.
	var seen [32]string
	var prev string
	sorted := true
	n := 0
	for {
		c.space()
		k, ok := c.str()
		if !ok || !c.next(':') {
			return false
		}
		if n > 0 && k <= prev {
			sorted = false
		}
		prev = k
		if !sorted {
			if n >= len(seen) {
				return false
			}
			for _, s := range seen[:n] {
				if s == k {
					return false
				}
			}
		}
		if n < len(seen) {
			seen[n] = k
		}
		v, ok := m[k]
		if !ok || !c.value(v) {
			return false
		}
		n++
		if c.next('}') {
			return n == len(m)
		}
		if !c.next(',') {
			return false
		}
	}
}

func (c *comparer) array(a []any) bool {
	c.i++ // '['
	if c.next(']') {
		return len(a) == 0
	}
	for n := 0; ; n++ {
		if n >= len(a) || !c.value(a[n]) {
			return false
		}
		if c.next(']') {
			return n+1 == len(a)
		}
		if !c.next(',') {
			return false
		}
	}
}

// str returns the string at c.i, a view of the text, when it has no
// escapes and is valid UTF-8 (so that it decodes to its own bytes).
func (c *comparer) str() (string, bool) {
	if c.i >= len(c.b) || c.b[c.i] != '"' {
		return "", false
	}
	start := c.i + 1
	ascii := true
	for j := start; j < len(c.b); j++ {
		switch ch := c.b[j]; {
		case ch == '"':
			s := c.b[start:j]
			if !ascii && !utf8.Valid(s) {
				return "", false
			}
			c.i = j + 1
			return unsafe.String(unsafe.SliceData(s), len(s)), true
		case ch == '\\' || ch < 0x20:
			return "", false
		case ch >= utf8.RuneSelf:
			ascii = false
		}
	}
	return "", false
}

func (c *comparer) literal(lit string) bool {
	if len(c.b)-c.i < len(lit) || string(c.b[c.i:c.i+len(lit)]) != lit {
		return false
	}
	c.i += len(lit)
	return true
}

// number compares the number at c.i with v as parser.number decodes it:
// an int64 when it has no '.' and fits, else a float64.
func (c *comparer) number(v any) bool {
	start := c.i
	for c.i < len(c.b) {
		ch := c.b[c.i]
		if ch >= '0' && ch <= '9' || ch == '-' || ch == '+' || ch == '.' || ch == 'e' || ch == 'E' {
			c.i++
			continue
		}
		break
	}
	s := unsafe.String(unsafe.SliceData(c.b[start:c.i]), c.i-start)
	if s == "" {
		return false
	}
	if bytes.IndexByte(c.b[start:c.i], '.') < 0 {
		if n, err := strconv.ParseInt(s, 10, 64); err == nil {
			w, ok := v.(int64)
			return ok && w == n
		}
	}
	f, err := strconv.ParseFloat(s, 64)
	w, ok := v.(float64)
	return err == nil && ok && math.Float64bits(w) == math.Float64bits(f)
}

// sameTyped reports whether the JSON text b, one well-formed value, decodes
// (as into does, into a zero value of plan pl) to a value deep-equal to
// the one at ptr. It allocates little (a value of a type with its own
// UnmarshalJSON is decoded to be compared), and answers false where
// telling would take a decode: strings with escapes, base64 bytes.
func sameTyped(b []byte, pl *tplan, ptr unsafe.Pointer) bool {
	c := comparer{b: b}
	if !c.typed(pl, ptr, 0) {
		return false
	}
	c.space()
	return c.i == len(c.b)
}

func (c *comparer) typed(pl *tplan, ptr unsafe.Pointer, depth int) bool {
	c.space()
	if c.i >= len(c.b) || depth >= maxDepth || pl.failed != nil {
		return false
	}
	ch := c.b[c.i]
	if ch == 'n' && pl.kind != tUnmarshaler && pl.kind != tTime {
		// null leaves a fresh value zero (into sets nil, or leaves it).
		return c.literal("null") && reflect.NewAt(pl.typ, ptr).Elem().IsZero()
	}
	switch pl.kind {
	case tString:
		s, ok := c.str()
		return ok && s == *(*string)(ptr)
	case tBool:
		switch ch {
		case 't':
			return c.literal("true") && *(*bool)(ptr)
		case 'f':
			return c.literal("false") && !*(*bool)(ptr)
		}
		return false
	case tInt, tUint, tFloat:
		return c.typedNumber(pl, ptr)
	case tIface:
		start := c.i
		if !c.skip() {
			return false
		}
		return sameJSON(c.b[start:c.i], *(*any)(ptr))
	case tPtr:
		pp := *(*unsafe.Pointer)(ptr)
		return pp != nil && c.typed(pl.elem, pp, depth+1)
	case tSlice:
		return ch == '[' && c.typedSlice(pl, ptr, depth)
	case tMap:
		return ch == '{' && c.typedMap(pl, ptr, depth)
	case tStruct:
		return ch == '{' && c.typedStruct(pl, ptr, depth)
	case tUnmarshaler:
		start := c.i
		if !c.skip() {
			return false
		}
		raw := c.b[start:c.i]
		switch pl.typ {
		case fieldsV1Type:
			return bytes.Equal(raw, (*metav1.FieldsV1)(ptr).Raw)
		case quantityType:
			return sameQuantity(raw, *(*resource.Quantity)(ptr))
		case intOrStringType:
			return sameIntOrString(raw, *(*intstr.IntOrString)(ptr))
		}
		// A Quantity or an IntOrString: decoded (a small value) and
		// compared. Equal values decode alike, so DeepEqual is exact.
		v := reflect.New(pl.typ)
		if v.Interface().(json.Unmarshaler).UnmarshalJSON(raw) != nil {
			return false
		}
		return reflect.DeepEqual(v.Elem().Interface(), reflect.NewAt(pl.typ, ptr).Elem().Interface())
	}
	return false // tBytes (base64), tTime: not told
}

func (c *comparer) typedNumber(pl *tplan, ptr unsafe.Pointer) bool {
	start := c.i
	for c.i < len(c.b) && (c.b[c.i] >= '0' && c.b[c.i] <= '9' || strings.IndexByte("-+.eE", c.b[c.i]) >= 0) {
		c.i++
	}
	s := unsafe.String(unsafe.SliceData(c.b[start:c.i]), c.i-start)
	var word [8]byte // the number as setNumber would store it
	if setNumber(pl, unsafe.Pointer(&word), s, start) != nil {
		return false
	}
	return string(word[:pl.size]) == unsafe.String((*byte)(ptr), pl.size)
}

func (c *comparer) typedSlice(pl *tplan, ptr unsafe.Pointer, depth int) bool {
	h := (*sliceHeader)(ptr)
	c.i++ // '['
	if c.next(']') {
		return h.len == 0 && h.data != nil // into makes an empty slice, not nil
	}
	esize := pl.elem.typ.Size()
	for n := 0; ; n++ {
		if n >= h.len || !c.typed(pl.elem, unsafe.Add(h.data, uintptr(n)*esize), depth+1) {
			return false
		}
		if c.next(']') {
			return n+1 == h.len
		}
		if !c.next(',') {
			return false
		}
	}
}

func (c *comparer) typedMap(pl *tplan, ptr unsafe.Pointer, depth int) bool {
	if *(*unsafe.Pointer)(ptr) == nil {
		return false // into makes a map even for {}
	}
	m := reflect.NewAt(pl.typ, ptr).Elem()
	c.i++ // '{'
	if c.next('}') {
		return m.Len() == 0
	}
	n := 0
	for {
		c.space()
		k, ok := c.str()
		if !ok || !c.next(':') {
			return false
		}
		if pl.elem.typ == quantityType {
			// A resource list: its keys are of string kind, which
			// map[string]Quantity shares the layout and hash of.
			q, ok := (*(*map[string]resource.Quantity)(ptr))[k]
			if !ok {
				return false
			}
			start := c.i
			if !c.skip() || !sameQuantity(c.b[start:c.i], q) {
				return false
			}
		} else if pl.strMap {
			s, ok := (*(*map[string]string)(ptr))[k]
			if !ok {
				return false
			}
			c.space()
			if c.i < len(c.b) && c.b[c.i] == 'n' {
				ok = c.literal("null") && s == ""
			} else {
				var t string
				t, ok = c.str()
				ok = ok && t == s
			}
			if !ok {
				return false
			}
		} else {
			var v unsafe.Pointer
			e := m.MapIndex(reflect.NewAt(pl.typ.Key(), unsafe.Pointer(&k)).Elem())
			if !e.IsValid() {
				return false
			}
			if !e.CanAddr() {
				a := reflect.New(e.Type()).Elem()
				a.Set(e)
				e = a
			}
			v = e.Addr().UnsafePointer()
			if !c.typed(pl.elem, v, depth+1) {
				return false
			}
		}
		n++
		if c.next('}') {
			return n == m.Len() // a key written twice counts twice: not the same
		}
		if !c.next(',') {
			return false
		}
	}
}

// typedStruct compares a JSON object with the struct at ptr: each known
// key's value with its field, and the fields no key names with zero. A
// key written twice counts twice, so that the counts then differ.
func (c *comparer) typedStruct(pl *tplan, ptr unsafe.Pointer, depth int) bool {
	c.i++    // '{'
	set := 0 // keys whose field is not zero
	if !c.next('}') {
		for {
			c.space()
			k, ok := c.str()
			if !ok || !c.next(':') {
				return false
			}
			if f, ok := pl.fields[k]; ok {
				fp := unsafe.Add(ptr, f.off)
				if !c.typed(f.plan, fp, depth+1) {
					return false
				}
				if !reflect.NewAt(f.plan.typ, fp).Elem().IsZero() {
					set++
				}
			} else if !c.skip() {
				return false
			}
			if c.next('}') {
				break
			}
			if !c.next(',') {
				return false
			}
		}
	}
	for _, f := range pl.fields {
		if !reflect.NewAt(f.plan.typ, unsafe.Add(ptr, f.off)).Elem().IsZero() {
			set--
		}
	}
	return set == 0
}

// skip passes over one well-formed value.
func (c *comparer) skip() bool {
	p := parser{data: c.b, i: c.i}
	if _, err := p.skipValue(0); err != nil {
		return false
	}
	c.i = p.i
	return true
}

var intOrStringType = reflect.TypeFor[intstr.IntOrString]()

// sameQuantity reports whether the JSON text b decodes to q, as
// Quantity.UnmarshalJSON decodes it, without allocating: only quoted
// quantities without escapes are told.
func sameQuantity(b []byte, q resource.Quantity) bool {
	c := comparer{b: b}
	s, ok := c.str()
	if !ok || c.i != len(b) {
		return false
	}
	got, err := resource.ParseQuantity(strings.TrimSpace(s))
	// Both come from ParseQuantity of the same text; one that needed an
	// inf.Dec holds its own, so they differ, and the part is decoded.
	return err == nil && got == q
}

// sameIntOrString reports whether the JSON text b decodes to v, as
// IntOrString.UnmarshalJSON decodes it.
func sameIntOrString(b []byte, v intstr.IntOrString) bool {
	c := comparer{b: b}
	if len(b) > 0 && b[0] == '"' {
		s, ok := c.str()
		return ok && c.i == len(b) && v.Type == intstr.String && v.StrVal == s && v.IntVal == 0
	}
	n, err := strconv.ParseInt(unsafe.String(unsafe.SliceData(b), len(b)), 10, 32)
	return err == nil && v.Type == intstr.Int && v.IntVal == int32(n) && v.StrVal == ""
}

// sameString reports whether the value at p.i is a string written exactly
// as old, without escapes, and if so moves past it: the value is then old,
// and the previous version's string serves instead of a new copy. An old
// string that would need escapes, or is empty, is never the same.
func (p *parser) sameString(old string) bool {
	p.skipSpace()
	end := p.i + 1 + len(old)
	if old == "" || end >= len(p.data) || p.data[p.i] != '"' || p.data[end] != '"' || string(p.data[p.i+1:end]) != old {
		return false
	}
	ascii := true
	for i := 0; i < len(old); i++ {
		switch c := old[i]; {
		case c == '"' || c == '\\' || c < 0x20:
			return false
		case c >= utf8.RuneSelf:
			ascii = false
		}
	}
	if !ascii && !utf8.ValidString(old) {
		return false
	}
	p.i = end + 1
	return true
}
