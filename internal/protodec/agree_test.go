package protodec

import (
	"errors"
	"fmt"
	"reflect"
	"strconv"
	"strings"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
)

// agree fails t when protodec and the generated code (the reference)
// disagree about whether data, a message of Go type typ, decodes:
// errWant is the generated Unmarshal's error, errGot protodec's. It
// reports whether both decoded data, so that their results must be equal.
//
// On well-formed input (wellFormed) the two must agree: protodec may
// reject only what it rejects by design, a message nested deeper than
// MaxDepth (ErrTooDeep). On malformed input the generated code is lax
// where protodec is strict (it reads a packed run's last varint or a map
// entry's key past their end, ignores the wire types of a map entry's
// key and value, and takes field number 0 in a map entry for an unknown
// field), so protodec may reject what it accepts, but not the other way
// round. An input with a field number above 2^29-1 is compared not at
// all: the generated code reads field numbers as int32, so that it takes
// 2^32+1 for field 1 and fails on 2^31, where protodec skips both as
// unknown fields.
func agree(t *testing.T, data []byte, typ reflect.Type, errWant, errGot error) bool {
	t.Helper()
	malformed := wellFormed(data, typ)
	switch {
	case errors.Is(malformed, errFieldNumber):
		return false
	case errWant != nil && errGot == nil:
		t.Fatalf("protodec decodes what the generated code rejects (%v); malformed: %v", errWant, malformed)
	case errWant == nil && errGot != nil && malformed == nil && !errors.Is(errGot, ErrTooDeep):
		t.Fatalf("protodec rejects well-formed input that the generated code decodes: %v", errGot)
	}
	return errWant == nil && errGot == nil
}

// errFieldNumber is wellFormed's error for a field number above 2^29-1.
var errFieldNumber = errors.New("field number out of range")

// wellFormed returns nil if data is a well-formed protobuf encoding of a
// message of Go type typ (a struct with protobuf tags), and otherwise
// what is wrong with it. It is written apart from the decoder under
// test, from the protobuf encoding's rules: each field's tag has a
// number from 1 to 2^29-1 and a wire type of 0, 1, 2, 3 (a group, up to
// the end-group tag of the same number) or 5, and a value of that wire
// type that ends within its message; a message field's value is a
// well-formed message of its type, a map entry's key and value are
// length-delimited, and a packed run holds whole values. Types that
// decode themselves (metav1.Time, resource.Quantity, …) are left to their
// own Unmarshal, which both decoders call.
func wellFormed(data []byte, typ reflect.Type) error {
	return checkMessage(data, typ)
}

func checkMessage(b []byte, typ reflect.Type) error {
	fields := taggedFields(typ)
	for len(b) > 0 {
		num, wt, payload, rest, err := wireField(b)
		if err != nil {
			return err
		}
		b = rest
		ft, known := fields[num]
		if !known || wt != 2 {
			continue // an unknown field; or a wrong wire type, which both decoders reject
		}
		if err := checkValue(payload, ft); err != nil {
			return fmt.Errorf("%v field %d: %w", typ, num, err)
		}
	}
	return nil
}

// checkValue checks b, the length-delimited value of a field of type t.
func checkValue(b []byte, t reflect.Type) error {
	if decodesItself(t) {
		return nil
	}
	switch t.Kind() {
	case reflect.Pointer:
		return checkValue(b, t.Elem())
	case reflect.Struct:
		return checkMessage(b, t)
	case reflect.Map:
		return checkMapEntry(b, t.Elem())
	case reflect.Slice:
		e := t.Elem()
		switch e.Kind() {
		case reflect.Uint8, reflect.String:
			return nil // bytes, or one string of a repeated field
		case reflect.Struct, reflect.Pointer, reflect.Slice, reflect.Map:
			return checkValue(b, e) // one element
		case reflect.Float64:
			if len(b)%8 != 0 {
				return fmt.Errorf("a packed run of %d bytes of doubles", len(b))
			}
		case reflect.Float32:
			if len(b)%4 != 0 {
				return fmt.Errorf("a packed run of %d bytes of floats", len(b))
			}
		default: // a packed run of varints
			for len(b) > 0 {
				_, n := wireVarint(b)
				if n <= 0 {
					return errors.New("a packed run ends inside a varint")
				}
				b = b[n:]
			}
		}
	}
	return nil // a string's bytes are its value
}

