package jsondec

import (
	"encoding/json"
	"reflect"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"

	"github.com/loom-k8s/loom/internal/intern"
)

func TestSameJSON(t *testing.T) {
	obj := map[string]any{"a": int64(1), "b": []any{"x", 2.5, true, nil}, "c": map[string]any{}, "d": "é"}
	for _, tc := range []struct {
		text string
		v    any
		want bool
	}{
		{`{"a":1,"b":["x",2.5,true,null],"c":{},"d":"é"}`, obj, true},
		{` { "d" : "é" , "c":{ }, "b":[ "x" ,2.5,true,null ],"a":1 } `, obj, true}, // order and space do not matter
		{`{"a":1,"b":["x",2.5,true,null],"c":{}}`, obj, false},                     // a key missing
		{`{"a":1,"b":["x",2.5,true,null],"c":{},"d":"é","e":1}`, obj, false},       // a key more
		{`{"a":1,"a":1,"b":["x",2.5,true,null],"c":{}}`, obj, false},               // a key twice
		{`{"a":1.0,"b":["x",2.5,true,null],"c":{},"d":"é"}`, obj, false},           // 1.0 is a float
		{`{"a":1,"b":["x",2.5,true],"c":{},"d":"é"}`, obj, false},                  // shorter array
		{`{"a":1,"b":["x",2.5,true,null,1],"c":{},"d":"é"}`, obj, false},           // longer array
		{`{"a":1,"b":["x",2.5,false,null],"c":{},"d":"é"}`, obj, false},
		{`{"a":1,"b":["\u0078",2.5,true,null],"c":{},"d":"é"}`, obj, false}, // escapes: not told
		{`{"a":1,"b":["x",2.5,true,null],"c":[],"d":"é"}`, obj, false},
		{`1e3`, 1000.0, true},
		{`1e3`, int64(1000), false},
		{`-0`, int64(0), true},
		{`123456789012345678901`, 123456789012345678901.0, true}, // beyond int64: a float
		{`"a"`, "a", true},
		{`"a"`, "b", false},
		{`null`, nil, true},
		{`[]`, []any{}, true},
		{`[]`, []any{nil}, false},
		{`{}`, map[string]any{"a": nil}, false},
	} {
		if got := sameJSON([]byte(tc.text), tc.v); got != tc.want {
			t.Errorf("sameJSON(%s, %#v) = %v, want %v", tc.text, tc.v, got, tc.want)
		}
		// Whatever sameJSON says, it must agree with a decode.
		if tc.want {
			p := parser{data: []byte(tc.text)}
			v, err := p.value(0)
			if err != nil || !reflect.DeepEqual(v, tc.v) {
				t.Errorf("%s decodes to %#v (%v), which sameJSON took for %#v", tc.text, v, err, tc.v)
			}
		}
	}
}

