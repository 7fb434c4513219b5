package jsondec

import (
	"encoding"
	"encoding/base64"
	"encoding/json"
	"errors"

	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"time"
	"unicode/utf8"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// Typed decoding: JSON into Go structs (the k8s.io/api types, custom
// resource types), planned once per type by reflection and written through
// field offsets, with strings sliced from one copy of the input. The
// semantics are those of sigs.k8s.io/json's UnmarshalCaseSensitivePreserveInts,
// which apimachinery and client-go use: object keys match field names
// exactly (case-sensitive), numbers in interface{} values are int64 when
// they have no '.', and unknown fields are ignored.

var (
	jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()
	textUnmarshalerType = reflect.TypeFor[encoding.TextUnmarshaler]()
	// The timestamps every object has: their UnmarshalJSON goes through
	// encoding/json and allocates each time, so they are parsed here.
	timeType      = reflect.TypeFor[metav1.Time]()
	microTimeType = reflect.TypeFor[metav1.MicroTime]()
)

type tkind uint8

const (
	tString tkind = iota + 1
	tBool
	tInt
	tUint
	tFloat
	tBytes
	tSlice
	tMap
	tPtr
	tStruct
	tIface
	tUnmarshaler // json.Unmarshaler: handed the raw value
	tTime        // metav1.Time or metav1.MicroTime: parsed in place (layout)
)

type tplan struct {
	typ    reflect.Type
	kind   tkind
	size   uintptr
	elem   *tplan             // slice, pointer and map values
	fields map[string]*tfield // struct fields by JSON name
	strMap bool               // map with string-kind keys and values
	// strs names the strings held in a slice's elements or a map's
	// values, and keys those of a map's keys, for Strings' lookup
	// counts (intern.Options.String).
	strs, keys intern.Field
	layout     string // tTime: the time layout
	failed     error
}

type tfield struct {
	off   uintptr
	plan  *tplan
	share shareKind    // how the field's values are shared (share.go)
	stat  intern.Field // names the field for the table's lookup counts
	// strs and keys name the strings in the field's slice or map (the
	// map's values, and its keys), for Strings' lookup counts: the
	// labels of an object and the data of a ConfigMap, say, which are
	// both a map[string]string, are counted apart.
	strs, keys intern.Field
}

// fieldStrings hands a struct field's names for its strings (tfield.strs,
// keys) to the slice or map decoded next: see parser.next.
type fieldStrings struct {
	set        bool
	strs, keys intern.Field
}

// take returns the names of the strings in the slice or map of plan pl
// being decoded: its struct field's, when the field handed them over,
// else pl's own.
func (p *parser) take(pl *tplan) (strs, keys intern.Field) {
	if p.next.set {
		strs, keys = p.next.strs, p.next.keys
		p.next = fieldStrings{}
		return strs, keys
	}
	return pl.strs, pl.keys
}

var tplans sync.Map // reflect.Type → *tplan

// TypedSupported reports whether [Decode] can decode into *T, t being T.
func TypedSupported(t reflect.Type) bool {
	return tplanFor(t).failed == nil
}

func tplanFor(t reflect.Type) *tplan {
	if p, ok := tplans.Load(t); ok {
		return p.(*tplan)
	}
	building := map[reflect.Type]*tplan{}
	p := tbuild(t, building)
	// A failure anywhere below fails the plans that contain it.
	changed := true
	for changed {
		changed = false
		for _, bp := range building {
			if bp.failed != nil {
				continue
			}
			if e := bp.elem; e != nil && e.failed != nil {
				bp.failed, changed = e.failed, true
			}
			for _, f := range bp.fields {
				if f.plan.failed != nil {
					bp.failed, changed = f.plan.failed, true
					break
				}
			}
		}
	}
	for _, bp := range building {
		for _, f := range bp.fields {
			f.share = shareOf(f.plan)
		}
	}
	for bt, bp := range building {
		tplans.LoadOrStore(bt, bp)
	}
	return p
}

func tbuild(t reflect.Type, building map[reflect.Type]*tplan) *tplan {
	if p, ok := building[t]; ok {
		return p
	}
	if p, ok := tplans.Load(t); ok {
		return p.(*tplan)
	}
	p := &tplan{typ: t, size: t.Size()}
	building[t] = p
	pt := reflect.PointerTo(t)
	switch {
	case t == timeType:
		p.kind, p.layout = tTime, time.RFC3339
		return p
	case t == microTimeType:
		p.kind, p.layout = tTime, metav1.RFC3339Micro
		return p
	case t.Kind() != reflect.Pointer && pt.Implements(jsonUnmarshalerType):
		p.kind = tUnmarshaler
		return p
	case t.Kind() != reflect.Pointer && pt.Implements(textUnmarshalerType):
		// encoding/json's handling of TextUnmarshalers (quoted keys,
		// null, numbers) has corners not worth copying: leave such types
		// to it.
		p.failed = fmt.Errorf("jsondec: %v is an encoding.TextUnmarshaler", t)
		return p
	}
	switch t.Kind() {
	case reflect.String:
		p.kind = tString
	case reflect.Bool:
		p.kind = tBool
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		p.kind = tInt
	case reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64, reflect.Uintptr:
		p.kind = tUint
	case reflect.Float32, reflect.Float64:
		p.kind = tFloat
	case reflect.Interface:
		if t.NumMethod() != 0 {
			p.failed = fmt.Errorf("jsondec: non-empty interface %v", t)
		}
		p.kind = tIface
	case reflect.Pointer:
		p.kind = tPtr
		p.elem = tbuild(t.Elem(), building)
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 && !reflect.PointerTo(t.Elem()).Implements(jsonUnmarshalerType) && !reflect.PointerTo(t.Elem()).Implements(textUnmarshalerType) {
			p.kind = tBytes
			p.elem = tbuild(t.Elem(), building)
			break
		}
		p.kind = tSlice
		p.elem = tbuild(t.Elem(), building)
		p.strs = intern.NewField()
	case reflect.Map:
		if t.Key().Kind() != reflect.String || reflect.PointerTo(t.Key()).Implements(textUnmarshalerType) {
			p.failed = fmt.Errorf("jsondec: map key %v", t.Key())
			return p
		}
		p.kind = tMap
		p.elem = tbuild(t.Elem(), building)
		p.strMap = t.Elem().Kind() == reflect.String && p.elem.kind == tString
		p.strs, p.keys = intern.NewField(), intern.NewField()
	case reflect.Struct:
		p.kind = tStruct
		p.fields = map[string]*tfield{}
		if err := addFields(p, t, building); err != nil {
			p.failed = err
		}
	default:
		p.failed = fmt.Errorf("jsondec: unsupported type %v", t)
	}
	return p
}

// addFields adds t's fields, flattening embedded structs breadth-first as
// encoding/json does: a shallower field hides deeper ones of the same
// name. Two fields of one name at the same depth are ambiguous
// (encoding/json drops both unless one is tagged); such types are refused
// and left to encoding/json.
func addFields(p *tplan, t reflect.Type, building map[reflect.Type]*tplan) error {
	type level struct {
		t     reflect.Type
		off   uintptr
		depth int
	}
	depth := map[string]int{}
	queue := []level{{t, 0, 0}}
	for len(queue) > 0 {
		cur := queue[0]
		queue = queue[1:]
		if cur.depth > 8 {
			return fmt.Errorf("jsondec: embedding too deep in %v", p.typ)
		}
		for i := 0; i < cur.t.NumField(); i++ {
			sf := cur.t.Field(i)
			tag := sf.Tag.Get("json")
			if tag == "-" {
				continue
			}
			name, opts, _ := strings.Cut(tag, ",")
			if strings.Contains(","+opts+",", ",string,") {
				return fmt.Errorf("jsondec: %v.%s uses the ,string option", cur.t, sf.Name)
			}
			if sf.Anonymous && name == "" {
				ft := sf.Type
				if ft.Kind() == reflect.Pointer {
					return fmt.Errorf("jsondec: %v embeds a pointer %v", cur.t, ft)
				}
				if ft.Kind() == reflect.Struct {
					queue = append(queue, level{ft, cur.off + sf.Offset, cur.depth + 1})
					continue
				}
			}
			if !sf.IsExported() {
				continue
			}
			if name == "" {
				name = sf.Name
			}
			if d, ok := depth[name]; ok {
				if d == cur.depth {
					return fmt.Errorf("jsondec: %v: ambiguous field %q", p.typ, name)
				}
				continue // a shallower field wins
			}
			depth[name] = cur.depth
			p.fields[name] = &tfield{off: cur.off + sf.Offset, plan: tbuild(sf.Type, building), stat: intern.NewField(), strs: intern.NewField(), keys: intern.NewField()}
		}
	}
	return nil
}

// Decode parses data, one JSON value, into v, a non-nil pointer to a type
// for which [TypedSupported] is true. v should be zero. Strings in the
// result share one copy of data.
//
// Each element of an array of structs directly in the top-level object
// (the Items of a list) gets its own copy, so that keeping one item does
// not keep the whole list's bytes alive.
func Decode(data []byte, v any) error {
	_, err := decode(data, v, intern.Options{})
	return err
}

// DecodeWith is [Decode] with options: identical parts of the objects it
// decodes come from o.Share's table (see [intern.Options]), and o can
// leave managed fields out.
func DecodeWith(data []byte, v any, o intern.Options) error {
	_, err := decode(data, v, o)
	return err
}

// decode is DecodeWith that also reports how many string copies it made.
func decode(data []byte, v any, o intern.Options) (arenas int, err error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return 0, fmt.Errorf("jsondec: need a non-nil pointer, got %T", v)
	}
	pl := tplanFor(rv.Type().Elem())
	if pl.failed != nil {
		return 0, pl.failed
	}
	p := parser{data: data, opts: o, sizer: o.Sizer}
	if o.Prior != nil && o.Structs && o.Share != nil {
		if pv := reflect.ValueOf(o.Prior); pv.Type() == rv.Type() && !pv.IsNil() {
			p.priorPtr = pv.UnsafePointer()
		}
	}
	err = p.into(pl, rv.UnsafePointer(), 0)
	if err == nil {
		err = p.end()
	}
	if errors.Is(err, errUnshare) {
		// A key came twice, and its first value was shared: decoding
		// the second would change it in place. Servers do not write such
		// objects; decode this one again without the table.
		rv.Elem().SetZero()
		p = parser{data: data, opts: intern.Options{SkipManagedFields: o.SkipManagedFields}}
		if err = p.into(pl, rv.UnsafePointer(), 0); err == nil {
			err = p.end()
		}
	}
	if err == nil {
		p.learn()
	}
	return p.arenas, err
}

