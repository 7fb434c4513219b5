package intern

import (
	"maps"
	"reflect"
	"runtime"
	"slices"
	"testing"
)

// deepCopy copies o into memory of its own, as a generated DeepCopy does.
func deepCopy(o *testObject) *testObject {
	c := *o
	c.Labels = maps.Clone(o.Labels)
	c.Items = slices.Clone(o.Items)
	for i := range c.Items {
		c.Items[i].Tags = maps.Clone(c.Items[i].Tags)
	}
	if o.Inner != nil {
		in := *o.Inner
		in.Size = o.Inner.Size.DeepCopy()
		in.Args = slices.Clone(o.Inner.Args)
		c.Inner = &in
	}
	c.Raw = slices.Clone(o.Raw)
	c.Any = cloneAny(o.Any).(map[string]any)
	return &c
}

func cloneAny(v any) any {
	switch v := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(v))
		for k, e := range v {
			m[k] = cloneAny(e)
		}
		return m
	case []any:
		s := make([]any, len(v))
		for i, e := range v {
			s[i] = cloneAny(e)
		}
		return s
	}
	return v
}

func TestChangedIn(t *testing.T) {
	for _, tc := range []struct {
		name  string
		write func(o *testObject) any // changes the cached o; returns what is written
		path  string                  // "" for none
	}{
		{"a copy, nothing changed", func(o *testObject) any { return deepCopy(o) }, ""},
		{"a copy made after a change", func(o *testObject) any { o.Labels["app"] = "db"; return deepCopy(o) }, ".Labels"},
		{"the cached object itself", func(o *testObject) any { o.Labels["app"] = "db"; return o }, ".Labels"},
		{"a copy whose labels are new", func(o *testObject) any {
			o.Labels["app"] = "db"
			c := deepCopy(o)
			c.Labels = map[string]string{"app": "cache"}
			return c
		}, ""},
		{"a copy without labels", func(o *testObject) any {
			o.Labels["app"] = "db"
			c := deepCopy(o)
			c.Labels = nil
			return c
		}, ""},
		{"a copy made before the change", func(o *testObject) any {
			c := deepCopy(o)
			o.Labels["app"] = "db"
			return c
		}, ""},
		{"a copy, map in a list", func(o *testObject) any { o.Items[0].Tags["t"] = "2"; return deepCopy(o) }, ".Items"},
		{"a copy, list element of its own", func(o *testObject) any {
			o.Items[0].Tags["t"] = "2"
			c := deepCopy(o)
			c.Items[0].Tags["t"] = "3"
			return c
		}, ""},
		{"a copy, behind a pointer", func(o *testObject) any { o.Inner.Args[0] = "--x"; return deepCopy(o) }, ".Inner"},
		{"a copy, unstructured", func(o *testObject) any {
			o.Any["spec"].(map[string]any)["n"] = int64(2)
			return deepCopy(o)
		}, ".Any"},
		{"another type: any changed part counts", func(o *testObject) any { o.Labels["app"] = "db"; return &testItem{} }, ".Labels"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			tab := New()
			o := sharedParts(tab)
			w := tc.write(o)
			path, changed := tab.ChangedIn(reflect.ValueOf(o), reflect.ValueOf(w))
			if changed != (tc.path != "") || path != tc.path {
				t.Errorf("ChangedIn = %q, %v; want %q, %v", path, changed, tc.path, tc.path != "")
			}
			runtime.KeepAlive(o)
		})
	}
}

// TestCachedChanged: a write can look up the cached object of the name
// it writes, in the caches of its resource, and learn whether what it
// writes carries a part of that object changed in place.
func TestCachedChanged(t *testing.T) {
	tab := New()
	o := sharedParts(tab)
	get := func(namespace, name string) (any, bool) {
		if namespace == "ns" && name == "a" {
			return o, true
		}
		return nil, false
	}
	check := func(step, resource, namespace, name string, written *testObject, want string) {
		t.Helper()
		path, changed := tab.CachedChanged(resource, namespace, name, reflect.ValueOf(written))
		if changed != (want != "") || path != want {
			t.Errorf("%s: CachedChanged(%q, %q, %q) = %q, %v; want %q", step, resource, namespace, name, path, changed, want)
		}
	}
	check("no cache", "things", "ns", "a", deepCopy(o), "")
	o.Labels["app"] = "db"
	check("no cache, changed", "things", "ns", "a", deepCopy(o), "")
	if tab.HasCaches() {
		t.Error("HasCaches before any was added")
	}
	remove := tab.AddCache("things", get)
	removeOther := tab.AddCache("things", func(string, string) (any, bool) { return nil, false })
	if !tab.HasCaches() {
		t.Error("no HasCaches after two were added")
	}
	check("changed", "things", "ns", "a", deepCopy(o), ".Labels")
	check("another resource", "others", "ns", "a", deepCopy(o), "")
	check("another name", "things", "ns", "b", deepCopy(o), "")
	check("another namespace", "things", "other", "a", deepCopy(o), "")
	o.Labels["app"] = "web"
	check("changed back", "things", "ns", "a", deepCopy(o), "")
	o.Items[0].Tags["t"] = "2"
	check("changed again", "things", "ns", "a", deepCopy(o), ".Items")
	remove()
	remove() // a second call does nothing
	check("removed", "things", "ns", "a", deepCopy(o), "")
	removeOther()
	if n := tab.caches.n.Load(); n != 0 || len(tab.caches.by) != 0 || tab.HasCaches() {
		t.Errorf("after every cache was removed: %d caches, %d resources", n, len(tab.caches.by))
	}
	runtime.KeepAlive(o)
}