// TestPriorUnstructured checks that an unstructured object decoded with
// its previous version takes the parts whose text did not change from it,
// and decodes the others.
func TestPriorUnstructured(t *testing.T) {
	v1 := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"1","labels":{"app":"w"},
		"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{"f:size":{}}}}]},
		"spec":{"size":3,"parts":[{"name":"a","tags":["x"]},{"name":"b","tags":["y"]}],"owner":{"team":"t"}},"status":{"ready":1}}`
	v2 := `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"w","resourceVersion":"2","labels":{"app":"w"},
		"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{"f:size":{}}}}]},
		"spec":{"size":3,"parts":[{"name":"a","tags":["x"]},{"name":"b","tags":["z"]}],"owner":{"team":"t"}},"status":{"ready":1}}`
	for _, tc := range []struct {
		name  string
		opts  intern.Options
		reuse bool
	}{
		{"shared", intern.Options{Share: intern.New(), Structs: true}, true},
		{"blobs only", intern.Options{Share: intern.New()}, false},
		{"off", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			old, err := ObjectWith([]byte(v1), tc.opts)
			if err != nil {
				t.Fatal(err)
			}
			o := tc.opts
			o.Prior = &unstructured.Unstructured{Object: old}
			got, err := ObjectWith([]byte(v2), o)
			if err != nil {
				t.Fatal(err)
			}
			want, err := Object([]byte(v2))
			if err != nil {
				t.Fatal(err)
			}
			if !reflect.DeepEqual(got, want) {
				t.Fatalf("decoded with its previous version:\n got %v\nwant %v", got, want)
			}
			at := func(m map[string]any, path ...any) any {
				var v any = m
				for _, k := range path {
					switch k := k.(type) {
					case string:
						v = v.(map[string]any)[k]
					case int:
						v = v.([]any)[k]
					}
				}
				return v
			}
			same := func(a, b any) bool {
				return reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
			}
			for _, path := range [][]any{{"metadata", "labels"}, {"metadata", "managedFields"}, {"spec", "owner"}, {"spec", "parts", 0}, {"status"}} {
				if s := same(at(got, path...), at(old, path...)); s != tc.reuse {
					t.Errorf("%v is the previous version's: %v, want %v", path, s, tc.reuse)
				}
			}
			for _, path := range [][]any{{"spec"}, {"spec", "parts"}, {"spec", "parts", 1}, {"spec", "parts", 1, "tags"}} {
				if same(at(got, path...), at(old, path...)) {
					t.Errorf("%v changed but is the previous version's", path)
				}
			}
			// Strings are the previous version's boxed strings, unchanged
			// ones only.
			box := func(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }
			for _, path := range [][]any{{"apiVersion"}, {"metadata", "name"}} {
				if s := box(at(got, path...)) == box(at(old, path...)); s != tc.reuse {
					t.Errorf("the string at %v is the previous version's: %v, want %v", path, s, tc.reuse)
				}
			}
			if box(at(got, "metadata", "resourceVersion")) == box(at(old, "metadata", "resourceVersion")) {
				t.Error("the changed resourceVersion is the previous version's")
			}
		})
	}
}

// TestPriorBlobs checks that a typed object decoded with its previous
// version takes the managed-fields blobs whose text did not change from it.
func TestPriorBlobs(t *testing.T) {
	old := managedPod("p")
	old.ManagedFields = append(old.ManagedFields, metav1.ManagedFieldsEntry{Manager: "other", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:labels":{"f:app":{}}}}`)}})
	for _, tc := range []struct {
		name  string
		opts  intern.Options
		reuse bool
	}{
		{"shared", intern.Options{Share: intern.New(), Structs: true}, true},
		{"blobs only", intern.Options{Share: intern.New()}, true},
		{"off", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prior := decodeWith(t, tc.opts, old)
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			next.ManagedFields[1].FieldsV1.Raw = []byte(`{"f:metadata":{"f:labels":{"f:tier":{}}}}`)
			got := decodeWithPrior(t, tc.opts, prior, next)
			if s := got.ManagedFields[0].FieldsV1 == prior.ManagedFields[0].FieldsV1; s != tc.reuse {
				t.Errorf("the unchanged blob is the previous version's: %v, want %v", s, tc.reuse)
			}
			if got.ManagedFields[1].FieldsV1 == prior.ManagedFields[1].FieldsV1 || same(got.ManagedFields[1].FieldsV1.Raw, prior.ManagedFields[1].FieldsV1.Raw) {
				t.Error("the changed blob is the previous version's")
			}
		})
	}
}

// TestPriorTyped checks that a typed object decoded with its previous
// version takes the shared parts whose text did not change from it.
func TestPriorTyped(t *testing.T) {
	old := managedPod("p")
	old.Spec.Containers = append(old.Spec.Containers, *old.Spec.Containers[0].DeepCopy())
	old.Spec.Containers[1].Name = "sidecar"
	for _, tc := range []struct {
		name  string
		opts  intern.Options
		reuse bool
	}{
		{"all", intern.Options{Share: intern.New(), Structs: true}, true},
		{"blobs only", intern.Options{Share: intern.New()}, false},
		{"off", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			prior := decodeWith(t, tc.opts, old)
			next := old.DeepCopy()
			next.ResourceVersion = "2"
			next.Spec.Containers[1].Image = "registry.example/web:1.28.0"
			got := decodeWithPrior(t, tc.opts, prior, next)
			for name, s := range map[string]bool{
				"labels":                   sameMap(got.Labels, prior.Labels),
				"annotations":              sameMap(got.Annotations, prior.Annotations),
				"volumes":                  same(got.Spec.Volumes, prior.Spec.Volumes),
				"security context":         got.Spec.SecurityContext == prior.Spec.SecurityContext,
				"first container's env":    same(got.Spec.Containers[0].Env, prior.Spec.Containers[0].Env),
				"second container's ports": same(got.Spec.Containers[1].Ports, prior.Spec.Containers[1].Ports),
				"requests":                 sameMap(got.Spec.Containers[1].Resources.Requests, prior.Spec.Containers[1].Resources.Requests),
			} {
				if s != tc.reuse {
					t.Errorf("%s are the previous version's: %v, want %v", name, s, tc.reuse)
				}
			}
			if same(got.Spec.Containers, prior.Spec.Containers) {
				t.Error("the containers changed but are the previous version's")
			}
		})
	}
}