// TypeError reports a JSON value of the wrong type for its Go destination.
type TypeError struct {
	Value  string // "string", "number 1.5", ...
	Type   reflect.Type
	Offset int
}

func (e *TypeError) Error() string {
	return fmt.Sprintf("jsondec: cannot decode %s into Go value of type %v (offset %d)", e.Value, e.Type, e.Offset)
}

func (p *parser) typeErr(what string, t reflect.Type) error {
	return &TypeError{Value: what, Type: t, Offset: p.i}
}

// skipValue validates and skips one value, returning its bytes.
func (p *parser) skipValue(depth int) ([]byte, error) {
	raw, _, err := p.skipCount(depth)
	return raw, err
}

// skipCount is skipValue that also returns how many elements (of an
// array) or entries (of an object) the value has.
func (p *parser) skipCount(depth int) ([]byte, int, error) {
	p.skipSpace()
	start := p.i
	n, err := p.valueNoAlloc(depth)
	if err != nil {
		return nil, 0, err
	}
	return p.data[start:p.i], n, nil
}

// valueNoAlloc is value without building the result (used to skip). It
// returns the number of elements or entries of an array or object.
func (p *parser) valueNoAlloc(depth int) (int, error) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return 0, p.errf("unexpected end of input")
	}
	switch c := p.data[p.i]; {
	case c == '{' || c == '[':
		if depth >= maxDepth {
			return 0, p.errf("exceeded max depth")
		}
		closer := byte('}')
		if c == '[' {
			closer = ']'
		}
		p.i++
		p.skipSpace()
		if p.i < len(p.data) && p.data[p.i] == closer {
			p.i++
			return 0, nil
		}
		n := 0
		for {
			if c == '{' {
				p.skipSpace()
				if p.i >= len(p.data) || p.data[p.i] != '"' {
					return 0, p.errf("expected a string for an object key")
				}
				if err := p.skipString(); err != nil {
					return 0, err
				}
				p.skipSpace()
				if p.i >= len(p.data) || p.data[p.i] != ':' {
					return 0, p.errf("expected ':' after object key")
				}
				p.i++
			}
			if _, err := p.valueNoAlloc(depth + 1); err != nil {
				return 0, err
			}
			n++
			p.skipSpace()
			if p.i >= len(p.data) {
				return 0, p.errf("unexpected end of input")
			}
			switch p.data[p.i] {
			case ',':
				p.i++
			case closer:
				p.i++
				return n, nil
			default:
				return 0, p.errf("expected ',' or closing bracket")
			}
		}
	case c == '"':
		return 0, p.skipString()
	case c == '-' || c >= '0' && c <= '9':
		return 0, p.scanNumber() // value would box it
	default:
		_, err := p.value(depth)
		return 0, err
	}
}

