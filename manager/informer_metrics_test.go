package manager_test

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/manager"
)

// TestInformerMetrics: the manager's registry exports each informer's
// queue depth, processing latency and newest resourceVersion under
// client-go 1.36's names and labels, and its objects and list/watch
// counts under Loom's, read from the informers at the scrape.
func TestInformerMetrics(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cms := manager.CachedClient[corev1.ConfigMap](mgr)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	for _, name := range []string{"metrics-a", "metrics-b"} {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	// Reads wait for the cache to hold the client's writes.
	written, err := cms.Get(ctx, "default", "metrics-b")
	if err != nil {
		t.Fatal(err)
	}
	rv, _ := strconv.ParseFloat(written.ResourceVersion, 64)

	values := map[string]float64{}
	series := map[string]*dto.Metric{}
	eventually(t, "the ConfigMap informer's metrics", func() bool {
		families, err := mgr.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "informer_") && !strings.HasPrefix(f.GetName(), "loom_informer_") {
				continue
			}
			for _, m := range f.GetMetric() {
				if label(m, "resource") == "configmaps" || strings.Contains(label(m, "informer"), "ConfigMap") {
					series[f.GetName()] = m
					values[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
		return values["informer_store_resource_version"] >= rv
	})
	t.Logf("%v", values)

	// client-go's shapes: labels name, group, version, resource; the
	// histogram with client-go's buckets.
	for _, name := range []string{"informer_queued_items", "informer_processing_latency_seconds", "informer_store_resource_version"} {
		m := series[name]
		if m == nil {
			t.Errorf("%s missing", name)
			continue
		}
		var labels []string
		for _, l := range m.GetLabel() {
			labels = append(labels, l.GetName()+"="+l.GetValue())
		}
		if want := []string{"group=", "name=" + label(m, "name"), "resource=configmaps", "version=v1"}; !slices.Equal(labels, want) || label(m, "name") == "" {
			t.Errorf("%s labels %v, want %v", name, labels, want)
		}
	}
	if h := series["informer_processing_latency_seconds"].GetHistogram(); h != nil {
		var bounds []float64
		for _, b := range h.GetBucket() {
			bounds = append(bounds, b.GetUpperBound())
		}
		if want := []float64{0.001, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10}; !slices.Equal(bounds, want) {
			t.Errorf("latency buckets %v, want client-go's %v", bounds, want)
		}
		if h.GetSampleCount() < 2 || h.GetSampleSum() <= 0 {
			t.Errorf("latency: %d keys in %vs, want at least the 2 created in some time", h.GetSampleCount(), h.GetSampleSum())
		}
		if last := h.GetBucket()[len(h.GetBucket())-1].GetCumulativeCount(); last == 0 || last > h.GetSampleCount() {
			t.Errorf("latency: %d keys within 10 s of %d", last, h.GetSampleCount())
		}
	} else {
		t.Error("informer_processing_latency_seconds is not a histogram")
	}
	if values["loom_informer_objects"] < 2 {
		t.Errorf("objects %v, want at least the 2 created", values["loom_informer_objects"])
	}
	if values["loom_informer_lists_total"] < 1 || values["loom_informer_watches_total"] < 1 {
		t.Errorf("lists %v, watches %v: want at least one of each", values["loom_informer_lists_total"], values["loom_informer_watches_total"])
	}
}

func label(m *dto.Metric, name string) string {
	for _, l := range m.GetLabel() {
		if l.GetName() == name {
			return l.GetValue()
		}
	}
	return ""
}

// TestReferencedMetrics: a referenced-only client's held objects and
// fetches are exported, labelled with its resource.
func TestReferencedMetrics(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	secrets := manager.CachedClient[corev1.Secret](mgr, cache.InformerForOptions{ReferencedOnly: true})
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	run := strconv.FormatInt(time.Now().UnixNano(), 36) // names of this run's own, in the package's shared control plane
	for _, name := range []string{"ref-metrics-a-" + run, "ref-metrics-b-" + run} {
		if _, err := secrets.Create(ctx, &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		// The read waits for the metadata of the write, then fetches.
		for range 3 {
			if _, err := secrets.Get(ctx, "default", name); err != nil {
				t.Fatal(err)
			}
		}
	}
	families, err := mgr.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	got := map[string]float64{}
	for _, f := range families {
		for _, m := range f.GetMetric() {
			if strings.HasPrefix(f.GetName(), "loom_cache_referenced_") && label(m, "resource") == "secrets" {
				got[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
			}
		}
	}
	if got["loom_cache_referenced_objects"] != 2 || got["loom_cache_referenced_fetches_total"] != 2 {
		t.Fatalf("referenced metrics %v, want 2 objects held and 2 fetches", got)
	}
}
