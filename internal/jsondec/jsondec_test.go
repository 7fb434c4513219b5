package jsondec

import (
	"fmt"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"unsafe"

	corev1 "k8s.io/api/core/v1"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/loom-k8s/loom/internal/intern"
)

// reference decodes the way unstructured.Unstructured does.
func reference(data []byte) (map[string]interface{}, error) {
	m := make(map[string]interface{})
	if err := utiljson.Unmarshal(data, &m); err != nil {
		return nil, err
	}
	return m, nil
}

var cases = []string{
	`{}`,
	` {"a":1} `,
	`{"kind":"Widget","apiVersion":"example.com/v1","metadata":{"name":"w","labels":{"a":"b"},"generation":3},"spec":{"replicas":3,"ratio":0.5,"big":12345678901234567890,"exp":1e3,"neg":-7,"zero":-0,"list":[1,"two",true,false,null,{"x":[]}],"empty":{}}}`,
	`{"s":"esc \" \\ \/ \b \f \n \r \t \u00e9 \ud83d\ude00 \ud800 \udc00x \u0041"}`,
	"{\"utf8\":\"h\xc3\xa9llo \xff bad \xe2\x82\"}",
	`{"dup":1,"dup":2}`,
	`{"f":1.5e-10,"g":-0.0,"h":1E+2}`,
	`{"deep":[[[[[[[[[[1]]]]]]]]]]}`,
	`{"a":1}x`, `{"a":}`, `{"a" 1}`, `{"a":1,}`, `[1,2]`, `"str"`, `{"a":01}`, `{"a":1.}`, `{"a":-}`, `{"a":.5}`, `{"a":1e}`,
	`{"a":"\x"}`, "{\"a\":\"\x01\"}", `{"a":tru}`, `{"a":nul}`, `{"a":"unterminated}`, `{`, ``, `   `, `{"a":1e400}`, `{"a":[1,]}`, `{,}`,
	`{"a":"\u12"}`, `{"a":"\ud800\u12"}`, `null`,
	`{"kind":"WidgetList","metadata":{"resourceVersion":"9"},"items":[{"metadata":{"name":"a","labels":{"app":"web","tier":"front"}},"spec":{"size":3,"parts":[{"n":"x"},{"n":"y"}]}},{"metadata":{"name":"b","labels":{"app":"web","tier":"front"}},"spec":{"size":3,"parts":[{"n":"x"},{"n":"y"}]}},7,"s",[1,2,3,4,5,6,7,8,9]]}`,
	`{"items":[{"a":1},{"a":}]}`, `{"items":[{"a":1},{"a":1}`, `{"items":{"a":[1,2,3,4,5,6,7,8,9,10]}}`,
}

func TestMatchesReference(t *testing.T) {
	for _, c := range cases {
		check(t, []byte(c))
	}
	deep := strings.Repeat("[", 10001) + strings.Repeat("]", 10001)
	check(t, []byte(`{"a":`+deep+`}`))
}

func check(t *testing.T, data []byte) {
	t.Helper()
	want, werr := reference(data)
	got, gerr := Object(data)
	if (werr == nil) != (gerr == nil) {
		if werr == nil && gerr == ErrNotObject {
			return // null decodes into an empty map upstream; we call it not an object
		}
		t.Fatalf("%q: reference error %v, ours %v", data, werr, gerr)
	}
	if werr == nil && !reflect.DeepEqual(want, got) {
		t.Fatalf("%q:\nwant %#v\n got %#v", data, want, got)
	}
	// With sharing, twice (the second takes its parts from the table).
	for pass := range 2 {
		shared, serr := ObjectWith(data, objectSharing)
		if (gerr == nil) != (serr == nil) {
			t.Fatalf("%q: error %v, with sharing (pass %d) %v", data, gerr, pass, serr)
		}
		if werr == nil && !reflect.DeepEqual(want, shared) {
			t.Fatalf("%q, with sharing (pass %d):\nwant %#v\n got %#v", data, pass, want, shared)
		}
	}
}

var objectSharing = intern.Options{Share: intern.New(), Structs: true, Strings: new(intern.Strings)}

func TestStringsDoNotAliasInput(t *testing.T) {
	data := []byte(`{"name":"value","esc":"a\nb"}`)
	m, err := Object(data)
	if err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if m["name"] != "value" || m["esc"] != "a\nb" {
		t.Fatalf("strings changed with the input: %v", m)
	}
}

func FuzzMatchesReference(f *testing.F) {
	for _, c := range cases {
		f.Add([]byte(c))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		check(t, data)
	})
}