// skipString validates a string without building it.
func (p *parser) skipString() error {
	p.i++
	for p.i < len(p.data) {
		c := p.data[p.i]
		switch {
		case c == '"':
			p.i++
			return nil
		case c < 0x20:
			return p.errf("invalid control character in string")
		case c == '\\':
			if p.i+1 >= len(p.data) {
				return p.errf("unexpected end of input in string escape")
			}
			switch p.data[p.i+1] {
			case '"', '\\', '/', 'b', 'f', 'n', 'r', 't':
				p.i += 2
			case 'u':
				p.i += 2
				if _, ok := p.hex4(); !ok {
					return p.errf("invalid \\u escape")
				}
			default:
				return p.errf("invalid escape character")
			}
		default:
			p.i++
		}
	}
	return p.errf("unexpected end of input in string")
}

// into decodes the value at p.i into the destination of plan pl at ptr.
func (p *parser) into(pl *tplan, ptr unsafe.Pointer, depth int) error {
	prior := p.priorPtr // the previous version's value here, if known
	p.priorPtr = nil
	p.skipSpace()
	if p.i >= len(p.data) {
		return p.errf("unexpected end of input")
	}
	c := p.data[p.i]
	if c == 'n' && pl.kind != tUnmarshaler && pl.kind != tTime {
		if err := p.literal("null"); err != nil {
			return err
		}
		switch pl.kind {
		case tPtr, tMap, tSlice, tBytes, tIface:
			reflect.NewAt(pl.typ, ptr).Elem().SetZero()
		}
		return nil // null leaves other values unchanged
	}
	switch pl.kind {
	case tTime:
		if p.timeInto(pl, ptr) {
			return nil
		}
		fallthrough
	case tUnmarshaler:
		raw, err := p.skipValue(depth)
		if err != nil {
			return err
		}
		return reflect.NewAt(pl.typ, ptr).Interface().(json.Unmarshaler).UnmarshalJSON(raw)
	case tString:
		if c != '"' {
			return p.mismatch(pl, depth)
		}
		if prior != nil {
			if old := *(*string)(prior); p.sameString(old) {
				*(*string)(ptr) = old
				return nil
			}
		}
		s, err := p.str()
		if err != nil {
			return err
		}
		*(*string)(ptr) = s
	case tBool:
		switch c {
		case 't':
			if err := p.literal("true"); err != nil {
				return err
			}
			*(*bool)(ptr) = true
		case 'f':
			if err := p.literal("false"); err != nil {
				return err
			}
			*(*bool)(ptr) = false
		default:
			return p.mismatch(pl, depth)
		}
	case tInt, tUint, tFloat:
		if c != '-' && (c < '0' || c > '9') {
			return p.mismatch(pl, depth)
		}
		start := p.i
		if err := p.scanNumber(); err != nil {
			return err
		}
		return setNumber(pl, ptr, p.view(start, p.i), start)
	case tIface:
		v, err := p.value(depth)
		if err != nil {
			return err
		}
		*(*any)(ptr) = v
	case tPtr:
		pp := (*unsafe.Pointer)(ptr)
		if *pp == nil {
			*pp = reflect.New(pl.elem.typ).UnsafePointer()
		}
		if prior != nil {
			p.priorPtr = *(*unsafe.Pointer)(prior)
		}
		return p.into(pl.elem, *pp, depth)
	case tBytes:
		if c == '[' {
			return p.slice(pl, ptr, depth)
		}
		if c != '"' {
			return p.mismatch(pl, depth)
		}
		s, err := p.str()
		if err != nil {
			return err
		}
		b := make([]byte, base64.StdEncoding.DecodedLen(len(s)))
		n, err := base64.StdEncoding.Decode(b, []byte(s))
		if err != nil {
			return err
		}
		reflect.NewAt(pl.typ, ptr).Elem().SetBytes(b[:n])
	case tSlice:
		if c != '[' {
			return p.mismatch(pl, depth)
		}
		p.priorPtr = prior
		return p.slice(pl, ptr, depth)
	case tMap:
		if c != '{' {
			return p.mismatch(pl, depth)
		}
		return p.mapInto(pl, ptr, depth)
	case tStruct:
		if c != '{' {
			return p.mismatch(pl, depth)
		}
		p.priorPtr = prior
		return p.structInto(pl, ptr, depth)
	}
	return nil
}