// checkMapEntry checks a map entry: its key (1) is a string and its
// value (2) of type vt; other fields are unknown ones.
func checkMapEntry(b []byte, vt reflect.Type) error {
	for len(b) > 0 {
		num, wt, payload, rest, err := wireField(b)
		if err != nil {
			return fmt.Errorf("map entry: %w", err)
		}
		b = rest
		switch num {
		case 1:
			if wt != 2 {
				return fmt.Errorf("map key of wire type %d", wt)
			}
		case 2:
			if want := wireTypeOf(vt); wt != want {
				return fmt.Errorf("map value of wire type %d, want %d", wt, want)
			}
			if wt == 2 {
				if err := checkValue(payload, vt); err != nil {
					return fmt.Errorf("map value: %w", err)
				}
			}
		}
	}
	return nil
}

// wireTypeOf is the wire type of a single value of type t.
func wireTypeOf(t reflect.Type) uint64 {
	if decodesItself(t) {
		return 2
	}
	switch t.Kind() {
	case reflect.Bool, reflect.Int, reflect.Int8, reflect.Int16, reflect.Int32, reflect.Int64,
		reflect.Uint, reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
		return 0
	case reflect.Float64:
		return 1
	case reflect.Float32:
		return 5
	}
	return 2
}

// wireField reads one field: its number, wire type, value (for wire
// type 2) and what follows. A group (wire type 3) is read up to its end.
func wireField(b []byte) (num, wt uint64, payload, rest []byte, err error) {
	num, wt, b, err = wireTag(b)
	if err != nil {
		return 0, 0, nil, nil, err
	}
	if wt != 3 {
		payload, rest, err = wireValue(b, wt)
		return num, wt, payload, rest, err
	}
	// Groups nest; the end-group tags close them innermost first.
	open := []uint64{num}
	for len(open) > 0 {
		inum, iwt, r, err := wireTag(b)
		if err != nil {
			return 0, 0, nil, nil, fmt.Errorf("in group %d: %w", open[len(open)-1], err)
		}
		b = r
		switch iwt {
		case 3:
			open = append(open, inum)
		case 4:
			if inum != open[len(open)-1] {
				return 0, 0, nil, nil, fmt.Errorf("group %d ended by end-group %d", open[len(open)-1], inum)
			}
			open = open[:len(open)-1]
		default:
			if _, b, err = wireValue(b, iwt); err != nil {
				return 0, 0, nil, nil, err
			}
		}
	}
	return num, 3, nil, b, nil
}

// wireTag reads a field's tag.
func wireTag(b []byte) (num, wt uint64, rest []byte, err error) {
	key, n := wireVarint(b)
	if n <= 0 {
		return 0, 0, nil, errors.New("a tag ends inside a varint")
	}
	num, wt = key>>3, key&7
	switch {
	case num == 0:
		return 0, 0, nil, errors.New("field number 0")
	case num > 1<<29-1:
		return 0, 0, nil, fmt.Errorf("%w: %d", errFieldNumber, num)
	}
	return num, wt, b[n:], nil
}

// wireValue reads a value of wire type wt (not a group) from b.
func wireValue(b []byte, wt uint64) (payload, rest []byte, err error) {
	switch wt {
	case 0:
		if _, n := wireVarint(b); n > 0 {
			return nil, b[n:], nil
		}
		return nil, nil, errors.New("a varint value ends inside the varint")
	case 1, 5:
		size := 8
		if wt == 5 {
			size = 4
		}
		if len(b) < size {
			return nil, nil, fmt.Errorf("a fixed value of %d bytes with %d left", size, len(b))
		}
		return nil, b[size:], nil
	case 2:
		l, n := wireVarint(b)
		if n <= 0 || l > uint64(len(b)-n) {
			return nil, nil, errors.New("a length-delimited value runs past its message")
		}
		return b[n : n+int(l)], b[n+int(l):], nil
	}
	return nil, nil, fmt.Errorf("wire type %d", wt)
}

