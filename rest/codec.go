package rest

import (
	"encoding/json"
	"errors"
	"fmt"
	"mime"
	"reflect"
	"strings"
	"sync"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
	"github.com/loom-k8s/loom/internal/protodec"
)

// ContentType selects the wire format a [Client] asks for.
type ContentType int

const (
	// JSON asks for application/json for everything. It is the default.
	JSON ContentType = iota
	// Protobuf asks for application/vnd.kubernetes.protobuf when the
	// target type has a protobuf form (the built-in types of k8s.io/api and
	// metav1 do), and JSON otherwise (unstructured objects, custom
	// resources). The server still answers JSON for resources it cannot
	// encode as protobuf; the decoder follows the response's Content-Type.
	Protobuf
)

// String returns "json" or "protobuf".
func (c ContentType) String() string {
	if c == Protobuf {
		return "protobuf"
	}
	return "json"
}

// Media types.
const (
	MediaTypeJSON     = "application/json"
	MediaTypeProtobuf = "application/vnd.kubernetes.protobuf"

	acceptProtobuf = MediaTypeProtobuf + ", " + MediaTypeJSON
)

// protoMagic prefixes every protobuf-encoded object (a runtime.Unknown).
var protoMagic = []byte{'k', '8', 's', 0}

// protoUnmarshaler is implemented by the generated protobuf code of the
// k8s.io/api and metav1 types.
type protoUnmarshaler interface {
	Unmarshal([]byte) error
}

type protoMarshaler interface {
	Marshal() ([]byte, error)
}

type resetter interface{ Reset() }

type objectKinder interface {
	GetObjectKind() schema.ObjectKind
}

// hasProtobuf reports whether values like v can be decoded from protobuf.
// Types that implement json.Unmarshaler themselves (Unstructured) are JSON
// only even if they happen to have an Unmarshal method.
//
// A type whose protobuf support depends on a type parameter (such as a
// generic list) says so with a HasProtobuf method, which wins.
func hasProtobuf(v any) bool {
	if p, ok := v.(interface{ HasProtobuf() bool }); ok {
		return p.HasProtobuf()
	}
	_, ok := v.(protoUnmarshaler)
	return ok
}

// fastProtobuf reports whether v (a pointer to a struct) can be decoded by
// the allocation-lean reflective decoder in internal/protodec rather than
// the generated Unmarshal method.
func fastProtobuf(v any) bool {
	if _, custom := v.(interface{ HasProtobuf() bool }); custom {
		return false // a type with its own protobuf decoding (a generic list) keeps it
	}
	return protodec.SupportedPointer(v)
}

// mediaType returns the media type of a Content-Type header, lower-cased
// and without parameters.
func mediaType(contentType string) string {
	if contentType == "" {
		return ""
	}
	mt, _, err := mime.ParseMediaType(contentType)
	if err != nil {
		if i := strings.IndexByte(contentType, ';'); i >= 0 {
			contentType = contentType[:i]
		}
		return strings.ToLower(strings.TrimSpace(contentType))
	}
	return mt
}

// decodeInto decodes a whole response body of the given media type into v.
// Objects decoded from protobuf get their apiVersion and kind set from the
// envelope, so that JSON and protobuf results are identical.
func decodeInto(mt string, data []byte, v any, o intern.Options) error {
	switch mt {
	case MediaTypeProtobuf:
		env, err := parseUnknown(data)
		if err != nil {
			return err
		}
		return decodeProtoObject(env, v, o)
	case MediaTypeJSON, "":
		if len(data) == 0 {
			return errors.New("empty response body")
		}
		return decodeJSON(data, v, o)
	default:
		return fmt.Errorf("unsupported response content type %q", mt)
	}
}