// timeInto parses a plain quoted timestamp at p.i into the metav1.Time or
// metav1.MicroTime at ptr, as their UnmarshalJSON would, without its
// allocations. It reports false, leaving p.i alone, for anything else
// (null, escapes, a malformed time): UnmarshalJSON then decides, and
// words the error.
func (p *parser) timeInto(pl *tplan, ptr unsafe.Pointer) bool {
	d := p.data
	if d[p.i] != '"' {
		return false
	}
	end := p.i + 1
	for end < len(d) && d[end] != '"' {
		if c := d[end]; c == '\\' || c < 0x20 || c >= utf8.RuneSelf {
			return false
		}
		end++
	}
	if end >= len(d) {
		return false
	}
	t, err := time.Parse(pl.layout, p.view(p.i+1, end))
	if err != nil {
		return false // the error would alias the input
	}
	*(*time.Time)(ptr) = t.Local()
	p.i = end + 1
	return true
}

// mismatch skips the value and reports a type error.
func (p *parser) mismatch(pl *tplan, depth int) error {
	start := p.i
	if _, err := p.skipValue(depth); err != nil {
		return err
	}
	what := "value"
	switch p.data[start] {
	case '"':
		what = "string"
	case '{':
		what = "object"
	case '[':
		what = "array"
	case 't', 'f':
		what = "bool"
	default:
		what = "number"
	}
	return &TypeError{Value: what, Type: pl.typ, Offset: start}
}