// wireVarint reads a varint of at most 10 bytes; n <= 0 if there is none.
func wireVarint(b []byte) (v uint64, n int) {
	for i := 0; i < len(b) && i < 10; i++ {
		v |= uint64(b[i]&0x7f) << (7 * i)
		if b[i] < 0x80 {
			return v, i + 1
		}
	}
	return 0, 0
}

// decodesItself reports whether t has its own protobuf form: an Unmarshal
// method and no protobuf-tagged fields (metav1.Time, resource.Quantity,
// metav1.Verbs, …).
func decodesItself(t reflect.Type) bool {
	if !reflect.PointerTo(t).Implements(reflect.TypeFor[interface{ Unmarshal([]byte) error }]()) {
		return false
	}
	return t.Kind() != reflect.Struct || len(taggedFields(t)) == 0
}

var taggedCache sync.Map // reflect.Type → map[uint64]reflect.Type

// taggedFields maps the field numbers of struct type t's protobuf tags to
// the fields' types.
func taggedFields(t reflect.Type) map[uint64]reflect.Type {
	if m, ok := taggedCache.Load(t); ok {
		return m.(map[uint64]reflect.Type)
	}
	m := map[uint64]reflect.Type{}
	if t.Kind() == reflect.Struct {
		for i := range t.NumField() {
			f := t.Field(i)
			parts := strings.Split(f.Tag.Get("protobuf"), ",")
			if len(parts) < 2 {
				continue
			}
			if num, err := strconv.ParseUint(parts[1], 10, 32); err == nil {
				m[num] = f.Type
			}
		}
	}
	taggedCache.Store(t, m)
	return m
}

// TestWellFormed checks agree's judge of well-formed input on encodings
// the generated code writes and on hand-made malformed ones.
func TestWellFormed(t *testing.T) {
	field := func(num int, payload []byte) []byte { return appendBytesField(nil, num, payload) }
	pod, err := examplePod().Marshal()
	if err != nil {
		t.Fatal(err)
	}
	managed, err := managedPod("p").Marshal()
	if err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		name string
		data []byte
		want string // "" for well-formed; else a part of the error
	}{
		{"a Pod", pod, ""},
		{"a Pod with managed fields", managed, ""},
		{"an unknown group", []byte{14<<3 | 3, 14<<3 | 4}, ""},
		{"nested unknown groups", []byte{14<<3 | 3, 15<<3 | 3, 15<<3 | 4, 14<<3 | 4}, ""},
		{"a group ended by another number", []byte{14<<3 | 3, 15<<3 | 4}, "ended by end-group 15"},
		{"an unended group", []byte{14<<3 | 3}, "in group 14"},
		{"field number 0", []byte{0<<3 | 2, 0}, "field number 0"},
		{"field number 2^32+1", append(appendVarint(nil, (1<<32+1)<<3|2), 0), "out of range"},
		{"a label's key of wire type 0", field(1, field(11, []byte{1<<3 | 0, 1, 'a'})), "map key of wire type 0"},
		{"field number 0 in a label", field(1, field(11, []byte{0<<3 | 2, 0})), "field number 0"},
		{"a packed run that ends inside a varint", field(2, field(14, field(4, []byte{0x01, 0x82}))), "packed run"},
		{"a string past its message", field(1, append(appendVarint([]byte{1<<3 | 2}, 5), 'a')), "runs past"},
	} {
		err := wellFormed(tc.data, reflect.TypeFor[corev1.Pod]())
		switch {
		case tc.want == "" && err != nil:
			t.Errorf("%s: %v, want well-formed", tc.name, err)
		case tc.want != "" && (err == nil || !strings.Contains(err.Error(), tc.want)):
			t.Errorf("%s: %v, want an error with %q", tc.name, err, tc.want)
		}
	}
}
