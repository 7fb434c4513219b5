package manager_test

import (
	"context"
	"strconv"
	"strings"
	"testing"

	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/manager"
)

// TestInformerMetrics: the manager's registry exports each informer's
// objects, queue depth, newest resourceVersion, processing counters and
// list/watch counts, read from the informers at the scrape.
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
	var informer string
	eventually(t, "the ConfigMap informer's metrics", func() bool {
		families, err := mgr.Registry().Gather()
		if err != nil {
			t.Fatal(err)
		}
		for _, f := range families {
			if !strings.HasPrefix(f.GetName(), "loom_informer_") {
				continue
			}
			for _, m := range f.GetMetric() {
				if l := label(m, "informer"); strings.Contains(l, "ConfigMap") {
					informer = l
					values[f.GetName()] = m.GetGauge().GetValue() + m.GetCounter().GetValue()
				}
			}
		}
		return values["loom_informer_resource_version"] >= rv
	})
	t.Logf("informer %q: %v", informer, values)
	if values["loom_informer_objects"] < 2 {
		t.Errorf("objects %v, want at least the 2 created", values["loom_informer_objects"])
	}
	if values["loom_informer_processed_total"] < 2 || values["loom_informer_processing_seconds_total"] <= 0 {
		t.Errorf("processed %v in %vs, want at least 2 in some time", values["loom_informer_processed_total"], values["loom_informer_processing_seconds_total"])
	}
	if values["loom_informer_lists_total"] < 1 || values["loom_informer_watches_total"] < 1 {
		t.Errorf("lists %v, watches %v: want at least one of each", values["loom_informer_lists_total"], values["loom_informer_watches_total"])
	}
	if _, ok := values["loom_informer_queue_depth"]; !ok {
		t.Error("no queue depth")
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