// setNumber stores the number s, which starts at offset start, at ptr.
func setNumber(pl *tplan, ptr unsafe.Pointer, s string, start int) error {
	switch pl.kind {
	case tInt:
		n, err := strconv.ParseInt(s, 10, 64)
		if err != nil || overflowInt(n, pl.size) {
			return &TypeError{Value: "number " + s, Type: pl.typ, Offset: start}
		}
		switch pl.size {
		case 1:
			*(*int8)(ptr) = int8(n)
		case 2:
			*(*int16)(ptr) = int16(n)
		case 4:
			*(*int32)(ptr) = int32(n)
		default:
			*(*int64)(ptr) = n
		}
	case tUint:
		n, err := strconv.ParseUint(s, 10, 64)
		if err != nil || overflowUint(n, pl.size) {
			return &TypeError{Value: "number " + s, Type: pl.typ, Offset: start}
		}
		switch pl.size {
		case 1:
			*(*uint8)(ptr) = uint8(n)
		case 2:
			*(*uint16)(ptr) = uint16(n)
		case 4:
			*(*uint32)(ptr) = uint32(n)
		default:
			*(*uint64)(ptr) = n
		}
	case tFloat:
		bits := 64
		if pl.size == 4 {
			bits = 32
		}
		f, err := strconv.ParseFloat(s, bits)
		if err != nil {
			return &TypeError{Value: "number " + s, Type: pl.typ, Offset: start}
		}
		if pl.size == 4 {
			*(*float32)(ptr) = float32(f)
		} else {
			*(*float64)(ptr) = f
		}
	}
	return nil
}

