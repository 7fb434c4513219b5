package controller

import (
	"context"
	"fmt"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/tracing"
)

// discard is a span exporter that drops what it is given.
type discard struct{}

func (discard) ExportSpans(context.Context, []sdktrace.ReadOnlySpan) error { return nil }
func (discard) Shutdown(context.Context) error                             { return nil }

// BenchmarkTracer measures a controller's tracing work per reconcile of
// an update event (no span of its own): the event, the reconcile span's
// start and end, with every trace sampled and a batch processor whose
// exporter drops the spans.
func BenchmarkTracer(b *testing.B) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithBatcher(discard{}))
	defer tp.Shutdown(context.Background())
	t := newTracer(tracing.Options{Provider: tp}, "bench")
	const n = 10000
	objs := make([]*corev1.ConfigMap, n)
	keys := make([][]Request, n)
	for i := range objs {
		objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: fmt.Sprintf("cm-%d", i), ResourceVersion: "1"}}
		keys[i] = []Request{{Namespace: "default", Name: objs[i].Name}}
	}
	ctx := context.Background()
	b.ReportAllocs()
	i := 0
	for b.Loop() {
		k := i % n
		i++
		t.event("update", objs[k], trace.SpanContext{}, keys[k])
		_, span := t.start(ctx, keys[k][0])
		t.end(span, keys[k][0], "success", Result{}, nil, false)
	}
}
