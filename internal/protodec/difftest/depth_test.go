package difftest

import (
	"reflect"
	"testing"

	"github.com/loom-k8s/loom/internal/apischeme"
	"github.com/loom-k8s/loom/internal/protodec"
)

// TestAPITypesDepth checks that no type of the API groups Loom registers
// nests messages deeper than a few levels, nor is recursive: protodec's
// MaxDepth is for recursive types (a CRD's JSONSchemaProps), far above
// what any of these can reach. The depth counts messages as protodec does
// (the top-level one included), following fields with protobuf tags into
// structs that have such fields themselves (others, such as metav1.Time,
// decode themselves).
func TestAPITypesDepth(t *testing.T) {
	types, err := apischeme.Types()
	if err != nil {
		t.Fatal(err)
	}
	memo := map[reflect.Type]int{}
	var deepest reflect.Type
	most := 0
	for _, typ := range types {
		if !protodec.Supported(typ) {
			continue
		}
		d := messageDepth(t, typ, map[reflect.Type]bool{}, memo)
		if d > most {
			most, deepest = d, typ
		}
	}
	t.Logf("deepest: %v, %d levels", deepest, most)
	if most > 20 || most >= protodec.MaxDepth/100 {
		t.Fatalf("%v nests %d levels of messages", deepest, most)
	}
}

// messageDepth returns the most levels of messages a value of the struct
// type typ can nest, itself included.
func messageDepth(t *testing.T, typ reflect.Type, onPath map[reflect.Type]bool, memo map[reflect.Type]int) int {
	if d, ok := memo[typ]; ok {
		return d
	}
	if onPath[typ] {
		t.Fatalf("%v is recursive", typ)
	}
	onPath[typ] = true
	below := 0
	for i := range typ.NumField() {
		sf := typ.Field(i)
		if tag := sf.Tag.Get("protobuf"); tag == "" || tag == "-" {
			continue
		}
		ft := sf.Type
		for ft.Kind() == reflect.Pointer || ft.Kind() == reflect.Slice || ft.Kind() == reflect.Map {
			ft = ft.Elem()
		}
		if ft.Kind() == reflect.Struct && isMessage(ft) {
			below = max(below, messageDepth(t, ft, onPath, memo))
		}
	}
	delete(onPath, typ)
	memo[typ] = below + 1
	return below + 1
}

// isMessage reports whether the struct type t has fields with protobuf
// tags, which protodec decodes as a message of its own.
func isMessage(t reflect.Type) bool {
	for i := range t.NumField() {
		if tag := t.Field(i).Tag.Get("protobuf"); tag != "" && tag != "-" {
			return true
		}
	}
	return false
}