func overflowInt(n int64, size uintptr) bool {
	bits := size * 8
	trunc := (n << (64 - bits)) >> (64 - bits)
	return n != trunc
}

func overflowUint(n uint64, size uintptr) bool {
	bits := size * 8
	trunc := (n << (64 - bits)) >> (64 - bits)
	return n != trunc
}

type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

func (p *parser) slice(pl *tplan, ptr unsafe.Pointer, depth int) error {
	strs, _ := p.take(pl)
	var prior sliceHeader // the previous version's, when there is one
	if p.priorPtr != nil {
		prior, p.priorPtr = *(*sliceHeader)(p.priorPtr), nil
	}
	if depth >= maxDepth {
		return p.errf("exceeded max depth")
	}
	open := p.i
	p.i++ // '['
	h := (*sliceHeader)(ptr)
	esize := pl.elem.typ.Size()
	h.len = 0 // as encoding/json: decoding reuses the backing array from the start
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == ']' {
		p.i++
		if h.data == nil {
			reflect.NewAt(pl.typ, ptr).Elem().Set(reflect.MakeSlice(pl.typ, 0, 0))
		}
		return nil
	}
	if h.data == nil {
		// Count the elements first, so that the array is allocated
		// once, at its size: a cache holds these arrays for as long as
		// the object, and room to grow would be memory for nothing.
		q := parser{data: p.data, i: open}
		if n, err := q.valueNoAlloc(depth); err == nil && n > 0 {
			h.data, h.cap = newArray(pl.elem.typ, n), n
		}
	}
	for {
		if h.len == h.cap {
			ncap := max(4, 2*h.cap)
			nd := newArray(pl.elem.typ, ncap)
			if h.len > 0 {
				copy(unsafe.Slice((*byte)(nd), uintptr(h.len)*esize), unsafe.Slice((*byte)(h.data), uintptr(h.len)*esize))
			}
			h.data, h.cap = nd, ncap
		}
		// As encoding/json, an element reused from an earlier decode of
		// the same field is decoded into, not cleared.
		ep := unsafe.Add(h.data, uintptr(h.len)*esize)
		if h.len < prior.len {
			p.priorPtr = unsafe.Add(prior.data, uintptr(h.len)*esize)
		}
		h.len++
		if depth == 1 && (pl.elem.kind == tStruct || pl.elem.kind == tPtr && pl.elem.elem.kind == tStruct) {
			// An item of a top-level list: string blocks of its own.
			raw, err := p.skipValue(depth + 1)
			if err != nil {
				return err
			}
			sub := parser{data: raw, opts: p.opts, sizer: p.sizer}
			if err := sub.into(pl.elem, ep, depth+1); err != nil {
				return err
			}
			p.arenas += sub.arenas
			p.arenaBytes += sub.arenaBytes
			p.hasItems = true
			sub.learn()
		} else if pl.elem.kind == tString {
			if err := p.stringInto(pl.elem, ep, strs, depth+1); err != nil {
				return err
			}
		} else if err := p.into(pl.elem, ep, depth+1); err != nil {
			return err
		}
		p.priorPtr = nil
		if done, err := p.arrayNext(); err != nil || done {
			return err
		}
	}
}