// decodeProtoObject decodes a protobuf envelope's object into v; o are
// the options of Loom's own decoder (sharing, for informers).
func decodeProtoObject(env unknown, v any, o intern.Options) error {
	pm, ok := v.(protoUnmarshaler)
	if !ok {
		return fmt.Errorf("response is protobuf but %T has no protobuf form", v)
	}
	if env.contentEncoding != "" {
		return fmt.Errorf("unsupported protobuf content encoding %q", env.contentEncoding)
	}
	if r, ok := v.(resetter); ok {
		r.Reset()
	}
	var err error
	if fastProtobuf(v) {
		err = protodec.UnmarshalWith(env.raw, v, o)
	} else {
		err = pm.Unmarshal(env.raw)
	}
	if err != nil {
		return fmt.Errorf("decoding protobuf %s: %w", env.kind, err)
	}
	if ok, kinder := objectKind(v); ok && env.kind != "" {
		kinder.SetGroupVersionKind(schema.FromAPIVersionAndKind(env.apiVersion, env.kind))
	}
	return nil
}

func objectKind(v any) (bool, schema.ObjectKind) {
	k, ok := v.(objectKinder)
	if !ok {
		return false, nil
	}
	ok2 := k.GetObjectKind()
	return ok2 != nil, ok2
}

var fastJSONTypes sync.Map // reflect.Type → bool

// fastJSON reports whether v (a pointer to a struct) can be decoded by
// internal/jsondec's typed decoder. The answer is cached per type.
func fastJSON(v any) bool {
	t := reflect.TypeOf(v)
	if ok, found := fastJSONTypes.Load(t); found {
		return ok.(bool)
	}
	ok := t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct && !reflect.PointerTo(t.Elem()).Implements(jsonUnmarshalerType) && jsondec.TypedSupported(t.Elem())
	fastJSONTypes.Store(t, ok)
	return ok
}

var jsonUnmarshalerType = reflect.TypeFor[json.Unmarshaler]()

// decodeJSON decodes one JSON value into v with the semantics of
// apimachinery's util/json, which client-go uses: keys match field names
// exactly, and numbers in interface{} values are int64 unless they have a
// '.'. Unstructured objects go through internal/jsondec's map parser,
// struct types through its typed decoder (both checked against util/json
// by differential fuzz tests), and types it cannot plan (or that decode
// themselves) through encoding/json. o are the typed decoder's options
// (sharing, for informers).
func decodeJSON(data []byte, v any, o intern.Options) error {
	if u, ok := v.(*unstructured.Unstructured); ok {
		m, err := jsondec.ObjectWith(data, o)
		if err != nil {
			return err
		}
		if kind, _ := m["kind"].(string); kind == "" {
			return errors.New("object has no kind")
		}
		u.Object = m
		return nil
	}
	if fastJSON(v) {
		return jsondec.DecodeWith(data, v, o)
	}
	return json.Unmarshal(data, v)
}

// encodeBody encodes obj for a request body. Protobuf is used only when
// asked for, when obj has a protobuf form, and when obj carries its
// apiVersion and kind (the envelope needs them); JSON otherwise.
func encodeBody(ct ContentType, obj any) ([]byte, string, error) {
	if ct == Protobuf {
		if pm, ok := obj.(protoMarshaler); ok {
			if ok, kinder := objectKind(obj); ok {
				if gvk := kinder.GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
					raw, err := pm.Marshal()
					if err != nil {
						return nil, "", fmt.Errorf("encoding %T as protobuf: %w", obj, err)
					}
					apiVersion, kind := gvk.ToAPIVersionAndKind()
					u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
					b, err := u.Marshal()
					if err != nil {
						return nil, "", err
					}
					return append(append(make([]byte, 0, len(protoMagic)+len(b)), protoMagic...), b...), MediaTypeProtobuf, nil
				}
			}
		}
	}
	b, err := json.Marshal(obj)
	if err != nil {
		return nil, "", fmt.Errorf("encoding %T as JSON: %w", obj, err)
	}
	return b, MediaTypeJSON, nil
}
