package difftest

import (
	"math/rand"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/apitesting/fuzzer"
	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/api/resource"
	metafuzzer "k8s.io/apimachinery/pkg/apis/meta/fuzzer"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"sigs.k8s.io/randfill"

	"github.com/loom-k8s/loom/internal/apischeme"
	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/protodec"
)

type protoObject interface {
	Marshal() ([]byte, error)
	Unmarshal([]byte) error
}

// differential types: each is filled randomly, marshalled by the generated
// code, and decoded by both decoders; the results must be deeply equal.
var differentialTypes = []func() protoObject{
	func() protoObject { return &corev1.Pod{} },
	func() protoObject { return &corev1.PodList{} },
	func() protoObject { return &corev1.Node{} },
	func() protoObject { return &corev1.ConfigMap{} },
	func() protoObject { return &corev1.Secret{} },
	func() protoObject { return &corev1.Service{} },
	func() protoObject { return &corev1.Event{} },
	func() protoObject { return &corev1.PersistentVolume{} },
	func() protoObject { return &appsv1.Deployment{} },
	func() protoObject { return &appsv1.StatefulSet{} },
	func() protoObject { return &metav1.PartialObjectMetadata{} },
	func() protoObject { return &metav1.Status{} },
	func() protoObject { return &metav1.WatchEvent{} },
}

func filler(seed int64) *randfill.Filler {
	s := runtime.NewScheme()
	f := fuzzer.FuzzerFor(metafuzzer.Funcs, rand.NewSource(seed), serializer.NewCodecFactory(s))
	f.NilChance(0.2).NumElements(0, 3)
	f.Funcs(func(q *resource.Quantity, c randfill.Continue) {
		*q = *resource.NewMilliQuantity(c.Int63n(1<<40), resource.DecimalSI)
	})
	f.Funcs(func(r *runtime.RawExtension, c randfill.Continue) {
		if c.Bool() {
			r.Raw = []byte(c.String(20))
		}
	})
	return f
}

// sharing is the informers' decoding: identical parts shared.
var sharing = intern.Options{Share: intern.New(), Structs: true, Strings: new(intern.Strings)}

func TestDifferential(t *testing.T) {
	for _, newObj := range differentialTypes {
		typ := reflect.TypeOf(newObj()).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			if !protodec.Supported(typ) {
				t.Fatalf("not supported: %v", "see Supported")
			}
			f := filler(int64(len(typ.String())))
			for i := 0; i < 200; i++ {
				src := newObj()
				f.Fill(src)
				data, err := src.Marshal()
				if err != nil {
					t.Fatal(err)
				}
				want, got := newObj(), newObj()
				if err := want.Unmarshal(data); err != nil {
					t.Fatal(err)
				}
				if err := protodec.Unmarshal(data, got); err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				if !reflect.DeepEqual(want, got) {
					if equality.Semantic.DeepEqual(want, got) {
						t.Fatalf("iteration %d: semantically equal but not deeply equal (nil vs empty?)", i)
					}
					t.Fatalf("iteration %d: decoders differ\nwant %+v\n got %+v", i, want, got)
				}
				// Shared decoding, twice: the second decode takes
				// the shared parts from the table.
				for n := range 2 {
					got := newObj()
					if err := protodec.UnmarshalWith(data, got, sharing); err != nil {
						t.Fatalf("iteration %d, shared decode %d: %v", i, n, err)
					}
					if !reflect.DeepEqual(want, got) {
						t.Fatalf("iteration %d, shared decode %d: decoders differ\nwant %+v\n got %+v", i, n, want, got)
					}
				}
			}
		})
	}
}

// TestStringsDoNotAliasInput checks that decoded strings and bytes survive
// the input buffer being overwritten (the watch decoder reuses buffers).

// TestDifferentialAllTypes runs the differential check on every protobuf
// type of the built-in API groups (every kind apischeme registers), with fewer iterations per type than TestDifferential.
func TestDifferentialAllTypes(t *testing.T) {
	all, err := apischeme.Types()
	if err != nil {
		t.Fatal(err)
	}
	var types []reflect.Type
	for _, typ := range all {
		if reflect.PointerTo(typ).Implements(reflect.TypeFor[protoObject]()) {
			types = append(types, typ)
		}
	}
	if len(types) < 100 {
		t.Fatalf("only %d types found", len(types))
	}
	iterations := 30
	if testing.Short() {
		iterations = 5
	}
	unsupported := 0
	for _, typ := range types {
		if !protodec.Supported(typ) {
			unsupported++
			t.Logf("not supported (falls back to generated code): %v: %v", typ, "see Supported")
			continue
		}
		f := filler(int64(len(typ.String())))
		for i := 0; i < iterations; i++ {
			src := reflect.New(typ).Interface().(protoObject)
			f.Fill(src)
			data, err := src.Marshal()
			if err != nil {
				t.Fatalf("%v: %v", typ, err)
			}
			want := reflect.New(typ).Interface().(protoObject)
			got := reflect.New(typ).Interface()
			if err := want.Unmarshal(data); err != nil {
				t.Fatalf("%v: generated Unmarshal: %v", typ, err)
			}
			if err := protodec.Unmarshal(data, got); err != nil {
				t.Fatalf("%v iteration %d: %v", typ, i, err)
			}
			for n := range 2 {
				shared := reflect.New(typ).Interface()
				if err := protodec.UnmarshalWith(data, shared, sharing); err != nil {
					t.Fatalf("%v iteration %d, shared decode %d: %v", typ, i, n, err)
				}
				if !reflect.DeepEqual(want, shared) {
					t.Fatalf("%v iteration %d, shared decode %d: decoders differ", typ, i, n)
				}
			}
			if !reflect.DeepEqual(want, got) {
				t.Fatalf("%v iteration %d: decoders differ\nwant %+v\n got %+v", typ, i, want, got)
			}
		}
	}
	t.Logf("%d types checked, %d unsupported", len(types)-unsupported, unsupported)
	// Unsupported types fall back to the generated code, which is correct
	// but slow; more than a tenth of them would mean the decoder had
	// stopped planning types it should, and this test had stopped
	// checking them.
	if unsupported > len(types)/10 {
		t.Errorf("%d of %d types unsupported", unsupported, len(types))
	}
}
