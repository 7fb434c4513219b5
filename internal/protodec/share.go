package protodec

import (
	"bytes"
	"errors"
	"reflect"
	"sync"
	"unsafe"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// managedFieldsNum is ObjectMeta.ManagedFields' field number.
const managedFieldsNum = 17

// minShared is the smallest value worth a table entry.
const minShared = intern.MinShared

// sharing reports whether f's values are still looked up.
func (d *decoder) sharing(f *field) bool { return d.opts.Sharing(f.stat) }

// shared decodes the field at start (header included; data is its
// payload, fieldLen its length with the header) from or into the table, when it is a kind that is shared: a
// run of repeated messages or of string-map entries, or a pointer to a
// message. It returns how many bytes of start it consumed, 0 if the
// field is left to the plain decoder.
//
// pf is the previous version's field (intern.Options.Prior), or nil. A
// part met again lately (put) and not in the table may be met again
// because it is the same object's next version: if the previous version
// holds an equal value, the new version takes that, so that a relist or
// an update that leaves the part alone adds no table entry.
func (d *decoder) shared(p *plan, num uint64, f *field, fp, pf unsafe.Pointer, data, start []byte, fieldLen int) (int, error) {
	if !d.opts.Structs || f.timed || !f.shareable || !d.sharing(f) {
		return 0, nil
	}
	switch {
	case f.isMap && (f.strMap || f.qtyMap) && *(*unsafe.Pointer)(fp) == nil && d.canShare():
		n, end := runEnd(start, num)
		run := start[:end]
		k := intern.KeyOf(run, rtype(f.typ))
		m, put := d.lookup(f, k)
		if m == nil {
			m = d.recall(k)
		}
		d.markShared(fp)
		if m != nil {
			*(*unsafe.Pointer)(fp) = m
			return end, nil
		}
		*(*unsafe.Pointer)(fp) = reflect.MakeMapWithSize(f.typ, n).UnsafePointer()
		sub := d.forPart(run, f, put)
		for rb := run; len(rb) > 0; {
			_, wt, _, payload, rest, err := next(rb)
			if err != nil {
				return 0, err
			}
			if wt != 2 {
				return 0, wireErr(p, num, wt)
			}
			if err := sub.mapEntry(f, fp, payload); err != nil {
				return 0, err
			}
			rb = rest
		}
		if q := fromPrior(put, pf, *(*unsafe.Pointer)(fp), f.typ, 0); q != nil {
			*(*unsafe.Pointer)(fp) = q
			return end, nil
		}
		*(*unsafe.Pointer)(fp) = d.keepPart(sub, k, *(*unsafe.Pointer)(fp), put, f.typ, 0)
		return end, nil

	case f.rep && f.kind == kMessage && p != d.root && (*sliceHeader)(fp).len == 0:
		n, end := runEnd(start, num)
		esize := f.elem.Size()
		if uintptr(n)*esize < minShared {
			return 0, nil
		}
		run := start[:end]
		k := intern.KeyOf(run, rtype(f.typ)) // the slice type: a run never meets a pointer to one element
		h := (*sliceHeader)(fp)
		a, put := d.lookup(f, k)
		if a == nil {
			a = d.recall(k)
		}
		if a != nil {
			h.data, h.len, h.cap = a, n, n
			return end, nil
		}
		a = newArray(f.elem, n)
		sub := d.forPart(run, f, put)
		rb := run
		for i := range n {
			_, wt, _, payload, rest, err := next(rb)
			if err != nil {
				return 0, err
			}
			if wt != 2 {
				return 0, wireErr(p, num, wt)
			}
			sub.prior = priorElem(pf, i, esize) // for the parts inside
			if err := sub.message(f.sub, payload, unsafe.Add(a, uintptr(i)*esize)); err != nil {
				return 0, err
			}
			rb = rest
		}
		if q := fromPrior(put, pf, a, f.typ, n); q != nil {
			h.data, h.len, h.cap = q, n, n
			return end, nil
		}
		h.data, h.len, h.cap = d.keepPart(sub, k, a, put, f.typ, n), n, n
		return end, nil

	case f.ptr && f.kind == kMessage && *(*unsafe.Pointer)(fp) == nil && f.elem.Size() >= minShared && d.canShare():
		end := fieldLen
		k := intern.KeyOf(data, rtype(f.elem))
		v, put := d.lookup(f, k)
		if v == nil {
			v = d.recall(k)
		}
		d.markShared(fp)
		if v != nil {
			*(*unsafe.Pointer)(fp) = v
			return end, nil
		}
		v = unsafe_New(rtype(f.elem))
		sub := d.forPart(data, f, put)
		if pf != nil {
			sub.prior = *(*unsafe.Pointer)(pf) // for the parts inside
		}
		if err := sub.message(f.sub, data, v); err != nil {
			return 0, err
		}
		if q := fromPrior(put, pf, v, f.typ, 0); q != nil {
			*(*unsafe.Pointer)(fp) = q
			return end, nil
		}
		*(*unsafe.Pointer)(fp) = d.keepPart(sub, k, v, put, f.typ, 0)
		return end, nil
	}
	return 0, nil
}

// errUnshare stops a decode that would merge into a shared value.
var errUnshare = errors.New("protodec: a repeated field would change a shared value")

// markShared records that the field at fp holds a value from the table.
// The caller has checked canShare.
func (d *decoder) markShared(fp unsafe.Pointer) {
	d.sharedFP[d.nShared] = fp
	d.nShared++
}

// canShare reports whether another map or pointer field can be shared:
// a decoder records a few, for isShared, and decodes the rest itself.
func (d *decoder) canShare() bool { return d.nShared < len(d.sharedFP) }

// isShared reports whether the field at fp holds a value from the table.
func (d *decoder) isShared(fp unsafe.Pointer) bool {
	for _, p := range d.sharedFP[:d.nShared] {
		if p == fp {
			return true
		}
	}
	return false
}

// sharedBytes returns a copy of data from the table (a new one on a
// miss), whose capacity is its length, so that appending to it copies.
func (d *decoder) sharedBytes(f *field, data []byte) []byte {
	if b := d.priorBytes(data); b != nil {
		return b
	}
	if !d.sharing(f) {
		return exactCopy(data)
	}
	k := intern.KeyOf(data, rtype(bytesType))
	p, put := d.lookup(f, k)
	if p != nil {
		return unsafe.Slice((*byte)(p), len(data))
	}
	if !put {
		return exactCopy(data) // not met lately
	}
	c := exactCopy(data)
	return unsafe.Slice((*byte)(d.opts.Share.Put(k, unsafe.Pointer(&c[0]), bytesType, len(c))), len(data))
}

// exactCopy returns a copy of b whose capacity is its length.
func exactCopy(b []byte) []byte {
	c := make([]byte, len(b))
	copy(c, b)
	return c
}

// lookup returns k's value in the table, counting the try for f, and
// whether the caller is to put a value of its own there on a miss (see
// intern.Options.Lookup).
func (d *decoder) lookup(f *field, k intern.Key) (unsafe.Pointer, bool) {
	return d.opts.Lookup(f.stat, k)
}

// forPart returns the decoder of a part of f: with put, a child (the part
// goes to the table); without, d itself, since the part, met for the first
// time lately, is the object's own.
func (d *decoder) forPart(data []byte, f *field, put bool) *decoder {
	if !put {
		return d
	}
	sub := d.child(data, f)
	return &sub
}

// keepPart returns the part v, with key k, that dec decoded: put in the
// table with put, else remembered as the object's own (see recall). typ
// and n describe v as intern.Table.Put has it.
func (d *decoder) keepPart(dec *decoder, k intern.Key, v unsafe.Pointer, put bool, typ reflect.Type, n int) unsafe.Pointer {
	if put {
		dec.learn()
		return d.opts.Share.Put(k, v, typ, n)
	}
	d.remember(k, v)
	return v
}

// remember records that the part k of this object, decoded in place, is
// at v, so that the same part met again in this object (a template's
// labels that repeat the object's own) is one value, at no cost to the
// table.
func (d *decoder) remember(k intern.Key, v unsafe.Pointer) {
	d.local[d.nLocal%len(d.local)] = localPart{k, v}
	d.nLocal++
}

// recall returns the part k of this object that remember recorded, or nil.
func (d *decoder) recall(k intern.Key) unsafe.Pointer {
	for _, l := range d.local[:min(d.nLocal, len(d.local))] {
		if l.k == k {
			return l.v
		}
	}
	return nil
}

type localPart struct {
	k intern.Key
	v unsafe.Pointer // a map, an array or a struct
}

// child returns a decoder for a value of f that may be shared: its
// strings get blocks of their own, so that a shared value never keeps the
// strings of the object it was first decoded for alive, sized by what
// f's earlier values kept.
func (d *decoder) child(data []byte, f *field) decoder {
	return decoder{data: data, root: d.root, opts: d.opts, sizer: d.opts.FieldSizer(f.stat), depth: d.depth, maxDepth: d.maxDepth}
}

// runEnd returns how many consecutive fields numbered num start b, and
// where the run ends.
func runEnd(b []byte, num uint64) (n, end int) {
	all := len(b)
	for len(b) > 0 {
		key, _, err := varint(b)
		if err != nil || key>>3 != num {
			break
		}
		_, _, _, _, rest, err := next(b)
		if err != nil {
			break
		}
		b = rest
		n++
	}
	return n, all - len(b)
}

var pointerTypes sync.Map // reflect.Type → bool

// SupportedPointer reports whether v, a pointer to a struct, can be
// decoded by this package. The answer is cached per type.
func SupportedPointer(v any) bool {
	t := reflect.TypeOf(v)
	if ok, found := pointerTypes.Load(t); found {
		return ok.(bool)
	}
	ok := t != nil && t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && Supported(t.Elem())
	pointerTypes.Store(t, ok)
	return ok
}

// fromPrior returns the previous version's value of a part, held at pf,
// when it equals v, the part just decoded for the table (put), and nil
// otherwise or when there is no previous version. typ is the field's
// type: a map (v is the map), a slice (v is the first of n elements) or a
// pointer (v is what it points to). A part decoded as the object's own
// (not put) is kept: it costs the table nothing.
func fromPrior(put bool, pf, v unsafe.Pointer, typ reflect.Type, n int) unsafe.Pointer {
	if !put || pf == nil {
		return nil
	}
	var a, b any
	switch typ.Kind() {
	case reflect.Map, reflect.Pointer:
		q := *(*unsafe.Pointer)(pf)
		if q == nil {
			return nil
		}
		if typ.Kind() == reflect.Map {
			a, b = reflect.NewAt(typ, unsafe.Pointer(&v)).Interface(), reflect.NewAt(typ, unsafe.Pointer(&q)).Interface()
		} else {
			a, b = reflect.NewAt(typ.Elem(), v).Interface(), reflect.NewAt(typ.Elem(), q).Interface()
		}
		if reflect.DeepEqual(a, b) {
			return q
		}
	case reflect.Slice:
		h := (*sliceHeader)(pf)
		if h.data == nil || h.len != n {
			return nil
		}
		mine := sliceHeader{data: v, len: n, cap: n}
		theirs := sliceHeader{data: h.data, len: n, cap: n}
		a, b = reflect.NewAt(typ, unsafe.Pointer(&mine)).Interface(), reflect.NewAt(typ, unsafe.Pointer(&theirs)).Interface()
		if reflect.DeepEqual(a, b) {
			return h.data
		}
	}
	return nil
}

// managedFielder is an object with managed fields: a Prior whose blobs a
// new version may reuse.
type managedFielder interface {
	GetManagedFields() []metav1.ManagedFieldsEntry
}

// priorBytes returns the managed-fields blob of the object's previous
// version (intern.Options.Prior) that holds the bytes data, or nil. Both
// versions belong to a cache and never change, so they can hold one copy.
func (d *decoder) priorBytes(data []byte) []byte {
	mf, ok := d.opts.Prior.(managedFielder)
	if !ok {
		return nil
	}
	for _, e := range mf.GetManagedFields() {
		if e.FieldsV1 != nil && bytes.Equal(e.FieldsV1.Raw, data) {
			return e.FieldsV1.Raw[:len(data):len(data)]
		}
	}
	return nil
}