// FuzzPriorTyped decodes b as a Pod with a's decoding as its previous
// version: the result must be what b decodes to alone.
func FuzzPriorTyped(f *testing.F) {
	p := managedPod("p")
	a, _ := json.Marshal(p)
	p.Labels["app"] = "other"
	p.Spec.Containers[0].Env = append(p.Spec.Containers[0].Env, corev1.EnvVar{Name: "X"})
	b, _ := json.Marshal(p)
	f.Add(a, b)
	f.Add(a, a)
	f.Add([]byte(`{"metadata":{"labels":{"a":"1","b":"2"}},"spec":{"volumes":[{"name":"v"}]}}`), []byte(`{"metadata":{"labels":{"a":"1","a":"2"}},"spec":{"volumes":[{"name":"v","name":"v"}]}}`))
	f.Add([]byte(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1"}}}]}}`), []byte(`{"spec":{"containers":[{"name":"c","resources":{"requests":{"cpu":"1000m"}}}]}}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		o := intern.Options{Share: intern.New(), Structs: true}
		var prior, got, want corev1.Pod
		if DecodeWith(a, &prior, o) != nil {
			return
		}
		o.Prior = &prior
		gerr := DecodeWith(b, &got, o)
		werr := Decode(b, &want)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("with a previous version: %v; alone: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(&got, &want) {
			t.Fatalf("with a previous version:\n got %+v\nwant %+v", &got, &want)
		}
	})
}

// FuzzPriorUnstructured is FuzzPriorTyped for unstructured objects.
func FuzzPriorUnstructured(f *testing.F) {
	f.Add([]byte(`{"kind":"K","spec":{"a":[1,2,{"b":"c"}],"d":{"e":1.5}}}`), []byte(`{"kind":"K","spec":{"a":[1,2,{"b":"c"}],"d":{"e":1.5,"e":2}}}`))
	f.Add([]byte(`{"kind":"K","spec":{"a":[1,2,{"b":"c"}]}}`), []byte(`{"kind":"K","spec":{"a":[1,2.0,{"b":"\u0063"}]}}`))
	f.Fuzz(func(t *testing.T, a, b []byte) {
		o := intern.Options{Share: intern.New(), Structs: true}
		prior, err := ObjectWith(a, o)
		if err != nil {
			return
		}
		o.Prior = prior
		got, gerr := ObjectWith(b, o)
		want, werr := Object(b)
		if (gerr == nil) != (werr == nil) {
			t.Fatalf("with a previous version: %v; alone: %v", gerr, werr)
		}
		if gerr == nil && !reflect.DeepEqual(got, want) {
			t.Fatalf("with a previous version:\n got %#v\nwant %#v", got, want)
		}
	})
}

// TestPriorAllocatesLittle checks that telling unchanged parts from the
// previous version allocates little: a decode with an unchanged previous
// version makes a fraction of a plain decode's allocations. Resource
// quantities and IntOrStrings, which have UnmarshalJSON methods, are
// compared without decoding them.
func TestPriorAllocatesLittle(t *testing.T) {
	old := managedPod("p")
	old.Spec.Containers[0].LivenessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromString("http")}}}
	old.Spec.Containers[0].ReadinessProbe = &corev1.Probe{ProbeHandler: corev1.ProbeHandler{TCPSocket: &corev1.TCPSocketAction{Port: intstr.FromInt32(8080)}}}
	data, _ := json.Marshal(old)
	o := intern.Options{Share: intern.New(), Structs: true}
	var prior corev1.Pod
	if err := DecodeWith(data, &prior, o); err != nil {
		t.Fatal(err)
	}
	plain := testing.AllocsPerRun(50, func() {
		var p corev1.Pod
		_ = DecodeWith(data, &p, intern.Options{})
	})
	o.Prior = &prior
	var got corev1.Pod
	withPrior := testing.AllocsPerRun(50, func() {
		got = corev1.Pod{}
		_ = DecodeWith(data, &got, o)
	})
	if got.Spec.Containers[0].LivenessProbe != prior.Spec.Containers[0].LivenessProbe || !same(got.Spec.Containers, prior.Spec.Containers) {
		t.Fatal("the unchanged probe and containers are not the previous version's")
	}
	if withPrior > plain/2 {
		t.Errorf("a decode with an unchanged previous version made %v allocations; a plain one, %v", withPrior, plain)
	}
}