// objectStart consumes '{' and reports whether the object is empty.
func (p *parser) objectStart(depth int) (empty bool, err error) {
	if depth >= maxDepth {
		return false, p.errf("exceeded max depth")
	}
	p.i++ // '{'
	p.skipSpace()
	if p.i < len(p.data) && p.data[p.i] == '}' {
		p.i++
		return true, nil
	}
	return false, nil
}

// objectKey reads a key and the ':' after it. A struct's field name
// (keep false) is only looked up: it is a view of the input, valid only
// while the input is. A map's key (keep true) is the map's to hold: from
// p.opts.Strings when field's strings are still looked up there, else
// copied into the object's string block.
func (p *parser) objectKey(keep bool, field intern.Field) (string, error) {
	p.skipSpace()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return "", p.errf("expected a string for an object key")
	}
	var k string
	var err error
	if keep {
		k, err = p.strFor(field)
	} else {
		k, err = p.strView()
	}
	if err != nil {
		return "", err
	}
	p.skipSpace()
	if p.i >= len(p.data) || p.data[p.i] != ':' {
		return "", p.errf("expected ':' after object key")
	}
	p.i++
	return k, nil
}

// stringInto decodes the value at p.i into the string-kind destination
// of plan pl at ptr, as into does, taking a JSON string from
// p.opts.Strings when field's strings are still looked up.
func (p *parser) stringInto(pl *tplan, ptr unsafe.Pointer, field intern.Field, depth int) error {
	if prior := p.priorPtr; prior != nil {
		p.priorPtr = nil
		if old := *(*string)(prior); p.sameString(old) {
			*(*string)(ptr) = old
			return nil
		}
	}
	if p.opts.Strings == nil {
		return p.into(pl, ptr, depth)
	}
	p.skipSpace()
	if p.i >= len(p.data) || p.data[p.i] != '"' {
		return p.into(pl, ptr, depth) // null, or the error into gives
	}
	s, err := p.strFor(field)
	if err != nil {
		return err
	}
	*(*string)(ptr) = s
	return nil
}

// objectNext consumes ',' or '}' and reports whether the object ended.
func (p *parser) objectNext() (done bool, err error) {
	p.skipSpace()
	if p.i >= len(p.data) {
		return false, p.errf("unexpected end of input in object")
	}
	switch p.data[p.i] {
	case ',':
		p.i++
		return false, nil
	case '}':
		p.i++
		return true, nil
	}
	return false, p.errf("expected ',' or '}' in object")
}

