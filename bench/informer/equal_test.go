package main

import (
	"encoding/json"
	"fmt"
	"testing"

	"k8s.io/apimachinery/pkg/api/equality"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestCachesDeepEqual replays every corpus shape (200 objects per
// workload, 4 per workload, all distinct; Pods on protobuf and JSON,
// Widgets typed and dynamic), with and without managedFields stripped,
// and the distinct ones also through Loom's streaming list (client-go
// reads its WatchListClient gate once per process, and lists here), to
// both informers, and checks that Loom's cache holds objects that deep-
// equal client-go's, whole, after the sync, after the recorded events
// and after a relist that changes every object. Only the TypeMeta of
// typed objects is left out: Loom's typed lists set it on their items,
// and client-go's decoder clears it.
func TestCachesDeepEqual(t *testing.T) {
	if testing.Short() {
		t.Skip("replays every corpus shape")
	}
	const n, e = 400, 40
	type corpus struct {
		widgets     bool
		perWorkload int
	}
	saved := templates
	t.Cleanup(func() { templates = saved })
	for _, c := range []corpus{{false, 200}, {false, 4}, {false, 1}, {true, 200}, {true, 1}} {
		templates = n / c.perWorkload
		dir := t.TempDir()
		var err error
		if c.widgets {
			err = recordWidgets(dir, n, e)
		} else {
			err = record(dir, n, e)
		}
		if err != nil {
			t.Fatal(err)
		}
		kinds := []struct {
			name          string
			json, dynamic bool
		}{{"protobuf", false, false}, {"JSON", true, false}}
		if c.widgets {
			kinds = []struct {
				name          string
				json, dynamic bool
			}{{"typed", true, false}, {"dynamic", true, true}}
		}
		for _, k := range kinds {
			for _, mode := range []struct{ strip, watchList bool }{{false, false}, {true, false}, {false, true}} {
				strip, watchList := mode.strip, mode.watchList
				if watchList && c.perWorkload != 1 {
					continue // keep the test short: Loom's streaming list on the distinct corpora only
				}
				name := fmt.Sprintf("%s/%d-per-workload/%s/strip=%v", map[bool]string{false: "Pods", true: "Widgets"}[c.widgets], c.perWorkload, k.name, strip)
				if watchList {
					name += "/WatchList"
				}
				t.Run(name, func(t *testing.T) {
					snaps := map[string]map[string]map[string]any{} // impl → stage → key → object
					for _, impl := range []string{"loom", "client-go"} {
						snaps[impl] = map[string]map[string]any{}
						_, err := run(runOptions{corpus: dir, impl: impl, json: k.json, dynamic: k.dynamic, strip: strip, watchList: watchList, relist: true, holdEvents: true,
							atStage: func(stage string, pi podInformer) {
								m := map[string]any{}
								for key, o := range pi.objects() {
									m[key] = forComparison(t, o)
								}
								snaps[impl][stage] = m
							}})
						if err != nil {
							t.Fatalf("%s: %v", impl, err)
						}
					}
					for _, stage := range []string{"synced", "events", "relisted"} {
						loom, cg := snaps["loom"][stage], snaps["client-go"][stage]
						if len(loom) != n || len(cg) != n {
							t.Errorf("%s: Loom caches %d objects, client-go %d, want %d", stage, len(loom), len(cg), n)
						}
						diffs := 0
						for key, want := range cg {
							got, ok := loom[key]
							if !ok {
								t.Errorf("%s: %s is not in Loom's cache", stage, key)
								continue
							}
							if !equality.Semantic.DeepEqual(got, want) {
								if diffs++; diffs <= 2 {
									g, _ := json.Marshal(got)
									w, _ := json.Marshal(want)
									t.Errorf("%s: %s differs:\nLoom:      %s\nclient-go: %s", stage, key, g, w)
								}
							}
						}
						if diffs > 2 {
							t.Errorf("%s: %d objects differ in all", stage, diffs)
						}
					}
				})
			}
		}
	}
}

// forComparison returns what of a cached object the comparison looks at: a
// copy of a typed object with its TypeMeta cleared, or an unstructured
// object's content.
func forComparison(t *testing.T, o any) any {
	switch v := o.(type) {
	case *unstructured.Unstructured:
		return v.DeepCopy().Object
	case runtime.Object:
		c := v.DeepCopyObject()
		c.GetObjectKind().SetGroupVersionKind(schema.GroupVersionKind{})
		return c
	}
	t.Fatalf("cached object of type %T", o)
	return nil
}