func TestObjectSharing(t *testing.T) {
	const widget = `{"apiVersion":"example.com/v1","kind":"Widget","metadata":{"name":"%s","labels":{"app":"web","tier":"front"},` +
		`"managedFields":[{"manager":"m","fieldsV1":{"f:spec":{}}}]},"spec":{"size":3,"parts":[{"n":"x"},{"n":"y"}]},"status":{"seen":"%s"}}`
	// The first item's parts are met once, and decoded in place; the
	// second's are put in the table, and the third takes them from it.
	list := `{"kind":"WidgetList","metadata":{"resourceVersion":"9"},"items":[` + fmt.Sprintf(widget, "x", "x") + "," + fmt.Sprintf(widget, "a", "a") + "," + fmt.Sprintf(widget, "b", "b") + `]}`
	o := intern.Options{Share: intern.New(), Structs: true, SkipManagedFields: true}
	p := parser{data: []byte(list), opts: o}
	m, err := p.object(0, "")
	if err != nil {
		t.Fatal(err)
	}
	// Without sharing, the list's own strings take one block, and each
	// item as many as it takes decoded alone.
	lp := parser{data: []byte(list)}
	if _, err := lp.object(0, ""); err != nil {
		t.Fatal(err)
	}
	want := 1
	for _, name := range []string{"x", "a", "b"} {
		ip := parser{data: []byte(fmt.Sprintf(widget, name, name))}
		if _, err := ip.object(0, ""); err != nil {
			t.Fatal(err)
		}
		want += ip.arenas
	}
	if lp.arenas != want {
		t.Errorf("%d string blocks for a list of 3, want %d: each item has its own", lp.arenas, want)
	}
	items := m["items"].([]any)
	x, a, b := items[0].(map[string]any), items[1].(map[string]any), items[2].(map[string]any)
	meta := func(o map[string]any) map[string]any { return o["metadata"].(map[string]any) }
	if meta(a)["name"] != "a" || meta(b)["name"] != "b" {
		t.Fatalf("items %v", items)
	}
	if _, ok := meta(a)["managedFields"]; ok {
		t.Error("managedFields kept")
	}
	ptr := func(v any) unsafe.Pointer { return reflect.ValueOf(v).UnsafePointer() }
	if ptr(a["spec"]) != ptr(b["spec"]) || ptr(meta(a)["labels"]) != ptr(meta(b)["labels"]) {
		t.Error("identical specs or labels are not shared")
	}
	if ptr(a["status"]) == ptr(b["status"]) || ptr(a) == ptr(b) {
		t.Error("different statuses, or whole items, are shared")
	}
	if ptr(x["spec"]) == ptr(a["spec"]) {
		t.Error("the first item's spec, met once and decoded in place, is shared")
	}
	parts := a["spec"].(map[string]any)["parts"].([]any)
	if cap(parts) != len(parts) {
		t.Errorf("a shared array has capacity %d for %d: an append would write into it", cap(parts), len(parts))
	}
	// Without options, nothing is shared and managedFields stay.
	plain, err := Object([]byte(list))
	if err != nil {
		t.Fatal(err)
	}
	pa, pb := plain["items"].([]any)[1].(map[string]any), plain["items"].([]any)[2].(map[string]any)
	if ptr(pa["spec"]) == ptr(pb["spec"]) || meta(pa)["managedFields"] == nil {
		t.Error("Object shares, or drops managed fields")
	}
}

// TestSizerFitsBlocks checks that with a Sizer, once it has learnt from a
// few objects of one shape, each object's string blocks fit the strings it
// keeps of its own, unstructured and typed, where the fixed first block of
// 512 bytes leaves much of it unused. Managed fields, labels and owner
// references come from the table and keep no strings in the object's
// blocks.
func TestSizerFitsBlocks(t *testing.T) {
	const shelf = `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"shelf-%04d","namespace":"bench","uid":"0c5e3a55-1b7e-4b7e-9d0c-%012d",` +
		`"resourceVersion":"%d","creationTimestamp":"2026-11-26T06:00:00Z","labels":{"shard.loom.dev/bench":"r1"},` +
		`"ownerReferences":[{"apiVersion":"bench.loom.dev/v1","kind":"Shelf","name":"owner","uid":"0c5e3a55-1b7e-4b7e-9d0c-000000000000"}],` +
		`"managedFields":[{"manager":"replica","operation":"Update","apiVersion":"v1","time":"2026-11-26T06:00:00Z","fieldsType":"FieldsV1",` +
		`"fieldsV1":{"f:data":{".":{},"f:value":{}},"f:metadata":{"f:labels":{".":{},"f:shard.loom.dev/bench":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"0c5e3a55-1b7e-4b7e-9d0c-000000000000\"}":{}}}}}]},` +
		`"data":{"value":"%d"}}`
	for _, typed := range []bool{false, true} {
		for _, sizer := range []*intern.Sizer{nil, {}} {
			t.Run(fmt.Sprintf("typed=%t,sizer=%t", typed, sizer != nil), func(t *testing.T) {
				opts := intern.Options{Share: intern.New(), Structs: true, Sizer: sizer}
				var keep []any // keep the shared parts alive
				for i := range 40 {
					p := parser{data: fmt.Appendf(nil, shelf, i, i, 100000+i, i), opts: opts, sizer: sizer}
					if typed {
						cm := &corev1.ConfigMap{}
						if err := p.into(tplanFor(reflect.TypeFor[corev1.ConfigMap]()), unsafe.Pointer(cm), 0); err != nil {
							t.Fatal(err)
						}
						keep = append(keep, cm)
					} else {
						m, err := p.object(0, "")
						if err != nil {
							t.Fatal(err)
						}
						keep = append(keep, m)
					}
					p.learn()
					if i == 39 {
						t.Logf("last object: %d block(s), %d bytes, for %d bytes of strings (JSON %d bytes)", p.arenas, p.arenaBytes, p.kept, len(p.data))
					}
					if i < 16 {
						// Learning. The first object's parts are met
						// once and decoded into its own blocks, which
						// the running mean takes a few objects to
						// outweigh.
						continue
					}
					fits := p.arenaBytes <= p.kept+p.kept/4+48
					if sizer != nil && !fits {
						t.Errorf("object %d: %d block(s) of %d bytes in all for %d bytes of strings", i, p.arenas, p.arenaBytes, p.kept)
					}
					if sizer == nil && fits {
						t.Errorf("object %d: %d bytes for %d bytes of strings without a sizer: the test no longer shows the fixed block's waste", i, p.arenaBytes, p.kept)
					}
				}
				runtime.KeepAlive(keep)
			})
		}
	}
}