func (p *parser) structInto(pl *tplan, ptr unsafe.Pointer, depth int) error {
	prior := p.priorPtr
	p.priorPtr = nil
	empty, err := p.objectStart(depth)
	if err != nil || empty {
		return err
	}
	for {
		k, err := p.objectKey(false, intern.Field{})
		if err != nil {
			return err
		}
		if f, ok := pl.fields[k]; ok {
			fp := unsafe.Add(ptr, f.off)
			if prior != nil {
				p.priorPtr = unsafe.Add(prior, f.off)
			}
			if p.opts.Strings != nil && (f.plan.kind == tMap || f.plan.kind == tSlice) {
				p.next = fieldStrings{true, f.strs, f.keys}
			}
			switch {
			case p.opts.SkipManagedFields && pl.typ == objectMetaType && k == "managedFields":
				_, err = p.skipValue(depth + 1)
			case p.opts.Share != nil && f.share != shareNone:
				err = p.shared(f, fp, depth+1)
			case f.plan.kind == tString:
				err = p.stringInto(f.plan, fp, f.stat, depth+1)
			default:
				err = p.into(f.plan, fp, depth+1)
			}
		} else {
			_, err = p.skipValue(depth + 1)
		}
		p.priorPtr = nil
		p.next = fieldStrings{} // not taken if the value was null
		if err != nil {
			return err
		}
		if done, err := p.objectNext(); err != nil || done {
			return err
		}
	}
}

func (p *parser) mapInto(pl *tplan, ptr unsafe.Pointer, depth int) error {
	strs, keys := p.take(pl)
	if pl.strMap {
		return p.strMapInto(pl, ptr, strs, keys, depth)
	}
	mp := (*unsafe.Pointer)(ptr)
	if *mp == nil {
		*mp = reflect.MakeMap(pl.typ).UnsafePointer()
	}
	empty, err := p.objectStart(depth)
	if err != nil || empty {
		return err
	}
	m := reflect.NewAt(pl.typ, ptr).Elem()
	v := reflect.New(pl.elem.typ) // reused: the map copies keys and values in
	key := new(string)
	for {
		k, err := p.objectKey(true, keys)
		if err != nil {
			return err
		}
		v.Elem().SetZero()
		if err := p.into(pl.elem, v.UnsafePointer(), depth+1); err != nil {
			return err
		}
		*key = k
		m.SetMapIndex(reflect.NewAt(pl.typ.Key(), unsafe.Pointer(key)).Elem(), v.Elem())
		if done, err := p.objectNext(); err != nil || done {
			return err
		}
	}
}

// strPair is an entry of a map of strings, read before the map is made.
type strPair struct{ k, v string }

// strPairPool holds the slices that strMapInto reads entries into.
var strPairPool = sync.Pool{New: func() any { return new([]strPair) }}

// strMapInto decodes a map whose keys and values are of string kind
// (labels, annotations, a ConfigMap's data). It reads the entries first,
// so that the map is made at its final size: it never grows, and leaves
// no smaller tables behind as garbage. A map that is already there (the
// object was not zero) is added to.
func (p *parser) strMapInto(pl *tplan, ptr unsafe.Pointer, strs, keys intern.Field, depth int) error {
	empty, err := p.objectStart(depth)
	if err != nil {
		return err
	}
	mp := (*unsafe.Pointer)(ptr) // a map is a pointer
	if empty {
		if *mp == nil {
			*mp = reflect.MakeMap(pl.typ).UnsafePointer()
		}
		return nil
	}
	buf := strPairPool.Get().(*[]strPair)
	defer func() {
		clear(*buf)
		*buf = (*buf)[:0]
		strPairPool.Put(buf)
	}()
	for {
		k, err := p.objectKey(true, keys)
		if err != nil {
			return err
		}
		*buf = append(*buf, strPair{k: k})
		// A string value holds no map: nothing appends to buf meanwhile.
		if err := p.stringInto(pl.elem, unsafe.Pointer(&(*buf)[len(*buf)-1].v), strs, depth+1); err != nil {
			return err
		}
		done, err := p.objectNext()
		if err != nil {
			return err
		}
		if done {
			break
		}
	}
	if *mp == nil {
		*mp = reflect.MakeMapWithSize(pl.typ, len(*buf)).UnsafePointer()
	}
	// String-kind keys and values share map[string]string's layout and
	// hash.
	m := *(*map[string]string)(ptr)
	for _, e := range *buf {
		m[e.k] = e.v
	}
	return nil
}
