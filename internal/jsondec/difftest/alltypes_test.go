package difftest

import (
	"encoding/json"
	"math/rand"
	"reflect"
	"testing"

	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/randfill"

	"github.com/loom-k8s/loom/internal/apischeme"
	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
)

func filler(seed int64) *randfill.Filler {
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(runtime.NewScheme()))
	f.NilChance(0.2).NumElements(0, 3)
	f.Funcs(func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
	}, func(r *runtime.RawExtension, c randfill.Continue) {
		if c.Bool() {
			r.Raw = []byte(`{"a":1}`)
		}
	})
	return f
}

// sharing shares every kind of part, with a table of its own.
var sharing = intern.Options{Share: intern.New(), Structs: true, Strings: new(intern.Strings)}

func allTypes(t *testing.T) []reflect.Type {
	types, err := apischeme.Types()
	if err != nil {
		t.Fatal(err)
	}
	return types
}

// TestTypedDifferentialAllTypes fills every kind of 20 API groups randomly,
// encodes it with encoding/json, and decodes it with util/json (the
// reference) and with Decode: the results must be deeply equal.
func TestTypedDifferentialAllTypes(t *testing.T) {
	types := allTypes(t)
	iterations := 30
	if testing.Short() {
		iterations = 5
	}
	unsupported := 0
	for _, typ := range types {
		if !jsondec.TypedSupported(typ) {
			unsupported++
			t.Logf("not supported (left to encoding/json): %v: %v", typ, "see TypedSupported")
			continue
		}
		f := filler(int64(len(typ.String())))
		for i := 0; i < iterations; i++ {
			src := reflect.New(typ).Interface()
			f.Fill(src)
			data, err := json.Marshal(src)
			if err != nil {
				t.Fatalf("%v: %v", typ, err)
			}
			want, got := reflect.New(typ).Interface(), reflect.New(typ).Interface()
			if err := utiljson.Unmarshal(data, want); err != nil {
				t.Fatalf("%v: reference: %v", typ, err)
			}
			if err := jsondec.Decode(data, got); err != nil {
				t.Fatalf("%v iteration %d: %v\n%s", typ, i, err, data)
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%v iteration %d: decoders differ\nwant %+v\n got %+v", typ, i, want, got)
			}
			// With sharing, twice: the second decode takes its parts
			// from the table.
			for pass := range 2 {
				shared := reflect.New(typ).Interface()
				if err := jsondec.DecodeWith(data, shared, sharing); err != nil {
					t.Fatalf("%v iteration %d, shared pass %d: %v\n%s", typ, i, pass, err, data)
				}
				if !reflect.DeepEqual(want, shared) {
					t.Fatalf("%v iteration %d, shared pass %d: decoders differ\nwant %+v\n got %+v", typ, i, pass, want, shared)
				}
			}
		}
	}
	t.Logf("%d types checked, %d unsupported", len(types)-unsupported, unsupported)
	if unsupported > len(types)/10 {
		t.Errorf("%d of %d types unsupported", unsupported, len(types))
	}
}
