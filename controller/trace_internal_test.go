package controller

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/spantest"
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

// TestReconcileSpansEndTogether checks that reconcile spans handed to the
// SDK in batches keep their reconcile's end time, and that a full batch is
// handed over at once.
func TestReconcileSpansEndTogether(t *testing.T) {
	tp, rec := spantest.New()
	defer tp.Shutdown(context.Background())
	tr := newTracer(tracing.Options{Provider: tp}, "batch")
	req := Request{Namespace: "default", Name: "a"}

	_, rs := tr.start(context.Background(), req)
	before := time.Now()
	tr.end(rs, req, "success", Result{}, nil, false)
	after := time.Now()
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	if err := rec.WaitFor(ctx, func(s []sdktrace.ReadOnlySpan) bool { return len(s) == 1 }); err != nil {
		t.Fatalf("the span was not ended: %v", err)
	}
	if end := rec.Spans()[0].EndTime(); end.Before(before) || end.After(after) {
		t.Errorf("the span ended at %v, not when its reconcile did (between %v and %v)", end, before, after)
	}

	rec.Reset()
	for range maxEnded {
		_, rs := tr.start(context.Background(), req)
		tr.end(rs, req, "success", Result{}, nil, false)
	}
	if n := len(rec.Spans()); n != maxEnded {
		t.Errorf("%d spans ended once %d waited, want all", n, maxEnded)
	}

	// A span of a trace not sampled is ended at once: nothing waits.
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	defer never.Shutdown(context.Background())
	tr = newTracer(tracing.Options{Provider: never}, "unsampled")
	_, rs = tr.start(context.Background(), req)
	tr.end(rs, req, "error", Result{}, errors.New("boom"), true)
	tr.endMu.Lock()
	waiting := len(tr.ended)
	tr.endMu.Unlock()
	if waiting != 0 {
		t.Errorf("%d unsampled spans wait to be ended", waiting)
	}
}
