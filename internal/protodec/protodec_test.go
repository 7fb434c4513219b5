package protodec

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

func TestDifferential(t *testing.T) {
	for _, newObj := range differentialTypes {
		typ := reflect.TypeOf(newObj()).Elem()
		t.Run(typ.String(), func(t *testing.T) {
			if !Supported(typ) {
				t.Fatalf("not supported: %v", planFor(typ).failed)
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
				if err := Unmarshal(data, got); err != nil {
					t.Fatalf("iteration %d: %v", i, err)
				}
				if !reflect.DeepEqual(want, got) {
					if equality.Semantic.DeepEqual(want, got) {
						t.Fatalf("iteration %d: semantically equal but not deeply equal (nil vs empty?)", i)
					}
					t.Fatalf("iteration %d: decoders differ\nwant %+v\n got %+v", i, want, got)
				}
			}
		})
	}
}

// TestStringsDoNotAliasInput checks that decoded strings and bytes survive
// the input buffer being overwritten (the watch decoder reuses buffers).
func TestStringsDoNotAliasInput(t *testing.T) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "name", Labels: map[string]string{"k": "v"}}, BinaryData: map[string][]byte{"b": []byte("bytes")}}
	data, _ := src.Marshal()
	var got corev1.ConfigMap
	if err := Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if !reflect.DeepEqual(src, &got) {
		t.Fatalf("decoded object changed with its input: %+v", got)
	}
}

func TestAllocations(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-name", Namespace: "namespace", Labels: map[string]string{"app": "web-server", "tier": "frontend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app-container", Image: "registry.example/app:v1", Args: []string{"--flag-one", "--flag-two", "--flag-three"}},
			{Name: "sidecar-container", Image: "registry.example/proxy:v2"},
		}}}
	data, _ := pod.Marshal()
	gen := testing.AllocsPerRun(100, func() { var p corev1.Pod; _ = p.Unmarshal(data) })
	ours := testing.AllocsPerRun(100, func() { var p corev1.Pod; _ = Unmarshal(data, &p) })
	t.Logf("allocations per decode: generated %.0f, protodec %.0f", gen, ours)
	if ours >= gen {
		t.Errorf("protodec allocates %.0f times, generated code %.0f", ours, gen)
	}
}

func TestUnsupported(t *testing.T) {
	type bad struct {
		X map[int]string `protobuf:"bytes,1,rep,name=x"`
	}
	if Supported(reflect.TypeFor[bad]()) {
		t.Error("map[int]string should not be supported")
	}
	if err := Unmarshal([]byte{}, &bad{}); err == nil {
		t.Error("Unmarshal of an unsupported type should fail")
	}
}

// FuzzDifferential decodes arbitrary bytes as a Pod with both decoders. It
// must never panic, and when both succeed the results must be equal.
func FuzzDifferential(f *testing.F) {
	fl := filler(1)
	for i := 0; i < 8; i++ {
		p := &corev1.Pod{}
		fl.Fill(p)
		b, _ := p.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got corev1.Pod
		errWant := want.Unmarshal(data)
		errGot := Unmarshal(data, &got)
		if errWant == nil && errGot == nil && !reflect.DeepEqual(&want, &got) {
			t.Fatalf("decoders differ\nwant %+v\n got %+v", want, got)
		}
	})
}
