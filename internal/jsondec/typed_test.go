package jsondec

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"
)

func TestTypedEdgeCases(t *testing.T) {
	type inner struct {
		A string `json:"a"`
		B int32  `json:"b,omitempty"`
	}
	type Embedded struct {
		E string `json:"e"`
		A string `json:"a"` // hidden by the shallower field
	}
	type T struct {
		Embedded `json:",inline"`
		A        string            `json:"a"`
		N        int8              `json:"n"`
		U        uint16            `json:"u"`
		F        float32           `json:"f"`
		P        *inner            `json:"p"`
		S        []inner           `json:"s"`
		M        map[string]string `json:"m"`
		MI       map[string]inner  `json:"mi"`
		I        interface{}       `json:"i"`
		B        []byte            `json:"bytes"`
		T        metav1.Time       `json:"t"`
		TP       *metav1.Time      `json:"tp"`
		MT       metav1.MicroTime  `json:"mt"`
		Q        resource.Quantity `json:"q"`
		Raw      json.RawMessage   `json:"raw"`
		Skip     string            `json:"-"`
		Plain    string
	}
	for _, in := range []string{
		`{}`, `null`, `{"a":"x","e":"y","n":127,"u":65535,"f":1.5,"p":{"a":"z"},"s":[{"a":"1"},{"b":2}],"m":{"k":"v","n":null},"mi":{"k":{"a":"b"}},"i":{"x":[1,2.5,"s",null,true]},"bytes":"aGVsbG8=","t":"2026-01-02T03:04:05Z","tp":null,"q":"100m","raw":{"x":1},"Plain":"p","-":"no","Skip":"no","unknown":{"deep":[1]}}`,
		`{"n":128}`, `{"u":-1}`, `{"n":1.5}`, `{"n":"1"}`, `{"f":1e39}`, `{"a":1}`, `{"p":[]}`, `{"s":{}}`, `{"s":[]}`, `{"s":null}`, `{"m":[]}`,
		`{"bytes":"!!"}`, `{"bytes":[104,105]}`, `{"t":null}`, `{"t":5}`, `{"q":"bad"}`, `{"a":"x","a":"y"}`, `{"s":[{"a":"1","b":5}],"s":[{"a":"2"}]}`,
		`{"p":{"a":"1"},"p":{"b":2}}`, `{"A":"case"}`, `{"plain":"case"}`, `{"i":12345678901234567890}`, `{"i":1e2}`, `{"a":"x"} x`, `{"a":"\u00e9\ud83d\ude00"}`,
		`[1]`, `"s"`, `{"a":tru}`, `{"n":-0}`, `{"n":01}`,
		// Timestamps: parsed in place when plain, else by their UnmarshalJSON.
		`{"t":"2026-01-02T03:04:05+02:00","tp":"2026-01-02T03:04:05.5Z"}`, `{"t":"\u0032026-01-02T03:04:05Z"}`, `{"t":""}`, `{"t":"bad"}`,
		`{"t":"2026-01-02T03:04:05Z`, `{"t":"2026-13-02T03:04:05Z"}`, `{"t":"2026-01-02T03:04:05Z","t":null}`, `{"t":"é"}`,
		`{"mt":"2026-01-02T03:04:05.123456Z"}`, `{"mt":"2026-01-02T03:04:05Z"}`, `{"mt":null}`, `{"mt":1}`,
	} {
		var want, got T
		werr := utiljson.Unmarshal([]byte(in), &want)
		gerr := Decode([]byte(in), &got)
		if (werr == nil) != (gerr == nil) {
			t.Errorf("%s: reference error %v, ours %v", in, werr, gerr)
			continue
		}
		if werr == nil && !reflect.DeepEqual(want, got) {
			t.Errorf("%s:\nwant %+v\n got %+v", in, want, got)
		}
	}
}

func TestTypedAllocations(t *testing.T) {
	data, _ := json.Marshal(examplePod())
	ref := testing.AllocsPerRun(20, func() { var p corev1.Pod; _ = utiljson.Unmarshal(data, &p) })
	ours := testing.AllocsPerRun(20, func() { var p corev1.Pod; _ = Decode(data, &p) })
	t.Logf("allocations per Pod: util/json %.0f, jsondec %.0f", ref, ours)
	if ours >= ref {
		t.Errorf("jsondec allocates %.0f, reference %.0f", ours, ref)
	}
}

// TestTimesDoNotAllocate checks that timestamps cost no allocation of
// their own.
func TestTimesDoNotAllocate(t *testing.T) {
	type T struct {
		A metav1.Time      `json:"a"`
		B *metav1.Time     `json:"b"`
		M metav1.MicroTime `json:"m"`
	}
	allocs := func(in string) float64 {
		return testing.AllocsPerRun(20, func() {
			var v T
			if err := Decode([]byte(in), &v); err != nil {
				t.Fatal(err)
			}
		})
	}
	none := allocs(`{"b":null}`)
	// The one allocation b needs is the pointer's, and the race
	// detector's instrumentation can add one. Through UnmarshalJSON,
	// each timestamp took three or more.
	if times := allocs(`{"a":"2026-01-02T03:04:05Z","b":"2026-01-02T03:04:05Z","m":"2026-01-02T03:04:05.123456Z"}`); times > none+2 {
		t.Errorf("%.0f allocations with three timestamps, %.0f without", times, none)
	}
}

func examplePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-12345", Namespace: "team-a", UID: "0c6d7a2e-1111-2222-3333-444455556666",
			Labels: map[string]string{"app": "web", "tier": "frontend", "pod-template-hash": "5d8f7c9b"}, Annotations: map[string]string{"note": "hello world"}},
		Spec: corev1.PodSpec{NodeName: "node-001", Containers: []corev1.Container{{
			Name: "app", Image: "registry.example/web:1.27.3", Args: []string{"--port=8080", "--verbose"},
			Env:       []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LEVEL", Value: "info"}},
			Ports:     []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
			Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
		}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.244.1.7", Conditions: []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue}}},
	}
}

var fuzzSharing = intern.Options{Share: intern.New(), Structs: true, Strings: new(intern.Strings)}

// FuzzTypedMatchesReference decodes arbitrary bytes as a Pod with both
// decoders: they must agree on success, and on the result.
func FuzzTypedMatchesReference(f *testing.F) {
	for _, p := range []*corev1.Pod{examplePod(), {}} {
		b, _ := json.Marshal(p)
		f.Add(b)
	}
	f.Add([]byte(`{"metadata":{"name":"x","labels":{"a":null}},"spec":{"containers":[{"name":"c","ports":[{"containerPort":80}]}]}}`))
	f.Add([]byte(`{"metadata":{"creationTimestamp":"2026-01-02T03:04:05Z","deletionTimestamp":null},"status":{"startTime":"2026-01-02T03:04:05+01:00"}}`))
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got corev1.Pod
		werr := utiljson.Unmarshal(data, &want)
		gerr := Decode(data, &got)
		if (werr == nil) != (gerr == nil) {
			t.Fatalf("reference error %v, ours %v", werr, gerr)
		}
		if werr == nil && !reflect.DeepEqual(&want, &got) {
			t.Fatalf("decoders differ\nwant %+v\n got %+v", want, got)
		}
		// With sharing (the table outlives one input), likewise.
		var shared corev1.Pod
		serr := DecodeWith(data, &shared, fuzzSharing)
		if (werr == nil) != (serr == nil) {
			t.Fatalf("reference error %v, ours with sharing %v", werr, serr)
		}
		if werr == nil && !reflect.DeepEqual(&want, &shared) {
			t.Fatalf("decoders differ with sharing\nwant %+v\n got %+v", want, shared)
		}
	})
}

// TestListItemsHaveTheirOwnStrings checks that each item of a list has
// string blocks of its own (the list's own strings take one more).
func TestListItemsHaveTheirOwnStrings(t *testing.T) {
	list := corev1.PodList{TypeMeta: metav1.TypeMeta{Kind: "PodList", APIVersion: "v1"}, Items: []corev1.Pod{*examplePod(), *examplePod(), *examplePod()}}
	data, _ := json.Marshal(&list)
	var got corev1.PodList
	n, err := decode(data, &got, intern.Options{})
	if err != nil {
		t.Fatal(err)
	}
	var pod corev1.Pod
	one, err := decode(mustJSON(examplePod()), &pod, intern.Options{})
	if err != nil {
		t.Fatal(err)
	}
	// The list's own strings take one block; each item, as many as it
	// takes decoded alone.
	if n != 1+3*one || len(got.Items) != 3 || got.Items[2].Name != "web-12345" {
		t.Fatalf("%d string blocks for a list of %d Pods that take %d each, want 1 + 3 × %d", n, len(got.Items), one, one)
	}
}

func mustJSON(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// TestSlicesHaveNoRoomToGrow checks that arrays are allocated at their
// size, with or without white space in the text: a cache holds them.
func TestSlicesHaveNoRoomToGrow(t *testing.T) {
	compact, _ := json.Marshal(examplePod())
	indented, _ := json.MarshalIndent(examplePod(), " ", "\t")
	for _, data := range [][]byte{compact, indented} {
		var got corev1.Pod
		if err := Decode(data, &got); err != nil {
			t.Fatal(err)
		}
		c := got.Spec.Containers
		if len(c) != 1 || cap(c) != 1 || len(c[0].Env) != 2 || cap(c[0].Env) != 2 || cap(c[0].Args) != 2 {
			t.Errorf("containers %d/%d, env %d/%d, args %d/%d (len/cap)", len(c), cap(c), len(c[0].Env), cap(c[0].Env), len(c[0].Args), cap(c[0].Args))
		}
	}
}

// A struct's field names are only looked up: an object's string blocks
// hold its string values and its maps' keys, never the names of its
// fields.
func TestStructKeysNotKept(t *testing.T) {
	for _, tc := range []struct {
		name, json string
		kept       int // bytes of the values and map keys
	}{
		{"fields", `{"metadata":{"name":"a","namespace":"bb"},"spec":{"containers":[{"name":"c","image":"i"}]}}`, 5},
		{"map keys are kept", `{"metadata":{"labels":{"k":"vv"}}}`, 3},
		{"escaped field name", `{"met\u0061data":{"name":"a"}}`, 1},
		{"non-ASCII value", `{"metadata":{"name":"é"}}`, 0}, // copied on its own, not into a block
	} {
		t.Run(tc.name, func(t *testing.T) {
			var pod corev1.Pod
			p := parser{data: []byte(tc.json)}
			if err := p.into(tplanFor(reflect.TypeFor[corev1.Pod]()), unsafe.Pointer(&pod), 0); err != nil {
				t.Fatal(err)
			}
			if p.kept != tc.kept {
				t.Errorf("kept %d bytes, want %d", p.kept, tc.kept)
			}
			var want corev1.Pod
			if err := utiljson.Unmarshal([]byte(tc.json), &want); err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(&pod, &want) {
				t.Errorf("decoded %+v, want %+v", pod, want)
			}
		})
	}
}
