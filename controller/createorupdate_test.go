package controller

import (
	"encoding/json"
	"errors"
	"reflect"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/clienttest"
)

// js decodes JSON the way toMap does.
func js(t *testing.T, s string) map[string]any {
	t.Helper()
	var o struct{ V map[string]any }
	if err := json.Unmarshal([]byte(`{"V":`+s+`}`), &o); err != nil {
		t.Fatal(err)
	}
	return o.V
}

func TestMergeDiff(t *testing.T) {
	tests := []struct {
		name, a, b, want string
	}{
		{"equal", `{"a":1,"m":{"x":"y"}}`, `{"a":1,"m":{"x":"y"}}`, `{}`},
		{"scalar changed", `{"a":1,"b":2}`, `{"a":1,"b":3}`, `{"b":3}`},
		{"added", `{"a":1}`, `{"a":1,"b":{"c":true}}`, `{"b":{"c":true}}`},
		{"removed", `{"a":1,"b":2}`, `{"a":1}`, `{"b":null}`},
		{"nested change only", `{"m":{"x":"1","y":"2"}}`, `{"m":{"x":"1","y":"3","z":"4"}}`, `{"m":{"y":"3","z":"4"}}`},
		{"nested removal", `{"m":{"x":"1","y":"2"}}`, `{"m":{"x":"1"}}`, `{"m":{"y":null}}`},
		{"list replaced whole", `{"l":[1,2,3]}`, `{"l":[1,2,4]}`, `{"l":[1,2,4]}`},
		{"null and absent are equal", `{"a":null}`, `{}`, `{}`},
		{"absent and null are equal", `{}`, `{"a":null}`, `{}`},
		{"object to scalar", `{"a":{"b":1}}`, `{"a":"s"}`, `{"a":"s"}`},
		{"from nothing", `null`, `{"a":1,"n":null}`, `{"a":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			a, b := js(t, tt.a), js(t, tt.b)
			got := mergeDiff(a, b)
			if want := js(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("mergeDiff = %v, want %v", got, want)
			}
			// The patch applied to a gives b (RFC 7386), nulls aside.
			if applied := applyMerge(a, got); !reflect.DeepEqual(applied, normalize(b)) {
				t.Fatalf("a + patch = %v, want %v", applied, normalize(b))
			}
		})
	}
}

func TestApplyMerge(t *testing.T) {
	tests := []struct {
		name, v, p, want string
	}{
		{"set", `{"a":1}`, `{"b":2}`, `{"a":1,"b":2}`},
		{"delete", `{"a":1,"b":2}`, `{"b":null}`, `{"a":1}`},
		{"nested", `{"m":{"x":1,"y":2}}`, `{"m":{"y":null,"z":3}}`, `{"m":{"x":1,"z":3}}`},
		{"into a scalar", `{"a":1}`, `{"a":{"b":2}}`, `{"a":{"b":2}}`},
		{"into nothing", `null`, `{"a":{"b":null,"c":1}}`, `{"a":{"c":1}}`},
		{"nulls in the target dropped", `{"a":null,"b":1}`, `{}`, `{"b":1}`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := js(t, tt.v)
			vBefore := js(t, tt.v)
			if got, want := applyMerge(v, js(t, tt.p)), js(t, tt.want); !reflect.DeepEqual(got, want) {
				t.Fatalf("applyMerge = %v, want %v", got, want)
			}
			if !reflect.DeepEqual(v, vBefore) {
				t.Fatal("applyMerge modified its input")
			}
		})
	}
}

func TestToMapKeepsNumbers(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c", Generation: 1 << 60}}
	m, err := toMap(cm)
	if err != nil {
		t.Fatal(err)
	}
	if g := m["metadata"].(map[string]any)["generation"]; g != json.Number("1152921504606846976") {
		t.Fatalf("generation = %#v; large integers must survive exactly", g)
	}
}

func TestCreateOrUpdateBadArguments(t *testing.T) {
	ctx := t.Context()
	cms := &clienttest.Recorder[*corev1.ConfigMap]{}
	rw := struct {
		client.Reader[*corev1.ConfigMap]
		*clienttest.Recorder[*corev1.ConfigMap]
	}{cache.StoreReader(cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{})), cms}
	noop := func(*corev1.ConfigMap) error { return nil }
	named := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
	tests := []struct {
		name   string
		c      client.ReadWriter[*corev1.ConfigMap]
		obj    *corev1.ConfigMap
		mutate func(*corev1.ConfigMap) error
	}{
		{"nil client", nil, named, noop},
		{"nil object", rw, nil, noop},
		{"nil mutate", rw, named, nil},
		{"no name", rw, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", GenerateName: "c-"}}, noop},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			for verb, f := range map[string]func() (OperationResult, error){
				"CreateOrUpdate": func() (OperationResult, error) { return CreateOrUpdate(ctx, tt.c, tt.obj, tt.mutate) },
				"CreateOrPatch":  func() (OperationResult, error) { return CreateOrPatch(ctx, tt.c, tt.obj, tt.mutate) },
			} {
				res, err := f()
				if err == nil || res != OperationUnchanged {
					t.Errorf("%s = %q, %v; want an error and %q", verb, res, err, OperationUnchanged)
				}
			}
		})
	}
}

func TestMutateKeepingKey(t *testing.T) {
	tests := []struct {
		name    string
		mutate  func(*corev1.ConfigMap) error
		wantErr error
	}{
		{"data only", func(cm *corev1.ConfigMap) error { cm.Data = map[string]string{"a": "b"}; return nil }, nil},
		{"renamed", func(cm *corev1.ConfigMap) error { cm.Name = "other"; return nil }, ErrKeyChanged},
		{"moved", func(cm *corev1.ConfigMap) error { cm.Namespace = "other"; return nil }, ErrKeyChanged},
		{"failed", func(*corev1.ConfigMap) error { return errBoom }, errBoom},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "c"}}
			if err := mutateKeepingKey(cm, tt.mutate, "test"); !errors.Is(err, tt.wantErr) || (tt.wantErr == nil) != (err == nil) {
				t.Fatalf("error = %v, want %v", err, tt.wantErr)
			}
		})
	}
}

var errBoom = errors.New("boom")

// FuzzMergeDiff checks the RFC 7386 round trip on arbitrary JSON objects:
// the patch mergeDiff computes from a to b, applied to a, gives b (with
// absent and null members counted the same), and neither function panics.
func FuzzMergeDiff(f *testing.F) {
	f.Add(`{"a":1,"m":{"x":"y","z":[1,{"q":null}]}}`, `{"m":{"x":null,"w":{}},"b":[]}`)
	f.Add(`{"status":{"conditions":[{"type":"Ready"}]}}`, `{"status":{"conditions":[{"type":"Ready","status":"True"}],"phase":"Up"}}`)
	f.Add(`{"a":{"b":{"c":1}}}`, `{"a":"s"}`)
	f.Fuzz(func(t *testing.T, as, bs string) {
		decode := func(s string) (map[string]any, bool) {
			var m map[string]any
			d := json.NewDecoder(strings.NewReader(s))
			d.UseNumber()
			return m, d.Decode(&m) == nil
		}
		a, okA := decode(as)
		b, okB := decode(bs)
		if !okA || !okB {
			return
		}
		p := mergeDiff(a, b)
		if got, want := applyMerge(a, p), normalize(b); !reflect.DeepEqual(got, want) {
			t.Fatalf("a + mergeDiff(a, b) = %v, want %v (patch %v)", got, want, p)
		}
		if len(mergeDiff(b, b)) != 0 {
			t.Fatalf("mergeDiff(b, b) = %v, want empty", mergeDiff(b, b))
		}
	})
}
