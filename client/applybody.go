package client

import (
	"encoding"
	"encoding/json"
	"fmt"
	"reflect"
	"strings"
)

// applyBody encodes obj as the body of a server-side apply: the fields
// obj sets, and no others, so that the field manager owns exactly what
// the caller wrote. A field of a struct is set when it is
//
//   - a pointer, slice, map or interface that is not nil (so a pointer to
//     a zero value, such as replicas: ptr(0), or an empty emptyDir: {},
//     is sent);
//   - a struct holding at least one set field, or, for a type that
//     encodes itself (a time, a quantity, an int-or-string), one that is
//     not its zero value;
//   - any other value that is not zero, or whose field has no omitempty
//     (a required field is sent as written).
//
// Elements of slices and values of maps are sent whatever they hold (an
// element is there because the caller put it there), each encoded by the
// same rules. Objects that encode themselves as a whole, such as
// *unstructured.Unstructured, are sent as they encode.
func applyBody(obj any) ([]byte, error) {
	v, err := present(reflect.ValueOf(obj))
	if err != nil {
		return nil, err
	}
	return json.Marshal(v)
}

var (
	jsonMarshaler = reflect.TypeFor[json.Marshaler]()
	textMarshaler = reflect.TypeFor[encoding.TextMarshaler]()
)

// encodesItself reports whether values of t marshal themselves.
func encodesItself(t reflect.Type) bool {
	pt := reflect.PointerTo(t)
	return t.Implements(jsonMarshaler) || pt.Implements(jsonMarshaler) ||
		t.Implements(textMarshaler) || pt.Implements(textMarshaler)
}

// marshalLeaf encodes v with its own marshaler (through a pointer, for a
// pointer receiver).
func marshalLeaf(v reflect.Value) (json.RawMessage, error) {
	if !v.CanAddr() {
		p := reflect.New(v.Type())
		p.Elem().Set(v)
		v = p.Elem()
	}
	data, err := json.Marshal(v.Addr().Interface())
	return json.RawMessage(data), err
}

// present encodes v, which the caller put where it is (an element, a map
// value, the target of a pointer), whatever it holds.
func present(v reflect.Value) (any, error) {
	if !v.IsValid() {
		return nil, nil
	}
	t := v.Type()
	if t.Kind() != reflect.Pointer && t.Kind() != reflect.Interface && encodesItself(t) {
		return marshalLeaf(v)
	}
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface:
		if v.IsNil() {
			return nil, nil
		}
		return present(v.Elem())
	case reflect.Struct:
		m := map[string]any{}
		if err := setFields(m, v); err != nil {
			return nil, err
		}
		return m, nil
	case reflect.Slice:
		if v.IsNil() {
			return nil, nil
		}
		if t.Elem().Kind() == reflect.Uint8 {
			return v.Interface(), nil // base64, as encoding/json sends bytes
		}
		fallthrough
	case reflect.Array:
		out := make([]any, v.Len())
		for i := range out {
			e, err := present(v.Index(i))
			if err != nil {
				return nil, err
			}
			out[i] = e
		}
		return out, nil
	case reflect.Map:
		if v.IsNil() {
			return nil, nil
		}
		if t.Key().Kind() != reflect.String {
			return marshalLeaf(v)
		}
		out := make(map[string]any, v.Len())
		for it := v.MapRange(); it.Next(); {
			e, err := present(it.Value())
			if err != nil {
				return nil, err
			}
			out[it.Key().String()] = e
		}
		return out, nil
	case reflect.Func, reflect.Chan, reflect.Complex64, reflect.Complex128, reflect.UnsafePointer:
		return nil, fmt.Errorf("client: apply: cannot encode a %s", t)
	default:
		return v.Interface(), nil
	}
}

// setFields adds to m the set fields of the struct v (see applyBody),
// with the fields of embedded structs without a JSON name in line.
func setFields(m map[string]any, v reflect.Value) error {
	t := v.Type()
	for i := range t.NumField() {
		f := t.Field(i)
		tag := f.Tag.Get("json")
		if tag == "-" {
			continue
		}
		name, opts, _ := strings.Cut(tag, ",")
		fv := v.Field(i)
		if f.Anonymous && name == "" {
			ft := f.Type
			if ft.Kind() == reflect.Pointer {
				if fv.IsNil() {
					continue
				}
				fv, ft = fv.Elem(), ft.Elem()
			}
			if ft.Kind() == reflect.Struct && !encodesItself(ft) {
				if err := setFields(m, fv); err != nil {
					return err
				}
				continue
			}
		}
		if !f.IsExported() {
			continue
		}
		if name == "" {
			name = f.Name
		}
		val, ok, err := setField(fv, hasOption(opts, "omitempty"))
		if err != nil {
			return fmt.Errorf("%s.%s: %w", t, f.Name, err)
		}
		if ok {
			m[name] = val
		}
	}
	return nil
}

// setField encodes the field value v, and reports whether it is set.
func setField(v reflect.Value, omitempty bool) (any, bool, error) {
	t := v.Type()
	switch t.Kind() {
	case reflect.Pointer, reflect.Interface, reflect.Slice, reflect.Map:
		if v.IsNil() {
			return nil, false, nil
		}
	case reflect.Struct:
		if encodesItself(t) {
			if v.IsZero() {
				return nil, false, nil
			}
			break
		}
		m := map[string]any{}
		if err := setFields(m, v); err != nil {
			return nil, false, err
		}
		return m, len(m) > 0, nil
	default:
		if omitempty && v.IsZero() {
			return nil, false, nil
		}
	}
	val, err := present(v)
	return val, err == nil, err
}

func hasOption(opts, want string) bool {
	for opts != "" {
		var o string
		o, opts, _ = strings.Cut(opts, ",")
		if o == want {
			return true
		}
	}
	return false
}
