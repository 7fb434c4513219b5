package jsondec

import "testing"

func TestMeta(t *testing.T) {
	for _, tc := range []struct {
		in           string
		ns, name, rv string
		ok           bool
	}{
		{in: `{"metadata":{"name":"a","namespace":"ns","resourceVersion":"7"}}`, ns: "ns", name: "a", rv: "7", ok: true},
		{in: ` { "kind" : "Pod", "spec":{"x":[1,{"metadata":{"name":"inner"}}]}, "metadata" : { "resourceVersion":"9", "labels":{"a":"b"}, "name":"b" } , "status":{} } `, name: "b", rv: "9", ok: true},
		{in: `{"spec":{"metadata":{"name":"a","resourceVersion":"7"}}}`, ok: false},
		{in: `{"metadata":{"name":"a"}}`, name: "a", ok: false},
		{in: `{"metadata":{"name":"","resourceVersion":"7"}}`, rv: "7", ok: false},
		{in: `{"metadata":{"name":"a\u0062","resourceVersion":"7"}}`, rv: "7", ok: false},
		{in: `{"metadata":{"name":5,"resourceVersion":"7"}}`, rv: "7", ok: false},
		// Meta stops once it has the name and resourceVersion.
		{in: `{"metadata":{"name":"a","resourceVersion":"7"},"spec":{"x":tru}}`, name: "a", rv: "7", ok: true},
		{in: `{"metadata":{"name":"a","resourceVersion":"7","namespace":"late"}}`, name: "a", rv: "7", ok: true},
		{in: `{"metadata":{"name":"a",,"resourceVersion":"7"}}`, ok: false},
		{in: `{"metadata":{"labels":{"x":tru},"name":"a","resourceVersion":"7"}}`, ok: false},
		{in: `{"kind":"Pod","metadata" {"name":"a","resourceVersion":"7"}}`, ok: false},
		{in: `{"metadata":null}`, ok: false},
		{in: `[]`, ok: false},
		{in: ``, ok: false},
		{in: `{}`, ok: false},
	} {
		ns, name, rv, ok := Meta([]byte(tc.in))
		if ok != tc.ok || ok && (ns != tc.ns || name != tc.name || rv != tc.rv) {
			t.Errorf("%s: got %q %q %q %v, want %q %q %q %v", tc.in, ns, name, rv, ok, tc.ns, tc.name, tc.rv, tc.ok)
		}
	}
}
