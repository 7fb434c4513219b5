package protodec

import (
	"errors"
	"fmt"
	"math"
	"reflect"
	"slices"
	"strconv"
	"strings"
	"sync"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// Errors returned for malformed input.
var (
	ErrTruncated = errors.New("protodec: truncated message")
	ErrVarint    = errors.New("protodec: malformed varint")
	// ErrTooDeep is matched (errors.Is) by the *DepthError returned for a
	// message nested more than MaxDepth levels deep.
	ErrTooDeep = errors.New("protodec: message nested too deeply")
)

// MaxDepth is how many levels of nested messages a decode accepts, the
// top-level message included; a deeper one fails with a *DepthError.
// Without a limit, a message of a recursive type nested deeply enough
// grows the goroutine's stack past the runtime's 1 GB, a fatal error
// that no recover catches: with 1 to 4 KiB of stack a level, a message
// of about 1.5 MiB that nests a repeated field 400,000 levels deep does.
//
// The types of k8s.io/api nest at most 14 levels (a CronJobList's pod
// template; difftest's TestAPITypesDepth), but recursive types have no
// static bound: a CRD's apiextensions.k8s.io/v1 JSONSchemaProps takes
// one to three levels for each level of its schema, and the API server
// sets no limit on a schema's depth but its JSON decoder's 10,000. The
// limit is therefore 10,000 too, which is also the default recursion
// limit of google.golang.org/protobuf; a decode at the limit uses some
// 8 to 32 MiB of stack.
//
// With sharing (intern.Options.Share), a part of a message taken from
// the table, or met before in the same object, is not decoded again and
// so adds no depth (nor stack): a message deeper than the limit decodes
// when its deep parts were decoded before at a shallower place.
const MaxDepth = 10000

// DepthError reports a message nested more than Limit levels deep. It
// matches ErrTooDeep.
type DepthError struct {
	Limit int
	// inner holds the names of the fields leading to the message that
	// was one too deep, innermost first.
	inner []string
}

// Path returns the names of the fields from the top-level message down to
// the message that was one level too deep, outermost first.
func (e *DepthError) Path() []string {
	p := slices.Clone(e.inner)
	slices.Reverse(p)
	return p
}

func (e *DepthError) Error() string {
	p := e.Path()
	const show = 8
	path := strings.Join(p, ".")
	if len(p) > 2*show {
		path = strings.Join(p[:show], ".") + fmt.Sprintf(" …(%d more)… ", len(p)-2*show) + strings.Join(p[len(p)-show:], ".")
	}
	return fmt.Sprintf("protodec: message nested more than %d levels deep, at %s", e.Limit, path)
}

// Is makes errors.Is(err, ErrTooDeep) true.
func (e *DepthError) Is(target error) bool { return target == ErrTooDeep }

// inField adds the name of f, the field of the enclosing message whose
// value failed with err, to err's path when err is a *DepthError.
func inField(err error, f *field) error {
	if de, ok := err.(*DepthError); ok {
		de.inner = append(de.inner, f.name)
	}
	return err
}

type unmarshaler interface{ Unmarshal([]byte) error }

var (
	unmarshalerType = reflect.TypeFor[unmarshaler]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	timeType        = reflect.TypeFor[metav1.Time]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
	bytesType       = reflect.TypeFor[[]byte]()
	microTimeType   = reflect.TypeFor[metav1.MicroTime]()
)

type kind uint8

const (
	kString kind = iota + 1
	kBytes
	kBool
	kInt // any signed integer kind, from a varint
	kUint
	kFloat64 // fixed64
	kFloat32 // fixed32
	kMessage // a struct planned by reflection
	kCustom  // a type decoded by its own Unmarshal method
)

type field struct {
	name   string // the protobuf tag's name, for errors
	kind   kind
	off    uintptr
	typ    reflect.Type // the Go type of the field
	elem   reflect.Type // element type for pointers, slices and maps' values
	size   uintptr      // size of the integer or float (bytes)
	ptr    bool         // pointer to a scalar or message
	rep    bool         // slice (not []byte)
	isMap  bool
	strMap bool // map whose key and value are string kinds
	qtyMap bool // map from a string kind to resource.Quantity
	sub    *plan
	key    kind // map key kind
	val    kind // map value kind
	valSub *plan
	custom customKind
	timed  bool // elem holds a time: never shared
	// shareable: a kind that shared may take from the table (a string or
	// quantity map, a repeated message, a pointer to a message).
	shareable bool
	stat      intern.Field // names the field for the table's lookup counts
	keys      intern.Field // names a map's keys for Strings' lookup counts
}

type customKind uint8

const (
	customGeneric customKind = iota
	customTime
	customMicroTime
	customQuantity
)

func customOf(t reflect.Type) customKind {
	switch t {
	case timeType:
		return customTime
	case microTimeType:
		return customMicroTime
	case quantityType:
		return customQuantity
	}
	return customGeneric
}

type plan struct {
	typ    reflect.Type
	byNum  []*field // indexed by field number
	failed error
}

var plans sync.Map // reflect.Type → *plan

// Supported reports whether values of type *T (t is T, a struct type) can
// be decoded by this package.
func Supported(t reflect.Type) bool {
	p := planFor(t)
	return p.failed == nil
}

func planFor(t reflect.Type) *plan {
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	building := map[reflect.Type]*plan{}
	p := build(t, building)
	for bt, bp := range building {
		plans.LoadOrStore(bt, bp)
	}
	return p
}

// build plans t. Recursive types are handled through the building map.
func build(t reflect.Type, building map[reflect.Type]*plan) *plan {
	if p, ok := building[t]; ok {
		return p
	}
	if p, ok := plans.Load(t); ok {
		return p.(*plan)
	}
	p := &plan{typ: t}
	building[t] = p
	if t.Kind() != reflect.Struct {
		p.failed = fmt.Errorf("protodec: %v is not a struct", t)
		return p
	}
	for i := 0; i < t.NumField(); i++ {
		sf := t.Field(i)
		tag := sf.Tag.Get("protobuf")
		if tag == "" || tag == "-" {
			continue
		}
		parts := strings.Split(tag, ",")
		if len(parts) < 3 {
			p.failed = fmt.Errorf("protodec: %v.%s: bad tag %q", t, sf.Name, tag)
			return p
		}
		num, err := strconv.Atoi(parts[1])
		if err != nil || num <= 0 || num > 1<<12 {
			p.failed = fmt.Errorf("protodec: %v.%s: bad field number in %q", t, sf.Name, tag)
			return p
		}
		f := &field{name: sf.Name, off: sf.Offset, typ: sf.Type}
		for _, part := range parts[3:] {
			if n, ok := strings.CutPrefix(part, "name="); ok {
				f.name = n
			}
		}
		if err := f.setup(sf.Type, parts[0], parts[2] == "rep", building); err != nil {
			p.failed = fmt.Errorf("protodec: %v.%s: %w", t, sf.Name, err)
			return p
		}
		f.shareable = f.isMap && (f.strMap || f.qtyMap) || f.kind == kMessage && (f.rep || f.ptr)
		f.stat = intern.NewField()
		if f.isMap {
			f.keys = intern.NewField()
		}
		for len(p.byNum) <= num {
			p.byNum = append(p.byNum, nil)
		}
		p.byNum[num] = f
	}
	// A sub-plan failure makes this plan fail too.
	for _, f := range p.byNum {
		if f == nil {
			continue
		}
		for _, s := range []*plan{f.sub, f.valSub} {
			if s != nil && s != p && s.failed != nil {
				p.failed = s.failed
				return p
			}
		}
	}
	return p
}

// isCustom reports whether t decodes itself: a type with an Unmarshal
// method that is not a struct described by protobuf tags (metav1.Time,
// resource.Quantity, or a named slice such as metav1.Verbs, which is a
// message wrapping a repeated field).
func isCustom(t reflect.Type) bool {
	if !reflect.PointerTo(t).Implements(unmarshalerType) {
		return false
	}
	if t.Kind() != reflect.Struct {
		return t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface
	}
	for i := 0; i < t.NumField(); i++ {
		if tag := t.Field(i).Tag.Get("protobuf"); tag != "" && tag != "-" {
			return false
		}
	}
	return true
}

func scalarKind(t reflect.Type, wire string) (kind, uintptr, error) {
	switch t.Kind() {
	case reflect.String:
		return kString, 0, nil
	case reflect.Bool:
		return kBool, 1, nil
	case reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64:
		return kInt, t.Size(), nil
	case reflect.Uint, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return kUint, t.Size(), nil
	case reflect.Float64:
		return kFloat64, 8, nil
	case reflect.Float32:
		return kFloat32, 4, nil
	case reflect.Slice:
		if t.Elem().Kind() == reflect.Uint8 {
			return kBytes, 0, nil
		}
	}
	return 0, 0, fmt.Errorf("unsupported type %v", t)
}

func (f *field) setup(t reflect.Type, wire string, rep bool, building map[reflect.Type]*plan) error {
	f.timed = intern.HoldsTime(t)
	switch {
	case isCustom(t):
		f.elem = t
		f.kind = kCustom
		f.custom = customOf(t)
		return nil
	case t.Kind() == reflect.Map:
		f.isMap = true
		f.elem = t.Elem()
		kk, _, err := scalarKind(t.Key(), "bytes")
		if err != nil || kk != kString {
			return fmt.Errorf("map key %v unsupported", t.Key())
		}
		f.key = kString
		vt := t.Elem()
		switch {
		case isCustom(vt):
			f.val = kCustom
		case vt.Kind() == reflect.Struct:
			f.val = kMessage
			f.valSub = build(vt, building)
		default:
			vk, _, err := scalarKind(vt, "bytes")
			if err != nil || (vk != kString && vk != kBytes) {
				return fmt.Errorf("map value %v unsupported", vt)
			}
			f.val = vk
		}
		f.strMap = f.val == kString
		f.qtyMap = vt == quantityType
		return nil
	case t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8:
		// The hand-written tags in k8s.io/api are not always accurate
		// (repeated fields marked opt, int64 marked bytes); the Go type
		// decides, and the wire type is checked when decoding.
		f.rep = true
		et := t.Elem()
		f.elem = et
		return f.setElem(et, wire, building)
	case t.Kind() == reflect.Pointer:
		f.ptr = true
		f.elem = t.Elem()
		return f.setElem(t.Elem(), wire, building)
	default:
		f.elem = t
		return f.setElem(t, wire, building)
	}
}

func (f *field) setElem(t reflect.Type, wire string, building map[reflect.Type]*plan) error {
	switch {
	case isCustom(t):
		f.kind = kCustom
		f.custom = customOf(t)
	case t.Kind() == reflect.Struct:
		f.kind = kMessage
		f.sub = build(t, building)
	case t.Kind() == reflect.Pointer || t.Kind() == reflect.Map || (t.Kind() == reflect.Slice && t.Elem().Kind() != reflect.Uint8):
		return fmt.Errorf("nested %v unsupported", t)
	default:
		k, size, err := scalarKind(t, wire)
		if err != nil {
			return err
		}
		f.kind, f.size = k, size
	}
	return nil
}

// Unmarshal decodes the protobuf message data into v, which must be a
// pointer to a struct type for which [Supported] is true. The struct should
// be zero; fields present in data are set (repeated fields are appended).
// Strings in the result are copied into a few shared blocks of at most
// maxBlock bytes (each element of a top-level repeated message, such as
// a list's Items, has blocks of its own); data itself is not retained, nor
// are the bytes of non-string fields.
func Unmarshal(data []byte, v any) error {
	_, err := unmarshal(data, v)
	return err
}

// UnmarshalWith is [Unmarshal] with options.
func UnmarshalWith(data []byte, v any, o intern.Options) error {
	return unmarshalWithLimit(data, v, o, MaxDepth)
}

// unmarshalWithLimit is UnmarshalWith with limit levels of nesting in
// place of MaxDepth (tests).
func unmarshalWithLimit(data []byte, v any, o intern.Options, limit int) error {
	_, _, err := unmarshalLimit(data, v, o, limit)
	if errors.Is(err, errUnshare) {
		// A field came twice, and its first value was shared: protobuf
		// merges the second into the first, which must not change a
		// shared value. Servers do not write such messages; decode this
		// one without sharing structures.
		reflect.ValueOf(v).Elem().SetZero()
		o.Structs = false
		_, _, err = unmarshalLimit(data, v, o, limit)
	}
	return err
}

// unmarshal is Unmarshal that also reports how many string blocks it made.
func unmarshal(data []byte, v any) (int, error) {
	n, _, err := unmarshalStats(data, v, intern.Options{})
	return n, err
}

// unmarshalStats is Unmarshal that also reports how many string blocks it
// made and their total size.
func unmarshalStats(data []byte, v any, o intern.Options) (blocks, bytes int, _ error) {
	return unmarshalLimit(data, v, o, MaxDepth)
}

// unmarshalLimit is unmarshalStats with limit levels of nesting in place
// of MaxDepth.
func unmarshalLimit(data []byte, v any, o intern.Options, limit int) (blocks, bytes int, _ error) {
	rv := reflect.ValueOf(v)
	if rv.Kind() != reflect.Pointer || rv.IsNil() {
		return 0, 0, fmt.Errorf("protodec: need a non-nil pointer, got %T", v)
	}
	p := planFor(rv.Type().Elem())
	if p.failed != nil {
		return 0, 0, p.failed
	}
	d := decoder{data: data, root: p, opts: o, sizer: o.Sizer, maxDepth: limit}
	if o.Prior != nil && o.Structs && o.Share != nil {
		if pv := reflect.ValueOf(o.Prior); pv.Type() == rv.Type() && !pv.IsNil() {
			d.prior = pv.UnsafePointer()
		}
	}
	err := d.message(p, data, rv.UnsafePointer())
	if err == nil {
		d.learn()
	}
	return d.arenas, d.arenaBytes, err
}

type decoder struct {
	data  []byte
	arena []byte // the current block strings are copied into
	root  *plan
	opts  intern.Options

	// Fields this decoder set to a value from the table, which a
	// repeated occurrence of the field must not merge into.
	sharedFP [16]unsafe.Pointer
	nShared  int

	// prior is the previous version's counterpart of the message being
	// decoded (intern.Options.Prior, then its fields), or nil. message
	// reads it on entry and clears it; it is set again only for the call
	// that decodes a nested message, so that no other message, such as an
	// element of a repeated field, takes it for its own.
	prior unsafe.Pointer

	// Parts of this object decoded in place on their first meeting
	// (share.go: remember, recall).
	local  [16]localPart
	nLocal int

	arenas     int // string blocks allocated (tests)
	arenaBytes int // their total size (tests)
	kept       int // string bytes copied into blocks so far

	// sizer, set on the decoder of one object (a top-level message, or
	// an item of a top-level list), sizes its string blocks; a list's
	// decoder hands it to its items.
	sizer *intern.Sizer
	items bool // items of a top-level list were decoded by decoders of their own

	// depth is how many messages are being decoded, one inside the
	// other, the top-level one included; at most maxDepth. A decoder
	// for a part (child, an item of a list) starts at its parent's.
	depth, maxDepth int

	// Scratch space for map entries with non-string values: the map
	// copies key and value on insert.
	scratchType reflect.Type
	scratch     reflect.Value
}

// Strings are copied into blocks that start at firstBlock bytes and double
// up to maxBlock. Copying only the string bytes (not the whole message,
// whose tags, numbers and bytes fields an informer would otherwise keep
// alive for as long as it caches the object) into a few growing blocks
// keeps both the allocations and the unused space small. A new block is
// also never larger than the string bytes the rest of the message is
// likely to hold: what is left of it, in the proportion of kept bytes to
// bytes read so far (tags, numbers and byte blobs are not kept), with some
// slack, once a first block's worth has been read. With a Sizer that has
// learnt from earlier objects, the first block is no larger than its
// guess, so that a small object whose encoding is mostly parts taken from
// the table (or bytes and numbers) does not hold a block it cannot fill.
// An estimate too low costs one more small block.
const (
	firstBlock = 512
	maxBlock   = 4096
	slack      = 64
)

// strFor returns a string equal to b, a string of field: from
// d.opts.Strings when field's strings are still looked up there, else a
// copy from the current block (str).
func (d *decoder) strFor(field intern.Field, b []byte) string {
	if s, ok := d.opts.String(field, b); ok {
		return s
	}
	return d.str(b)
}

// str returns a string copy of b, a sub-slice of d.data, taken from the
// current block (a new block when it is full). Blocks are only appended
// to, so strings made from them never change.
func (d *decoder) str(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	if cap(d.arena)-len(d.arena) < len(b) {
		// What is left of the message bounds the strings still to come.
		off := int(uintptr(unsafe.Pointer(unsafe.SliceData(b))) - uintptr(unsafe.Pointer(unsafe.SliceData(d.data))))
		rest := len(d.data) - off
		if off >= firstBlock { // enough read to go by
			rest = min(rest, int(int64(rest)*int64(d.kept)/int64(off))+slack)
		}
		size := min(max(2*cap(d.arena), firstBlock), maxBlock, rest)
		if g := d.sizer.Guess(rest); g > 0 && d.arenas == 0 {
			size = min(size, g)
		}
		size = max(len(b), size)
		// slices.Grow rounds the capacity up to the allocation's size
		// class, so that the rounding is room for strings, not waste.
		d.arena = slices.Grow([]byte(nil), size)
		d.arenas++
		d.arenaBytes += cap(d.arena)
	}
	d.kept += len(b)
	n := len(d.arena)
	d.arena = append(d.arena, b...)
	return unsafe.String(&d.arena[n], len(b))
}

// learn tells the sizer what this object kept. A list's decoder, whose
// items had decoders of their own, has nothing to teach.
func (d *decoder) learn() {
	if !d.items {
		d.sizer.Learn(len(d.data), d.kept)
	}
}

func varint(b []byte) (uint64, int, error) {
	if len(b) > 0 && b[0] < 0x80 {
		return uint64(b[0]), 1, nil
	}
	var v uint64
	for i := 0; i < len(b) && i < 10; i++ {
		c := b[i]
		v |= uint64(c&0x7f) << (7 * uint(i))
		if c < 0x80 {
			return v, i + 1, nil
		}
	}
	if len(b) < 10 {
		return 0, 0, ErrTruncated
	}
	return 0, 0, ErrVarint
}

// next reads one field header and its payload. For wire type 2 data is
// the payload; for varints val holds the value.
func next(b []byte) (num uint64, wt uint64, val uint64, data []byte, rest []byte, err error) {
	key, n, err := varint(b)
	if err != nil {
		return 0, 0, 0, nil, nil, err
	}
	b = b[n:]
	num, wt = key>>3, key&7
	if num == 0 {
		return 0, 0, 0, nil, nil, errors.New("protodec: field number 0")
	}
	switch wt {
	case 0:
		val, n, err = varint(b)
		if err != nil {
			return 0, 0, 0, nil, nil, err
		}
		return num, wt, val, nil, b[n:], nil
	case 1:
		if len(b) < 8 {
			return 0, 0, 0, nil, nil, ErrTruncated
		}
		return num, wt, leUint64(b), nil, b[8:], nil
	case 5:
		if len(b) < 4 {
			return 0, 0, 0, nil, nil, ErrTruncated
		}
		return num, wt, uint64(leUint32(b)), nil, b[4:], nil
	case 2:
		l, n, err := varint(b)
		if err != nil {
			return 0, 0, 0, nil, nil, err
		}
		b = b[n:]
		if l > uint64(len(b)) {
			return 0, 0, 0, nil, nil, ErrTruncated
		}
		return num, wt, 0, b[:l], b[l:], nil
	case 3:
		// A group: deprecated, but valid protobuf, and skipped whole (with
		// the groups inside it) as the generated code skips it; data is
		// its body. No Kubernetes type has one, so it only ever is an
		// unknown field.
		body, rest, err := skipGroup(b)
		if err != nil {
			return 0, 0, 0, nil, nil, err
		}
		return num, wt, 0, body, rest, nil
	default:
		return 0, 0, 0, nil, nil, fmt.Errorf("protodec: unsupported wire type %d", wt)
	}
}

// skipGroup reads the fields of a group up to its end-group key, which,
// as in the generated code, need not repeat the group's field number. It
// returns the group's body and what follows the end.
func skipGroup(b []byte) (body, rest []byte, err error) {
	start := b
	for depth := 1; ; {
		end := len(start) - len(b)
		key, n, err := varint(b)
		if err != nil {
			return nil, nil, err
		}
		b = b[n:]
		if key>>3 == 0 {
			return nil, nil, errors.New("protodec: field number 0")
		}
		switch key & 7 {
		case 0:
			if _, n, err = varint(b); err != nil {
				return nil, nil, err
			}
			b = b[n:]
		case 1:
			if len(b) < 8 {
				return nil, nil, ErrTruncated
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return nil, nil, ErrTruncated
			}
			b = b[4:]
		case 2:
			l, n, err := varint(b)
			if err != nil {
				return nil, nil, err
			}
			b = b[n:]
			if l > uint64(len(b)) {
				return nil, nil, ErrTruncated
			}
			b = b[l:]
		case 3:
			depth++
		case 4:
			if depth--; depth == 0 {
				return start[:end], b, nil
			}
		default:
			return nil, nil, fmt.Errorf("protodec: unsupported wire type %d", key&7)
		}
	}
}

func leUint64(b []byte) uint64 {
	return uint64(b[0]) | uint64(b[1])<<8 | uint64(b[2])<<16 | uint64(b[3])<<24 |
		uint64(b[4])<<32 | uint64(b[5])<<40 | uint64(b[6])<<48 | uint64(b[7])<<56
}

func leUint32(b []byte) uint32 {
	return uint32(b[0]) | uint32(b[1])<<8 | uint32(b[2])<<16 | uint32(b[3])<<24
}

type sliceHeader struct {
	data unsafe.Pointer
	len  int
	cap  int
}

// countRun counts the consecutive fields numbered num at the start of b.
// The generated marshalers write the elements of a repeated field (and
// the entries of a map) one after another, so this finds how many to
// allocate without a separate pass over the message.
func countRun(b []byte, num uint64) int {
	n := 0
	for len(b) > 0 {
		key, kn, err := varint(b)
		if err != nil || key>>3 != num {
			break
		}
		b = b[kn:]
		switch key & 7 {
		case 0:
			_, vn, err := varint(b)
			if err != nil {
				return n + 1
			}
			b = b[vn:]
		case 1:
			if len(b) < 8 {
				return n + 1
			}
			b = b[8:]
		case 5:
			if len(b) < 4 {
				return n + 1
			}
			b = b[4:]
		case 2:
			l, ln, err := varint(b)
			if err != nil || l > uint64(len(b)-ln) {
				return n + 1
			}
			b = b[ln+int(l):]
		default:
			return n + 1
		}
		n++
	}
	return max(n, 1)
}

// message decodes the message b, of plan p, into base, one level deeper
// than the caller.
func (d *decoder) message(p *plan, b []byte, base unsafe.Pointer) error {
	if d.depth >= d.maxDepth {
		return &DepthError{Limit: d.maxDepth}
	}
	d.depth++
	err := d.fields(p, b, base)
	d.depth--
	return err
}

// fields decodes the fields of the message b into base (see message).
// The error of a field's value names the field when it is a *DepthError.
func (d *decoder) fields(p *plan, b []byte, base unsafe.Pointer) error {
	prior := d.prior
	d.prior = nil
	for len(b) > 0 {
		start := b
		num, wt, val, data, rest, err := next(b)
		if err != nil {
			return err
		}
		b = rest
		if num >= uint64(len(p.byNum)) || p.byNum[num] == nil {
			continue // unknown field
		}
		f := p.byNum[num]
		if d.opts.SkipManagedFields && num == managedFieldsNum && p.typ == objectMetaType {
			continue
		}
		fp := unsafe.Add(base, f.off)
		var pf unsafe.Pointer // the previous version's field, or nil
		if prior != nil {
			pf = unsafe.Add(prior, f.off)
		}
		if d.opts.Share != nil && wt == 2 {
			n, err := d.shared(p, num, f, fp, pf, data, start, len(start)-len(b))
			if err != nil {
				return inField(err, f)
			}
			if n > 0 {
				b = start[n:]
				continue
			}
		}
		switch {
		case f.isMap:
			if wt != 2 {
				return wireErr(p, num, wt)
			}
			if *(*unsafe.Pointer)(fp) == nil {
				*(*unsafe.Pointer)(fp) = reflect.MakeMapWithSize(f.typ, countRun(start, num)).UnsafePointer()
			} else if d.isShared(fp) {
				return errUnshare // more entries for a map taken from the table
			}
			if err := d.mapEntry(f, fp, data); err != nil {
				return inField(err, f)
			}
		case f.rep:
			if err := d.repeated(p, num, f, fp, pf, wt, val, data, start); err != nil {
				return inField(err, f)
			}
		default:
			ep := fp
			if f.ptr {
				pp := (*unsafe.Pointer)(fp)
				if *pp == nil {
					*pp = unsafe_New(rtype(f.elem))
				} else if d.isShared(fp) {
					return errUnshare // a message to merge into one taken from the table
				}
				ep = *pp
				if pf != nil {
					pf = *(*unsafe.Pointer)(pf)
				}
			}
			if pf != nil && f.kind == kString && wt == 2 {
				// Unchanged since the previous version: its string, so
				// that this version's block holds only what changed
				// (the previous version's is kept by the parts taken
				// from it anyway).
				if old := *(*string)(pf); old == string(data) {
					*(*string)(ep) = old
					continue
				}
			}
			if f.kind == kMessage {
				d.prior = pf // for the nested message's own fields
			}
			err := d.value(p, num, f, ep, wt, val, data)
			d.prior = nil
			if err != nil {
				return inField(err, f)
			}
		}
	}
	return nil
}

func wireErr(p *plan, num, wt uint64) error {
	return fmt.Errorf("protodec: %v field %d: unexpected wire type %d", p.typ, num, wt)
}

// value decodes one non-repeated value into ep.
func (d *decoder) value(p *plan, num uint64, f *field, ep unsafe.Pointer, wt, val uint64, data []byte) error {
	switch f.kind {
	case kString:
		if wt != 2 {
			return wireErr(p, num, wt)
		}
		*(*string)(ep) = d.strFor(f.stat, data)
	case kBytes:
		if wt != 2 {
			return wireErr(p, num, wt)
		}
		if d.opts.Share != nil && len(data) >= minShared {
			*(*[]byte)(ep) = d.sharedBytes(f, data)
			return nil
		}
		*(*[]byte)(ep) = append([]byte{}, data...)
	case kBool:
		if wt != 0 {
			return wireErr(p, num, wt)
		}
		*(*bool)(ep) = val != 0
	case kInt, kUint:
		if wt != 0 {
			return wireErr(p, num, wt)
		}
		switch f.size {
		case 1:
			*(*uint8)(ep) = uint8(val)
		case 2:
			*(*uint16)(ep) = uint16(val)
		case 4:
			*(*uint32)(ep) = uint32(val)
		default:
			*(*uint64)(ep) = val
		}
	case kFloat64:
		if wt != 1 {
			return wireErr(p, num, wt)
		}
		*(*float64)(ep) = math.Float64frombits(val)
	case kFloat32:
		if wt != 5 {
			return wireErr(p, num, wt)
		}
		*(*float32)(ep) = math.Float32frombits(uint32(val))
	case kMessage:
		if wt != 2 {
			return wireErr(p, num, wt)
		}
		return d.message(f.sub, data, ep)
	case kCustom:
		if wt != 2 {
			return wireErr(p, num, wt)
		}
		switch f.custom {
		case customTime:
			return (*metav1.Time)(ep).Unmarshal(data)
		case customMicroTime:
			return (*metav1.MicroTime)(ep).Unmarshal(data)
		case customQuantity:
			return (*resource.Quantity)(ep).Unmarshal(data)
		}
		pv := reflect.NewAt(f.elem, ep)
		// The generated code makes a nil slice or map non-nil before
		// calling the type's own Unmarshal (metav1.Verbs).
		switch e := pv.Elem(); e.Kind() {
		case reflect.Slice:
			if e.IsNil() {
				e.Set(reflect.MakeSlice(f.elem, 0, 0))
			}
		case reflect.Map:
			if e.IsNil() {
				e.Set(reflect.MakeMap(f.elem))
			}
		}
		return pv.Interface().(unmarshaler).Unmarshal(data)
	}
	return nil
}

// repeated appends one element (or a packed run) to a slice field. start
// is the message from this field's header on.
//
// pf is the previous version's field, or nil: an element of a repeated
// message is decoded with the previous version's element at its index
// as its counterpart.
func (d *decoder) repeated(p *plan, num uint64, f *field, fp, pf unsafe.Pointer, wt, val uint64, data, start []byte) error {
	h := (*sliceHeader)(fp)
	esize := f.elem.Size()
	if f.kind != kString && f.kind != kBytes && f.kind != kMessage && f.kind != kCustom && wt == 2 {
		// A packed run of scalars.
		wt2, width := uint64(0), 0
		switch f.kind {
		case kFloat64:
			wt2, width = 1, 8
		case kFloat32:
			wt2, width = 5, 4
		}
		for len(data) > 0 {
			var v uint64
			if width > 0 {
				if len(data) < width {
					return ErrTruncated
				}
				if width == 8 {
					v = leUint64(data)
				} else {
					v = uint64(leUint32(data))
				}
				data = data[width:]
			} else {
				x, n, err := varint(data)
				if err != nil {
					return err
				}
				v, data = x, data[n:]
			}
			if err := d.value(p, num, f, d.grow(f, h, esize, len(data)+1), wt2, v, nil); err != nil {
				return err
			}
		}
		return nil
	}
	if h.len == h.cap {
		if err := d.reserve(f, h, esize, countRun(start, num)); err != nil {
			return err
		}
	}
	i := h.len
	ep := d.grow(f, h, esize, 1)
	if p == d.root && f.kind == kMessage && wt == 2 && len(data) > 0 {
		// Each element of a top-level repeated message (the Items of a
		// list) gets string blocks of its own, so that keeping one item
		// does not keep other items' strings alive.
		sub := decoder{data: data, root: d.root, opts: d.opts, sizer: d.sizer, depth: d.depth, maxDepth: d.maxDepth}
		err := sub.message(f.sub, data, ep)
		d.arenas += sub.arenas
		d.arenaBytes += sub.arenaBytes
		d.items = true
		if err == nil {
			sub.learn()
		}
		return err
	}
	if f.kind == kMessage {
		d.prior = priorElem(pf, i, esize)
	}
	err := d.value(p, num, f, ep, wt, val, data)
	d.prior = nil
	return err
}

// priorElem returns the element i of the previous version's slice at pf,
// or nil when there is no such element.
func priorElem(pf unsafe.Pointer, i int, esize uintptr) unsafe.Pointer {
	if pf == nil {
		return nil
	}
	if h := (*sliceHeader)(pf); i < h.len {
		return unsafe.Add(h.data, uintptr(i)*esize)
	}
	return nil
}

// reserve makes room for n more elements.
func (d *decoder) reserve(f *field, h *sliceHeader, esize uintptr, n int) error {
	nd := newArray(f.elem, h.len+n)
	if h.len > 0 {
		copy(unsafe.Slice((*byte)(nd), uintptr(h.len)*esize), unsafe.Slice((*byte)(h.data), uintptr(h.len)*esize))
	}
	h.data, h.cap = nd, h.len+n
	return nil
}

// grow returns a pointer to the next element, making room for at least
// hint elements if the slice is full.
func (d *decoder) grow(f *field, h *sliceHeader, esize uintptr, hint int) unsafe.Pointer {
	if h.len == h.cap {
		_ = d.reserve(f, h, esize, max(hint, h.cap, 1))
	}
	ep := unsafe.Add(h.data, uintptr(h.len)*esize)
	h.len++
	return ep
}

// mapEntry decodes one map entry {1: key, 2: value} into the map at fp,
// which the caller has created.
func (d *decoder) mapEntry(f *field, fp unsafe.Pointer, data []byte) error {
	var key string
	var valData []byte
	haveVal := false
	for len(data) > 0 {
		num, wt, _, payload, rest, err := next(data)
		if err != nil {
			return err
		}
		data = rest
		switch num {
		case 1:
			if wt != 2 {
				return fmt.Errorf("protodec: map key: unexpected wire type %d", wt)
			}
			key = d.strFor(f.keys, payload)
		case 2:
			if wt != 2 {
				return fmt.Errorf("protodec: map value: unexpected wire type %d", wt)
			}
			valData, haveVal = payload, true
		}
	}
	if f.strMap {
		// Maps whose key and value have string kinds share the layout and
		// hash function of map[string]string.
		(*(*map[string]string)(fp))[key] = d.strFor(f.stat, valData)
		return nil
	}
	if f.qtyMap {
		// ResourceList and friends: the same layout as
		// map[string]resource.Quantity.
		var q resource.Quantity
		if haveVal {
			if err := q.Unmarshal(valData); err != nil {
				return err
			}
		}
		(*(*map[string]resource.Quantity)(fp))[key] = q
		return nil
	}
	m := reflect.NewAt(f.typ, fp).Elem()
	kp := new(string) // the map copies the key; only rare map kinds come here
	*kp = key
	kv := reflect.NewAt(f.typ.Key(), unsafe.Pointer(kp)).Elem()
	var vv reflect.Value
	if f.val == kMessage {
		// A message value may itself hold maps (even of its own type), so
		// it gets its own space rather than the shared scratch.
		vv = reflect.New(f.elem)
	} else {
		if d.scratchType != f.elem {
			d.scratchType, d.scratch = f.elem, reflect.New(f.elem)
		} else {
			d.scratch.Elem().SetZero()
		}
		vv = d.scratch
	}
	switch f.val {
	case kBytes:
		if haveVal {
			vv.Elem().SetBytes(append([]byte{}, valData...))
		} else {
			vv.Elem().SetBytes([]byte{})
		}
	case kCustom:
		// Like the generated code: the value starts as an empty, non-nil
		// T{} and is decoded only if present.
		switch e := vv.Elem(); e.Kind() {
		case reflect.Slice:
			e.Set(reflect.MakeSlice(f.elem, 0, 0))
		case reflect.Map:
			e.Set(reflect.MakeMap(f.elem))
		}
		if haveVal {
			if err := vv.Interface().(unmarshaler).Unmarshal(valData); err != nil {
				return err
			}
		}
	case kMessage:
		if haveVal {
			if err := d.message(f.valSub, valData, vv.UnsafePointer()); err != nil {
				return err
			}
		}
	}
	m.SetMapIndex(kv, vv.Elem())
	return nil
}