func TestSameQuantityAndIntOrString(t *testing.T) {
	for _, tc := range []struct {
		text string
		q    resource.Quantity
		want bool
	}{
		{`"100m"`, resource.MustParse("100m"), true},
		{`"0.1"`, resource.MustParse("100m"), false}, // equal amounts, but written otherwise: not what a decode gives
		{`"1Gi"`, resource.MustParse("1Gi"), true},
		{`"1Gi"`, resource.MustParse("1G"), false},
		{`"\u0031Gi"`, resource.MustParse("1Gi"), false},
		{`1`, resource.MustParse("1"), false}, // unquoted: not told
	} {
		var dec resource.Quantity
		if got := sameQuantity([]byte(tc.text), tc.q); got != tc.want {
			t.Errorf("sameQuantity(%s, %v) = %v, want %v", tc.text, tc.q.String(), got, tc.want)
		} else if got && (dec.UnmarshalJSON([]byte(tc.text)) != nil || dec != tc.q) {
			t.Errorf("%s decodes to %#v, which sameQuantity took for %#v", tc.text, dec, tc.q)
		}
	}
	for _, tc := range []struct {
		text string
		v    intstr.IntOrString
		want bool
	}{
		{`"http"`, intstr.FromString("http"), true},
		{`8080`, intstr.FromInt32(8080), true},
		{`"8080"`, intstr.FromInt32(8080), false},
		{`8080`, intstr.FromString("8080"), false},
		{`8081`, intstr.FromInt32(8080), false},
	} {
		if got := sameIntOrString([]byte(tc.text), tc.v); got != tc.want {
			t.Errorf("sameIntOrString(%s, %v) = %v, want %v", tc.text, tc.v, got, tc.want)
		}
	}
}

func TestSameString(t *testing.T) {
	for _, tc := range []struct {
		text, old string
		want      bool
	}{
		{`"abc"`, "abc", true},
		{` "abc",`, "abc", true},
		{`"é"`, "é", true},
		{`"abc"`, "abcd", false},
		{`"abcd"`, "abc", false},
		{`"ab\u0063"`, "abc", false}, // the same value, written with an escape: decoded
		{`"a\"b"`, `a"b`, false},
		{`"a\\"`, `a\`, false},
		{`""`, "", false},
		{`"abc`, "abc", false},
		{`abc`, "abc", false},
		{"\"\xff\"", "\xff", false}, // not valid UTF-8: decoded, which replaces it
	} {
		p := parser{data: []byte(tc.text)}
		if got := p.sameString(tc.old); got != tc.want {
			t.Errorf("sameString(%q) at %q = %v, want %v", tc.old, tc.text, got, tc.want)
		} else if got && p.data[p.i-1] != '"' {
			t.Errorf("sameString(%q) at %q left p.i at %d", tc.old, tc.text, p.i)
		}
	}
}

// TestPriorStrings checks that strings the new version writes as its
// previous version holds them are the previous version's, not copies, so
// that the new version does not hold a second copy of them beside the
// string block of the previous version that its shared parts keep.
func TestPriorStrings(t *testing.T) {
	old := managedPod("p")
	o := intern.Options{Share: intern.New(), Structs: true}
	prior := decodeWith(t, o, old)
	next := old.DeepCopy()
	next.ResourceVersion = "2"
	next.Status.PodIP = "10.9.9.9"
	got := decodeWithPrior(t, o, prior, next)
	sameStr := func(a, b string) bool { return unsafe.StringData(a) == unsafe.StringData(b) }
	for name, s := range map[string]bool{
		"name":      sameStr(got.Name, prior.Name),
		"uid":       sameStr(string(got.UID), string(prior.UID)),
		"node name": sameStr(got.Spec.NodeName, prior.Spec.NodeName),
	} {
		if !s {
			t.Errorf("the %s is a copy", name)
		}
	}
	if sameStr(got.ResourceVersion, prior.ResourceVersion) || sameStr(got.Status.PodIP, prior.Status.PodIP) {
		t.Error("a changed string is the previous version's")
	}
}

// decodeWithPrior decodes next with prior as its previous version, and
// fails the test unless the result equals a plain decode of next.
func decodeWithPrior(t *testing.T, o intern.Options, prior, next *corev1.Pod) *corev1.Pod {
	t.Helper()
	o.Prior = prior
	got := decodeWith(t, o, next)
	data, _ := json.Marshal(next)
	var want corev1.Pod
	if err := Decode(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(got, &want) {
		t.Fatalf("decoded with its previous version:\n got %+v\nwant %+v", got, &want)
	}
	return got
}
