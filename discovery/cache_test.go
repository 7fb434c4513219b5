package discovery

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/internal/clock"
)

// fakeSource counts Discover calls and returns snapshots it is given.
type fakeSource struct {
	calls atomic.Int32
	mu    sync.Mutex
	snap  *Snapshot
	err   error
	gate  chan struct{} // when set, Discover waits on it
}

func (f *fakeSource) Discover(ctx context.Context) (*Snapshot, error) {
	f.calls.Add(1)
	if f.gate != nil {
		<-f.gate
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.snap, f.err
}

func (f *fakeSource) set(s *Snapshot) { f.mu.Lock(); f.snap = s; f.mu.Unlock() }

// snapshot builds a snapshot with one group version and the given resources
// ("name:Kind:short").
func snapshot(group, version string, failed bool, resources ...metav1.APIResource) *Snapshot {
	gv := schema.GroupVersion{Group: group, Version: version}
	s := &Snapshot{
		Groups: []metav1.APIGroup{{Name: group,
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: gv.String(), Version: version}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: gv.String(), Version: version}}},
		Resources: map[schema.GroupVersion]*metav1.APIResourceList{gv: {GroupVersion: gv.String(), APIResources: resources}},
		Failed:    map[schema.GroupVersion]error{},
	}
	if failed {
		s.Failed[schema.GroupVersion{Group: "down.example", Version: "v1"}] = errors.New("unavailable")
	}
	return s
}

var widgets = metav1.APIResource{Name: "widgets", SingularName: "widget", Kind: "Widget", Namespaced: true, ShortNames: []string{"wdg"}, Verbs: []string{"get"}}

func TestCachedTTL(t *testing.T) {
	tests := []struct {
		name      string
		failed    bool
		step      time.Duration
		wantCalls int32
	}{
		{"complete, within TTL", false, time.Hour, 1},
		{"complete, after TTL", false, 7 * time.Hour, 2},
		{"partial, within partial TTL", true, 10 * time.Second, 1},
		{"partial, after partial TTL", true, time.Minute, 2},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			clk := clock.NewFake(time.Unix(1000, 0))
			src := &fakeSource{snap: snapshot("example.com", "v1", tt.failed, widgets)}
			c := NewCached(src, CacheOptions{clock: clk})
			if _, err := c.Discover(t.Context()); err != nil {
				t.Fatal(err)
			}
			clk.Step(tt.step)
			if _, err := c.Discover(t.Context()); err != nil {
				t.Fatal(err)
			}
			if got := src.calls.Load(); got != tt.wantCalls {
				t.Fatalf("source called %d times, want %d", got, tt.wantCalls)
			}
		})
	}
}

func TestCachedInvalidateAndErrors(t *testing.T) {
	src := &fakeSource{snap: snapshot("example.com", "v1", false, widgets)}
	c := NewCached(src, CacheOptions{})
	for range 3 {
		if _, err := c.Discover(t.Context()); err != nil {
			t.Fatal(err)
		}
	}
	c.Invalidate()
	src.err = errors.New("boom")
	if _, err := c.Discover(t.Context()); err == nil || err.Error() != "boom" {
		t.Fatalf("want the source's error, got %v", err)
	}
	src.err = nil
	if _, err := c.Discover(t.Context()); err != nil { // an error is not cached
		t.Fatal(err)
	}
	if got := src.calls.Load(); got != 3 {
		t.Fatalf("source called %d times, want 3", got)
	}
}

// waitingContext counts the calls of its Done method: a caller of
// Cached.Discover that waits for another's call to the source honours its
// context, so it waits on Done too.
type waitingContext struct {
	context.Context
	waiting atomic.Int32
}

func (c *waitingContext) Done() <-chan struct{} {
	c.waiting.Add(1)
	return c.Context.Done()
}

// TestCachedSharesOneCall checks that concurrent callers share one call
// to the source. The source's first call is held until every caller has
// either called the source or is waiting for another's call, so that
// without the sharing each of them would call the source.
func TestCachedSharesOneCall(t *testing.T) {
	const callers = 8
	src := &fakeSource{snap: snapshot("example.com", "v1", false, widgets), gate: make(chan struct{})}
	c := NewCached(src, CacheOptions{})
	ctx := &waitingContext{Context: context.Background()}
	var wg sync.WaitGroup
	for range callers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if _, err := c.Discover(ctx); err != nil {
				t.Error(err)
			}
		}()
	}
	deadline := time.Now().Add(30 * time.Second)
	for src.calls.Load()+ctx.waiting.Load() < callers {
		if time.Now().After(deadline) {
			close(src.gate)
			wg.Wait()
			t.Fatalf("after 30s, of %d callers %d called the source and %d wait for a call", callers, src.calls.Load(), ctx.waiting.Load())
		}
		time.Sleep(time.Millisecond)
	}
	close(src.gate)
	wg.Wait()
	if got := src.calls.Load(); got != 1 {
		t.Fatalf("source called %d times, want 1", got)
	}
}

