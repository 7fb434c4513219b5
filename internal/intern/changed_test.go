package intern

import (
	"reflect"
	"runtime"
	"testing"
	"unsafe"

	"k8s.io/apimachinery/pkg/api/resource"
)

type testItem struct {
	Name string
	Tags map[string]string
}

type testInner struct {
	Size resource.Quantity
	Args []string
}

type testObject struct {
	Name   string
	Labels map[string]string
	Items  []testItem
	Inner  *testInner
	Raw    []byte
	Any    map[string]any
}

// sharedParts returns an object whose every reference is a value put in
// tab, as a decoder sharing them would make it.
func sharedParts(tab *Table) *testObject {
	o := &testObject{
		Name:   "a",
		Labels: map[string]string{"app": "web"},
		Items:  []testItem{{Name: "x", Tags: map[string]string{"t": "1"}}, {Name: "y"}},
		Inner:  &testInner{Size: resource.MustParse("1Gi"), Args: []string{"--v"}},
		Raw:    []byte("0123456789abcdef0123"),
		Any:    map[string]any{"spec": map[string]any{"n": int64(1)}, "list": []any{"a", int64(2)}},
	}
	typ := unsafe.Pointer(new(byte))
	put := func(name string, p unsafe.Pointer, rt reflect.Type, n int) {
		tab.Put(KeyOf([]byte(name), typ), p, rt, n)
	}
	put("labels", reflect.ValueOf(o.Labels).UnsafePointer(), reflect.TypeOf(o.Labels), 0)
	put("items", unsafe.Pointer(unsafe.SliceData(o.Items)), reflect.TypeOf(o.Items), len(o.Items))
	put("inner", unsafe.Pointer(o.Inner), reflect.TypeOf(o.Inner), 0)
	put("raw", unsafe.Pointer(unsafe.SliceData(o.Raw)), reflect.TypeOf(o.Raw), len(o.Raw))
	put("any", reflect.ValueOf(o.Any).UnsafePointer(), reflect.TypeOf(o.Any), 0)
	return o
}

func TestChanged(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(o *testObject) *testObject // returns what is checked
		path   string                          // "" for none
	}{
		{"unchanged", func(o *testObject) *testObject { return o }, ""},
		{"own field", func(o *testObject) *testObject { o.Name = "b"; return o }, ""},
		{"label value", func(o *testObject) *testObject { o.Labels["app"] = "db"; return o }, ".Labels"},
		{"label added", func(o *testObject) *testObject { o.Labels["new"] = ""; return o }, ".Labels"},
		{"element of a shared list", func(o *testObject) *testObject { o.Items[1].Name = "z"; return o }, ".Items"},
		{"map inside a shared list", func(o *testObject) *testObject { o.Items[0].Tags["t"] = "2"; return o }, ".Items"},
		{"list shortened, elements kept", func(o *testObject) *testObject { o.Items = o.Items[:1]; return o }, ""},
		{"list shortened, then an element changed beyond the end", func(o *testObject) *testObject {
			o.Items = o.Items[:1]
			o.Items[:2][1].Name = "z"
			return o
		}, ".Items"},
		{"struct behind a shared pointer", func(o *testObject) *testObject { o.Inner.Args[0] = "--x"; return o }, ".Inner"},
		{"quantity read (fills its caches)", func(o *testObject) *testObject {
			_ = o.Inner.Size.String()
			_ = o.Inner.Size.AsDec()
			return o
		}, ""},
		{"quantity changed", func(o *testObject) *testObject { o.Inner.Size.Add(resource.MustParse("1")); return o }, ".Inner"},
		{"bytes", func(o *testObject) *testObject { o.Raw[3] = 'x'; return o }, ".Raw"},
		{"unstructured", func(o *testObject) *testObject { o.Any["spec"].(map[string]any)["n"] = int64(2); return o }, ".Any"},
		{"unstructured list", func(o *testObject) *testObject { o.Any["list"].([]any)[0] = "b"; return o }, ".Any"},
		{"a copy after a change is not the table's", func(o *testObject) *testObject {
			o.Labels["app"] = "db"
			c := *o
			c.Labels = map[string]string{"app": "db"}
			return &c
		}, ""},
		{"another object holding the changed part", func(o *testObject) *testObject {
			other := &testObject{Name: "b", Labels: o.Labels}
			o.Labels["app"] = "db"
			return other
		}, ".Labels"},
		{"nested in something of its own", func(o *testObject) *testObject {
			o.Labels["app"] = "db"
			return &testObject{Any: map[string]any{"wrapped": []any{o}}}
		}, `.Any["wrapped"][0].Labels`},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := New()
			o := sharedParts(tab)
			checked := tc.change(o)
			path, changed := tab.Changed(reflect.ValueOf(checked))
			if changed != (tc.path != "") || path != tc.path {
				t.Errorf("Changed = %q, %v; want %q, %v", path, changed, tc.path, tc.path != "")
			}
			runtime.KeepAlive(o)
		})
	}
}

// TestChangedForgetsCollectedValues: once a value is collected, nothing
// at its address counts as the table's, and its part is gone.
func TestChangedForgetsCollectedValues(t *testing.T) {
	tab := New()
	typ := unsafe.Pointer(new(byte))
	func() {
		m := map[string]string{"a": "b"}
		tab.Put(KeyOf([]byte("m"), typ), reflect.ValueOf(m).UnsafePointer(), reflect.TypeOf(m), 0)
	}()
	for i := 0; tab.Len() > 0; i++ {
		if i == 200 {
			t.Fatal("entry left after 200 GCs")
		}
		runtime.GC()
	}
	for i := range tab.parts {
		if n := len(tab.parts[i].m); n != 0 {
			t.Fatalf("parts shard %d holds %d parts after its value was collected", i, n)
		}
	}
	m := map[string]string{"a": "c"}
	if path, changed := tab.Changed(reflect.ValueOf(m)); changed {
		t.Errorf("a new map counts as a changed part at %q", path)
	}
}

// TestSumAllocatesNothing: a fingerprint is taken for every value put in
// the table while a cache syncs, so the kinds decoders share most must
// not make garbage.
func TestSumAllocatesNothing(t *testing.T) {
	o := &testObject{
		Labels: map[string]string{"app": "web", "tier": "front"},
		Items:  []testItem{{Name: "x", Tags: map[string]string{"t": "1"}}},
		Inner:  &testInner{Size: resource.MustParse("100Mi"), Args: []string{"--v"}},
		Any:    map[string]any{"spec": map[string]any{"n": int64(1), "l": []any{"a", 1.5, true, nil}}},
	}
	resources := map[string]resource.Quantity{"cpu": resource.MustParse("250m"), "memory": resource.MustParse("64Mi")}
	for name, v := range map[string]reflect.Value{
		"string map":      reflect.ValueOf(o.Labels),
		"list of structs": reflect.ValueOf(o.Items),
		"struct":          reflect.ValueOf(o.Inner),
		"resource list":   reflect.ValueOf(resources),
		"unstructured":    reflect.ValueOf(o.Any),
	} {
		if n := testing.AllocsPerRun(100, func() { Sum(v) }); n != 0 {
			t.Errorf("%s: %v allocations per Sum, want 0", name, n)
		}
	}
}
