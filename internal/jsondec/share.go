package jsondec

import (
	"errors"
	"reflect"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// Sharing in the typed decoder: before decoding a struct field of a kind
// that objects of one shape hold identically, the decoder skips over its
// JSON text, hashes it, and takes the value from the table when the same
// text was decoded before (see internal/intern). The text is the key, so
// two objects share a value only when their JSON for it is byte for byte
// the same, which the API server's serializer makes so for equal values.

type shareKind uint8

const (
	shareNone  shareKind = iota
	shareSlice           // a slice of structs: containers, volumes, owner references
	sharePtr             // a pointer to a struct: security contexts, probes
	shareMap             // a string map (labels, annotations, data) or a resource list
	shareBlob            // metav1.FieldsV1, or a pointer to one: managed-fields blobs
)

var (
	fieldsV1Type    = reflect.TypeFor[metav1.FieldsV1]()
	fieldsV1PtrType = reflect.TypeFor[*metav1.FieldsV1]()
	quantityType    = reflect.TypeFor[resource.Quantity]()
	objectMetaType  = reflect.TypeFor[metav1.ObjectMeta]()
)

// shareOf returns how values of a field of plan pl are shared.
func shareOf(pl *tplan) shareKind {
	switch {
	case pl.typ == fieldsV1Type || pl.kind == tPtr && pl.elem.typ == fieldsV1Type:
		return shareBlob
	case intern.HoldsTime(pl.typ):
		return shareNone
	case pl.kind == tSlice && pl.elem.kind == tStruct && pl.elem.failed == nil:
		return shareSlice
	case pl.kind == tPtr && pl.elem.kind == tStruct && pl.elem.size >= intern.MinShared:
		return sharePtr
	case pl.kind == tMap && (pl.strMap || pl.elem.typ == quantityType):
		return shareMap
	}
	return shareNone
}

// errUnshare stops a decode that would change a shared value.
var errUnshare = errors.New("jsondec: a repeated key would change a shared value")

// shared decodes the field f at fp, whose value starts at p.i, from or
// into the table.
func (p *parser) shared(f *tfield, fp unsafe.Pointer, depth int) error {
	prior := p.priorPtr // the previous version's value of the field (see prior.go)
	p.priorPtr = nil
	p.skipSpace()
	if p.i >= len(p.data) || p.data[p.i] == 'n' {
		return p.into(f.plan, fp, depth) // null clears the field; the end is an error
	}
	pl := f.plan
	// Whether or not this value is looked up, a field that already has
	// a value (its key came before) may hold one from the table, which
	// decoding into would change.
	switch f.share {
	case shareSlice:
		if h := (*sliceHeader)(fp); h.data != nil {
			return errUnshare
		}
	case sharePtr, shareMap:
		if *(*unsafe.Pointer)(fp) != nil {
			return errUnshare
		}
	case shareBlob:
		if pl.kind == tPtr && *(*unsafe.Pointer)(fp) != nil || pl.kind != tPtr && (*metav1.FieldsV1)(fp).Raw != nil {
			return errUnshare
		}
	}
	if f.share == shareBlob && p.opts.Prior != nil {
		if found, err := p.priorBlob(pl, fp, depth); found || err != nil {
			return err
		}
	}
	if f.share != shareBlob && !p.opts.Structs || !p.opts.Sharing(f.stat) {
		// Not looked up in the table: compared with the previous
		// version, if there is one, and else decoded.
		if prior != nil {
			if found, err := p.priorPart(f, fp, prior, depth); found || err != nil {
				return err
			}
			p.priorPtr = prior // for the parts inside
		}
		return p.into(pl, fp, depth)
	}
	p.priorPtr = prior // for the parts inside, if decoded in place
	c := p.data[p.i]
	if f.share == shareBlob && c != '{' || f.share == shareSlice && c != '[' || (f.share == sharePtr || f.share == shareMap) && c != '{' {
		return p.into(pl, fp, depth) // the plain decoder reports the mismatch
	}
	if depth >= maxDepth {
		return p.errf("exceeded max depth")
	}
	start := p.i
	raw, n, err := p.skipCount(depth)
	if err != nil {
		return err
	}
	if f.share == shareBlob && len(raw) < intern.MinShared || f.share == shareSlice && uintptr(n)*pl.elem.size < intern.MinShared {
		// Too small to be worth an entry, or (a byte array of fewer
		// than 16 bytes) too small for the table to see it die.
		p.i = start
		return p.into(pl, fp, depth)
	}
	p.priorPtr = nil // only the in-place decode below looks at it (into takes it)
	k := intern.KeyOf(raw, unsafe.Pointer(pl))
	v, put := p.opts.Lookup(f.stat, k)
	if v == nil {
		v = p.recall(k)
	}
	if v == nil && prior != nil && p.opts.Structs && sameTyped(raw, pl, prior) {
		// Not in the table, but unchanged since the previous version:
		// looked at only after the table, which finds most parts of
		// objects of one shape at the cost of a hash.
		takePrior(f, fp, prior)
		return nil
	}
	if v == nil && !put {
		// Not met lately, and perhaps unique: decoded in place, as a
		// value that is not shared, and remembered for this object.
		p.i = start
		p.priorPtr = prior
		if err := p.into(pl, fp, depth); err != nil {
			return err
		}
		switch f.share {
		case shareSlice:
			p.remember(k, (*sliceHeader)(fp).data)
		case sharePtr, shareMap:
			p.remember(k, *(*unsafe.Pointer)(fp))
		}
		return nil
	}
	switch f.share {
	case shareBlob:
		if pl.kind == tPtr {
			// The table holds the FieldsV1 itself, so that the objects
			// share its 24 bytes as well as the blob.
			if v == nil {
				c := make([]byte, len(raw))
				copy(c, raw)
				v = p.opts.Share.Put(k, unsafe.Pointer(&metav1.FieldsV1{Raw: c}), fieldsV1PtrType, 0)
			}
			*(**metav1.FieldsV1)(fp) = (*metav1.FieldsV1)(v)
			return nil
		}
		if v == nil {
			c := make([]byte, len(raw))
			copy(c, raw)
			v = p.opts.Share.Put(k, unsafe.Pointer(&c[0]), bytesType, len(c))
		}
		(*metav1.FieldsV1)(fp).Raw = unsafe.Slice((*byte)(v), len(raw))
		return nil
	case shareSlice:
		h := (*sliceHeader)(fp)
		if v == nil {
			// Exactly n elements, decoded by a parser whose strings are
			// its own, so that the shared value never keeps the text of
			// the object it was first decoded for alive.
			h.data, h.len, h.cap = newArray(pl.elem.typ, n), 0, n
			sub := parser{data: raw, opts: p.opts, sizer: p.opts.FieldSizer(f.stat), next: p.next}
			if err := sub.slice(pl, fp, depth); err != nil {
				return err
			}
			sub.learn()
			if h.len != n || h.cap != n {
				return p.errf("array changed length while decoding") // cannot happen: the skip counted it
			}
			v = p.opts.Share.Put(k, h.data, pl.typ, n)
		}
		h.data, h.len, h.cap = v, n, n
		return nil
	case sharePtr:
		if v == nil {
			obj := reflect.New(pl.elem.typ).UnsafePointer()
			sub := parser{data: raw, opts: p.opts, sizer: p.opts.FieldSizer(f.stat), next: p.next}
			if err := sub.into(pl.elem, obj, depth); err != nil {
				return err
			}
			sub.learn()
			v = p.opts.Share.Put(k, obj, pl.typ, 0)
		}
		*(*unsafe.Pointer)(fp) = v
		return nil
	default: // shareMap
		if v == nil {
			*(*unsafe.Pointer)(fp) = reflect.MakeMapWithSize(pl.typ, n).UnsafePointer()
			sub := parser{data: raw, opts: p.opts, sizer: p.opts.FieldSizer(f.stat), next: p.next}
			if err := sub.mapInto(pl, fp, depth); err != nil {
				return err
			}
			sub.learn()
			v = p.opts.Share.Put(k, *(*unsafe.Pointer)(fp), pl.typ, 0)
		}
		*(*unsafe.Pointer)(fp) = v
		return nil
	}
}

var (
	bytesType    = reflect.TypeFor[[]byte]()
	anyMapType   = reflect.TypeFor[map[string]any]()
	anySliceType = reflect.TypeFor[[]any]()
	mapType      = rtype(anyMapType)
	sliceType    = rtype(anySliceType)
)

// sharedValue parses the value at p.i, the member k of an object below the
// top level, taking it from the table when it is an object or an array
// whose text was decoded before.
func (p *parser) sharedValue(k string, depth int) (any, error) {
	prior := p.prior // the previous version's value here (see prior.go)
	field := intern.Named(k)
	if p.i >= len(p.data) || p.data[p.i] != '{' && p.data[p.i] != '[' {
		return p.value(depth)
	}
	sharing := p.opts.Sharing(field)
	if !sharing && prior == nil {
		return p.value(depth)
	}
	start := p.i
	raw, n, err := p.skipCount(depth)
	if err != nil {
		return nil, err
	}
	if !sharing && sameJSON(raw, prior) { // prior is not nil
		p.prior = nil
		return prior, nil
	}
	if !sharing || n == 0 {
		p.i = start // p.prior still holds prior, for the parts inside
		return p.value(depth)
	}
	p.prior = nil
	// On a miss, a parser whose strings are its own, as in shared.
	sub := parser{data: raw, opts: p.opts}
	if raw[0] == '{' {
		key := intern.KeyOf(raw, mapType)
		v, put := p.opts.Lookup(field, key)
		if v == nil {
			v = p.recall(key)
		}
		if v == nil && prior != nil && sameJSON(raw, prior) {
			return prior, nil // not in the table, but unchanged
		}
		if v == nil && !put {
			p.i = start // not met lately: decoded in place, and remembered
			p.prior = prior
			m, err := p.object(depth, "")
			if err == nil {
				p.remember(key, *(*unsafe.Pointer)(unsafe.Pointer(&m)))
			}
			return m, err
		}
		if v == nil {
			sub.sizer = p.opts.FieldSizer(field)
			m, err := sub.object(depth, "")
			if err != nil {
				return nil, err
			}
			sub.learn()
			v = p.opts.Share.Put(key, *(*unsafe.Pointer)(unsafe.Pointer(&m)), anyMapType, 0)
		}
		return *(*map[string]any)(unsafe.Pointer(&v)), nil
	}
	key := intern.KeyOf(raw, sliceType)
	v, put := p.opts.Lookup(field, key)
	if v == nil {
		v = p.recall(key)
	}
	if v == nil && prior != nil && sameJSON(raw, prior) {
		return prior, nil // not in the table, but unchanged
	}
	if v == nil && !put {
		p.i = start // not met lately: decoded in place, and remembered
		p.prior = prior
		a, err := p.arrayOf(depth, n)
		if err == nil && len(a) == n && cap(a) == n {
			p.remember(key, unsafe.Pointer(unsafe.SliceData(a)))
		}
		return a, err
	}
	if v == nil {
		sub.sizer = p.opts.FieldSizer(field)
		a, err := sub.arrayOf(depth, n) // counted by the skip above
		if err != nil {
			return nil, err
		}
		sub.learn()
		if len(a) != n || cap(a) != n {
			return nil, p.errf("array changed length while decoding") // cannot happen: the skip counted it
		}
		v = p.opts.Share.Put(key, unsafe.Pointer(unsafe.SliceData(a)), anySliceType, n)
	}
	return unsafe.Slice((*any)(v), n), nil
}