func TestCachedOnDisk(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Unix(1000, 0))
	src := &fakeSource{snap: snapshot("example.com", "v1", false, widgets)}
	if _, err := NewCached(src, CacheOptions{Dir: dir, clock: clk}).Discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	// A second process (a new Cached) reads the disk instead of the source.
	src2 := &fakeSource{}
	s, err := NewCached(src2, CacheOptions{Dir: dir, clock: clk}).Discover(t.Context())
	if err != nil || src2.calls.Load() != 0 {
		t.Fatalf("disk cache not used: calls %d, err %v", src2.calls.Load(), err)
	}
	if s.Resources[schema.GroupVersion{Group: "example.com", Version: "v1"}].APIResources[0].Name != "widgets" {
		t.Fatalf("disk snapshot lost resources: %+v", s)
	}
	// After the TTL the disk copy is ignored.
	clk.Step(7 * time.Hour)
	src3 := &fakeSource{snap: snapshot("example.com", "v2", false)}
	if _, err := NewCached(src3, CacheOptions{Dir: dir, clock: clk}).Discover(t.Context()); err != nil || src3.calls.Load() != 1 {
		t.Fatalf("expired disk cache used: calls %d, err %v", src3.calls.Load(), err)
	}
	// A partial snapshot is not written.
	dir2 := t.TempDir()
	src4 := &fakeSource{snap: snapshot("example.com", "v1", true, widgets)}
	if _, err := NewCached(src4, CacheOptions{Dir: dir2, clock: clk}).Discover(t.Context()); err != nil {
		t.Fatal(err)
	}
	src5 := &fakeSource{snap: snapshot("example.com", "v1", false)}
	if _, err := NewCached(src5, CacheOptions{Dir: dir2, clock: clk}).Discover(t.Context()); err != nil || src5.calls.Load() != 1 {
		t.Fatalf("partial snapshot was cached on disk")
	}
}

func TestMapperRefreshesOnceOnMiss(t *testing.T) {
	clk := clock.NewFake(time.Unix(1000, 0))
	src := &fakeSource{snap: snapshot("example.com", "v1", false)}
	cached := NewCached(src, CacheOptions{clock: clk})
	m := NewMapper(cached, MapperOptions{clock: clk})

	if _, err := m.ResourceFor(t.Context(), "wdg"); !meta.IsNoMatchError(err) {
		t.Fatalf("want no match, got %v", err)
	}
	calls := src.calls.Load()
	// Misses within MinRefreshInterval do not refresh again.
	for range 5 {
		if _, err := m.ResourceFor(t.Context(), "wdg"); !meta.IsNoMatchError(err) {
			t.Fatalf("want no match, got %v", err)
		}
	}
	if src.calls.Load() != calls {
		t.Fatalf("misses refreshed %d more times within the interval", src.calls.Load()-calls)
	}
	// The CRD appears; the next miss after the interval refreshes and finds it.
	src.set(snapshot("example.com", "v1", false, widgets))
	clk.Step(2 * time.Second)
	mp, err := m.ResourceFor(t.Context(), "wdg")
	if err != nil {
		t.Fatal(err)
	}
	want := Mapping{Resource: schema.GroupVersionResource{Group: "example.com", Version: "v1", Resource: "widgets"},
		Kind: schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}, Namespaced: true}
	if mp != want {
		t.Fatalf("got %+v, want %+v", mp, want)
	}
}

func TestPreferredResourcesChoosesPreferredVersion(t *testing.T) {
	gv1 := schema.GroupVersion{Group: "g", Version: "v1"}
	gv2 := schema.GroupVersion{Group: "g", Version: "v2"}
	s := &Snapshot{
		Groups: []metav1.APIGroup{{Name: "g",
			Versions:         []metav1.GroupVersionForDiscovery{{GroupVersion: "g/v2", Version: "v2"}, {GroupVersion: "g/v1", Version: "v1"}},
			PreferredVersion: metav1.GroupVersionForDiscovery{GroupVersion: "g/v2", Version: "v2"}}},
		Resources: map[schema.GroupVersion]*metav1.APIResourceList{
			gv1: {GroupVersion: "g/v1", APIResources: []metav1.APIResource{{Name: "a"}, {Name: "old"}, {Name: "a/status"}}},
			gv2: {GroupVersion: "g/v2", APIResources: []metav1.APIResource{{Name: "a"}, {Name: "a/status"}}},
		},
	}
	got := map[string][]string{}
	for _, l := range s.PreferredResources() {
		for _, r := range l.APIResources {
			got[l.GroupVersion] = append(got[l.GroupVersion], r.Name)
		}
	}
	if len(got) != 2 || len(got["g/v2"]) != 1 || got["g/v2"][0] != "a" || len(got["g/v1"]) != 1 || got["g/v1"][0] != "old" {
		t.Fatalf("got %v; want a at g/v2 and old at g/v1, no subresources", got)
	}
}
