package main

import (
	"maps"
	"strconv"
	"testing"
)

// TestInformersAgree replays a small corpus to both informers, in list and
// WatchList mode, with and without the transform, and checks that they end
// with the same Pods at the same resourceVersions after the forced relist.
// client-go reads its WatchListClient gate once per process, so here its
// "WatchList" runs list (the gate is off from the first run); Loom streams.
func TestInformersAgree(t *testing.T) {
	dir := t.TempDir()
	const n, e = 400, 40
	if err := record(dir, n, e); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < n; i++ {
		p := podFor(i)
		want[key(p)] = strconv.Itoa(relistPodRV + i)
	}
	for _, watchList := range []bool{false, true} {
		for _, strip := range []bool{false, true} {
			if watchList && strip {
				continue // keep the test short: the transform is covered in list mode
			}
			for _, impl := range []string{"loom", "client-go"} {
				var got map[string]string
				var mf int
				res, err := run(runOptions{corpus: dir, impl: impl, strip: strip, watchList: watchList, relist: true,
					keepInformer: func(pi podInformer) { got, mf = pi.rvs(), pi.managedFieldsCached() }})
				if err != nil {
					t.Fatalf("%s watchList=%v strip=%v: %v", impl, watchList, strip, err)
				}
				t.Log(res)
				if !maps.Equal(got, want) {
					t.Errorf("%s watchList=%v strip=%v: cache has %d Pods, differs from the relisted snapshot of %d", impl, watchList, strip, len(got), len(want))
				}
				if strip && mf != 0 || !strip && mf != n {
					t.Errorf("%s strip=%v: %d Pods with managedFields", impl, strip, mf)
				}
				if watchList && impl == "loom" && res.serverStreams == 0 {
					t.Errorf("loom in WatchList mode made no streaming list")
				}
				if !watchList && res.serverStreams != 0 {
					t.Errorf("%s in list mode streamed", impl)
				}
			}
		}
	}
}

// TestFirstSyncState checks the state after the initial sync and the
// recorded events, before any relist.
func TestFirstSyncState(t *testing.T) {
	dir := t.TempDir()
	const n, e = 600, 50
	if err := record(dir, n, e); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < n; i++ {
		p := podFor(i)
		want[key(p)] = p.ResourceVersion
	}
	for k := 0; k < e; k++ {
		p := eventPod(k, n, e)
		want[key(p)] = p.ResourceVersion
	}
	for _, impl := range []string{"loom", "client-go"} {
		for _, hold := range []bool{false, true} {
			var got map[string]string
			res, err := run(runOptions{corpus: dir, impl: impl, relist: false, holdEvents: hold, keepInformer: func(pi podInformer) { got = pi.rvs() }})
			if err != nil {
				t.Fatal(err)
			}
			if !maps.Equal(got, want) {
				t.Errorf("%s, events held %v: cache differs from list+events (%d vs %d Pods)", impl, hold, len(got), len(want))
			}
			if hold && (!res.heldEvents || res.allocEvents == 0) {
				t.Errorf("%s: the held events were not measured: %s", impl, res)
			}
		}
	}
}

// TestWidgetInformersAgree replays a small custom resource corpus to the
// typed and dynamic informers of both libraries and checks that each ends
// with every Widget at its relisted resourceVersion.
func TestWidgetInformersAgree(t *testing.T) {
	dir := t.TempDir()
	const n, e = 300, 30
	if err := recordWidgets(dir, n, e); err != nil {
		t.Fatal(err)
	}
	want := map[string]string{}
	for i := 0; i < n; i++ {
		w := widgetFor(i)
		want[w.Namespace+"/"+w.Name] = strconv.Itoa(relistPodRV + i)
	}
	for _, dynamic := range []bool{false, true} {
		for _, strip := range []bool{false, true} {
			for _, impl := range []string{"loom", "client-go"} {
				var got map[string]string
				var mf int
				res, err := run(runOptions{corpus: dir, impl: impl, strip: strip, dynamic: dynamic, relist: true,
					keepInformer: func(pi podInformer) { got, mf = pi.rvs(), pi.managedFieldsCached() }})
				if err != nil {
					t.Fatalf("%s dynamic=%v strip=%v: %v", impl, dynamic, strip, err)
				}
				t.Log(res)
				if !maps.Equal(got, want) {
					t.Errorf("%s dynamic=%v strip=%v: cache has %d Widgets, differs from the relisted snapshot of %d", impl, dynamic, strip, len(got), len(want))
				}
				if strip && mf != 0 || !strip && mf != n {
					t.Errorf("%s dynamic=%v strip=%v: %d Widgets with managedFields", impl, dynamic, strip, mf)
				}
			}
		}
	}
}
