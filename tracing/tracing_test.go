package tracing_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"testing"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/tracing"
)

func TestAnnotationRoundTrip(t *testing.T) {
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()

	shared := map[string]string{"keep": "me"}
	obj := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Annotations: shared}}
	if !tracing.WithAnnotation(ctx, obj) {
		t.Fatal("WithAnnotation changed nothing")
	}
	if _, ok := shared[tracing.Annotation]; ok {
		t.Error("WithAnnotation wrote into the object's old map")
	}
	if obj.Annotations["keep"] != "me" {
		t.Error("other annotations lost")
	}
	if tracing.WithAnnotation(ctx, obj) {
		t.Error("a second WithAnnotation with the same span reported a change")
	}
	sc, ok := tracing.Stamped(obj)
	if !ok || sc.TraceID() != span.SpanContext().TraceID() || sc.SpanID() != span.SpanContext().SpanID() || !sc.IsRemote() || !sc.IsSampled() {
		t.Errorf("Stamped = %v, %v; want the span's context, remote", sc, ok)
	}
}

func TestAnnotationValue(t *testing.T) {
	sampled := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()))
	never := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
	sctx, s := sampled.Tracer("t").Start(context.Background(), "s")
	nctx, n := never.Tracer("t").Start(context.Background(), "n")
	defer s.End()
	defer n.End()
	tests := []struct {
		name string
		ctx  context.Context
		want bool
	}{
		{"sampled", sctx, true},
		{"unsampled", nctx, false},
		{"no span", context.Background(), false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v := tracing.AnnotationValue(tt.ctx)
			if (v != "") != tt.want {
				t.Fatalf("AnnotationValue = %q", v)
			}
			obj := &corev1.ConfigMap{}
			if tracing.WithAnnotation(tt.ctx, obj) != tt.want {
				t.Errorf("WithAnnotation on %s", tt.name)
			}
		})
	}
}

func TestRemote(t *testing.T) {
	tests := []struct {
		value string
		ok    bool
	}{
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01", true},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-00", true},
		{"", false},
		{"garbage", false},
		{"00-00000000000000000000000000000000-00f067aa0ba902b7-01", false},
		{"00-4bf92f3577b34da6a3ce929d0e0e4736-0000000000000000-01", false},
		{"00-4BF92F3577B34DA6A3CE929D0E0E4736-00f067aa0ba902b7-01", false},
	}
	for _, tt := range tests {
		if _, ok := tracing.Remote(tt.value); ok != tt.ok {
			t.Errorf("Remote(%q) ok = %v, want %v", tt.value, ok, tt.ok)
		}
	}
}

func TestLogHandler(t *testing.T) {
	tp := sdktrace.NewTracerProvider()
	defer tp.Shutdown(context.Background())
	ctx, span := tp.Tracer("t").Start(context.Background(), "s")
	defer span.End()
	var buf bytes.Buffer
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(&buf, nil))).With("a", 1).WithGroup("g")
	log.InfoContext(ctx, "traced")
	log.Info("plain")
	lines := strings.Split(strings.TrimSpace(buf.String()), "\n")
	if len(lines) != 2 {
		t.Fatalf("%d lines", len(lines))
	}
	sc := span.SpanContext()
	if !strings.Contains(lines[0], "trace_id="+sc.TraceID().String()) || !strings.Contains(lines[0], "span_id="+sc.SpanID().String()) {
		t.Errorf("traced line lacks the IDs: %s", lines[0])
	}
	if strings.Contains(lines[1], "trace_id") {
		t.Errorf("untraced line has IDs: %s", lines[1])
	}
	if h := tracing.LogHandler(tracing.LogHandler(slog.DiscardHandler)); h == nil {
		t.Error("nil handler")
	}
}

func TestOptions(t *testing.T) {
	var off tracing.Options
	if off.Enabled() || off.Tracer() != nil {
		t.Error("the zero Options are on")
	}
	on := tracing.Options{Provider: trace.NewNoopTracerProvider()}
	if !on.Enabled() || on.Tracer() == nil {
		t.Error("Options with a provider are off")
	}
}
