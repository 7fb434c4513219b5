package jsondec

import (
	"encoding/json"
	"reflect"
	"strings"
	"testing"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/loom-k8s/loom/internal/intern"
)

// managedPod is examplePod with a security context, a probe and managed
// fields: every kind of part that is shared.
func managedPod(name string) *corev1.Pod {
	p := examplePod()
	p.Name = name
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsNonRoot: new(bool), FSGroup: new(int64)}
	p.Spec.Volumes = []corev1.Volume{{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{},"f:phase":{},"f:podIP":{}}}`)}}}
	return p
}

func decodeWith(t *testing.T, o intern.Options, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := DecodeWith(data, &got, o); err != nil {
		t.Fatal(err)
	}
	return &got
}

func same[T any](a, b []T) bool { return len(a) > 0 && unsafe.SliceData(a) == unsafe.SliceData(b) }

func sameMap[K comparable, V any](a, b map[K]V) bool {
	return a != nil && reflect.ValueOf(a).UnsafePointer() == reflect.ValueOf(b).UnsafePointer()
}

func TestSharedParts(t *testing.T) {
	for _, tc := range []struct {
		name         string
		opts         intern.Options
		structs, raw bool
	}{
		{"off", intern.Options{}, false, false},
		{"blobs", intern.Options{Share: intern.New()}, false, true},
		{"all", intern.Options{Share: intern.New(), Structs: true}, true, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// Parts met once are decoded into their object's own memory,
			// and cost the table no entry; met again, they are put in it.
			first := decodeWith(t, tc.opts, managedPod("first"))
			if tc.opts.Share != nil && tc.opts.Share.Len() != 0 {
				t.Errorf("the first object's parts took %d table entries", tc.opts.Share.Len())
			}
			a, b := decodeWith(t, tc.opts, managedPod("a")), decodeWith(t, tc.opts, managedPod("b"))
			if same(first.Spec.Containers, a.Spec.Containers) || same(first.ManagedFields[0].FieldsV1.Raw, a.ManagedFields[0].FieldsV1.Raw) {
				t.Error("the first object's parts, decoded in place, are shared")
			}
			if a.Name != "a" || b.Name != "b" {
				t.Fatalf("names %q, %q", a.Name, b.Name)
			}
			for what, got := range map[string]bool{
				"containers":       same(a.Spec.Containers, b.Spec.Containers),
				"volumes":          same(a.Spec.Volumes, b.Spec.Volumes),
				"labels":           sameMap(a.Labels, b.Labels),
				"resource list":    sameMap(a.Spec.Containers[0].Resources.Requests, b.Spec.Containers[0].Resources.Requests),
				"security context": a.Spec.SecurityContext == b.Spec.SecurityContext,
			} {
				if got != tc.structs {
					t.Errorf("%s shared: %v, want %v", what, got, tc.structs)
				}
			}
			if got := same(a.ManagedFields[0].FieldsV1.Raw, b.ManagedFields[0].FieldsV1.Raw); got != tc.raw {
				t.Errorf("managed-fields blob shared: %v, want %v", got, tc.raw)
			}
			if got := a.ManagedFields[0].FieldsV1 == b.ManagedFields[0].FieldsV1; got != tc.raw {
				t.Errorf("managed-fields FieldsV1 shared: %v, want %v", got, tc.raw)
			}
			// Structs holding a time are never shared.
			if same(a.Status.Conditions, b.Status.Conditions) || same(a.ManagedFields, b.ManagedFields) {
				t.Error("conditions or managed-fields entries are shared")
			}
			if tc.structs {
				if c := a.Spec.Containers; cap(c) != len(c) {
					t.Errorf("shared containers have capacity %d for %d: an append would write into them", cap(c), len(c))
				}
			}
			if !reflect.DeepEqual(a.Spec, b.Spec) {
				t.Error("specs differ")
			}
		})
	}
}

// TestRepeatedKeyDoesNotChangeASharedValue decodes an object whose
// metadata has its labels twice: the labels taken from the table for the
// first must not get the second's.
func TestRepeatedKeyDoesNotChangeASharedValue(t *testing.T) {
	o := intern.Options{Share: intern.New(), Structs: true}
	first := decodeWith(t, o, managedPod("a"))
	data, _ := json.Marshal(managedPod("b"))
	for _, dup := range []struct{ key, second string }{
		{`"labels":`, `{"app":"other"}`},
		{`"securityContext":`, `{"runAsUser":7}`},
		{`"containers":`, `[{"name":"other"}]`},
		{`"fieldsV1":`, `{"f:spec":{}}`},
	} {
		doubled := repeatKey(t, data, dup.key, dup.second)
		var want, got corev1.Pod
		if err := utiljson.Unmarshal(doubled, &want); err != nil {
			t.Fatalf("%s: reference: %v\n%s", dup.key, err, doubled)
		}
		if err := DecodeWith(doubled, &got, o); err != nil {
			t.Fatalf("%s: %v", dup.key, err)
		}
		if !reflect.DeepEqual(&want, &got) {
			t.Errorf("%s: decoders differ\nwant %+v\n got %+v", dup.key, want, got)
		}
	}
	if again := decodeWith(t, intern.Options{}, managedPod("a")); !reflect.DeepEqual(again, first) {
		t.Errorf("the first object changed:\nwant %+v\n got %+v", again, first)
	}
}

// repeatKey returns data with key repeated, with the value second, right
// after key's first value.
func repeatKey(t *testing.T, data []byte, key, second string) []byte {
	t.Helper()
	i := strings.Index(string(data), key)
	if i < 0 {
		t.Fatalf("no %s in %s", key, data)
	}
	p := parser{data: data, i: i + len(key)}
	if _, err := p.skipValue(0); err != nil {
		t.Fatal(err)
	}
	return []byte(string(data[:p.i]) + "," + key + second + string(data[p.i:]))
}

func TestSkipManagedFields(t *testing.T) {
	for _, o := range []intern.Options{{SkipManagedFields: true}, {SkipManagedFields: true, Share: intern.New(), Structs: true}} {
		got := decodeWith(t, o, managedPod("a"))
		if got.ManagedFields != nil || got.Name != "a" || len(got.Spec.Containers) != 1 {
			t.Errorf("%+v: managed fields %v, name %q", o, got.ManagedFields, got.Name)
		}
	}
}

// TestStringsShared checks that, with Strings, two objects hold one copy
// of their equal strings (fields, map keys and values, list elements;
// for unstructured objects, keys and values), and that without it each
// holds its own.
func TestStringsShared(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts intern.Options
		same bool
	}{
		{"strings", intern.Options{Strings: new(intern.Strings), Stats: &intern.Stats{}}, true},
		{"strings and table", intern.Options{Share: intern.New(), Structs: true, Strings: new(intern.Strings)}, true},
		{"none", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a, b := decodeWith(t, tc.opts, managedPod("a")), decodeWith(t, tc.opts, managedPod("b"))
			pairs := map[string][2]string{
				"namespace":      {a.Namespace, b.Namespace},
				"image":          {a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
				"arg":            {a.Spec.Containers[0].Args[0], b.Spec.Containers[0].Args[0]},
				"condition type": {string(a.Status.Conditions[0].Type), string(b.Status.Conditions[0].Type)},
				"manager":        {a.ManagedFields[0].Manager, b.ManagedFields[0].Manager},
			}
			if !tc.opts.Structs { // a shared map holds one copy anyway
				for k, v := range a.Labels {
					for k2, v2 := range b.Labels {
						if k == k2 {
							pairs["label key "+k] = [2]string{k, k2}
							pairs["label value "+k] = [2]string{v, v2}
						}
					}
				}
			}
			ua, ub := decodeObject(t, tc.opts, managedPod("a")), decodeObject(t, tc.opts, managedPod("b"))
			ma, mb := ua["metadata"].(map[string]any), ub["metadata"].(map[string]any)
			pairs["unstructured namespace"] = [2]string{ma["namespace"].(string), mb["namespace"].(string)}
			for k := range ma {
				for k2 := range mb {
					if k == k2 {
						pairs["unstructured key "+k] = [2]string{k, k2}
					}
				}
			}
			for what, p := range pairs {
				if same := unsafe.StringData(p[0]) == unsafe.StringData(p[1]); same != tc.same {
					t.Errorf("%s %q: one copy %v, want %v", what, p[0], same, tc.same)
				}
			}
			if unsafe.StringData(a.Name) == unsafe.StringData(b.Name) {
				t.Error("two names share bytes")
			}
			// An unstructured string value held once is one box, too.
			box := func(v any) unsafe.Pointer { return (*[2]unsafe.Pointer)(unsafe.Pointer(&v))[1] }
			if same := box(ma["namespace"]) == box(mb["namespace"]); same != tc.same {
				t.Errorf("unstructured namespace: one box %v, want %v", same, tc.same)
			}
		})
	}
}

func decodeObject(t *testing.T, o intern.Options, p *corev1.Pod) map[string]any {
	t.Helper()
	data, err := json.Marshal(p)
	if err != nil {
		t.Fatal(err)
	}
	m, err := ObjectWith(data, o)
	if err != nil {
		t.Fatal(err)
	}
	var want map[string]any
	if err := utiljson.Unmarshal(data, &want); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(m, want) {
		t.Fatalf("decoded %v\nwant %v", m, want)
	}
	return m
}

// TestPartsRepeatedInOneObject checks that a part an object repeats (a
// Deployment's labels, its selector and its template's labels) is one
// value even when the table has never met it, and costs the table no
// entry: typed and unstructured.
func TestPartsRepeatedInOneObject(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
	}
	data, err := json.Marshal(d)
	if err != nil {
		t.Fatal(err)
	}
	o := intern.Options{Share: intern.New(), Structs: true}
	var got appsv1.Deployment
	if err := DecodeWith(data, &got, o); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d, &got) {
		t.Fatalf("decoded %+v", got)
	}
	if !sameMap(got.Labels, got.Spec.Selector.MatchLabels) || !sameMap(got.Labels, got.Spec.Template.Labels) {
		t.Error("typed: the labels an object repeats are not one map")
	}
	m, err := ObjectWith(data, o)
	if err != nil {
		t.Fatal(err)
	}
	ptr := func(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }
	meta := m["metadata"].(map[string]any)
	tmeta := m["spec"].(map[string]any)["template"].(map[string]any)["metadata"].(map[string]any)
	if ptr(meta["labels"]) != ptr(tmeta["labels"]) {
		t.Error("unstructured: the labels an object repeats are not one map")
	}
	if n := o.Share.Len(); n != 0 {
		t.Errorf("the table took %d entries for parts met in one object only", n)
	}
}

// TestChangedInPlace: a part shared by decoded objects, typed or
// unstructured, and changed in place through one of them is found in the
// other by the table's Changed, which a write checks; the parts as
// decoded are not.
func TestChangedInPlace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		path   string
	}{
		{"none", func(*corev1.Pod) {}, ""},
		{"own name", func(p *corev1.Pod) { p.Name = "c" }, ""},
		{"container image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "changed" }, ".Spec.Containers"},
		{"label", func(p *corev1.Pod) { p.Labels["app"] = "changed" }, ".ObjectMeta.Labels"},
		{"managed fields blob", func(p *corev1.Pod) { p.ManagedFields[0].FieldsV1.Raw[2] = 'x' }, ".ObjectMeta.ManagedFields[0].FieldsV1"},
		// The FieldsV1 is shared, not only its bytes.
		{"managed fields blob replaced", func(p *corev1.Pod) { p.ManagedFields[0].FieldsV1.Raw = []byte("{}") }, ".ObjectMeta.ManagedFields[0].FieldsV1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := intern.Options{Share: intern.New(), Structs: true}
			decodeWith(t, o, managedPod("first"))
			a, b := decodeWith(t, o, managedPod("a")), decodeWith(t, o, managedPod("b"))
			if path, changed := o.Share.Changed(reflect.ValueOf(b)); changed {
				t.Fatalf("a part of b as decoded counts as changed, at %s", path)
			}
			tc.change(a)
			path, changed := o.Share.Changed(reflect.ValueOf(b))
			if changed != (tc.path != "") || path != tc.path {
				t.Errorf("Changed(b) = %q, %v; want %q, %v", path, changed, tc.path, tc.path != "")
			}
			if path, changed := o.Share.Changed(reflect.ValueOf(b.DeepCopy())); changed {
				t.Errorf("a copy of b counts as changed, at %s", path)
			}
		})
	}
	t.Run("unstructured", func(t *testing.T) {
		o := intern.Options{Share: intern.New(), Structs: true}
		decodeObject(t, o, managedPod("first"))
		a, b := decodeObject(t, o, managedPod("a")), decodeObject(t, o, managedPod("b"))
		if path, changed := o.Share.Changed(reflect.ValueOf(b)); changed {
			t.Fatalf("a part of b as decoded counts as changed, at %s", path)
		}
		a["spec"].(map[string]any)["containers"].([]any)[0].(map[string]any)["image"] = "changed"
		path, changed := o.Share.Changed(reflect.ValueOf(b))
		if !changed || !strings.HasPrefix(path, `["spec"]`) {
			t.Errorf("Changed(b) = %q, %v; want a path in the spec", path, changed)
		}
	})
}
