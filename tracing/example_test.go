package tracing_test

import (
	"context"
	"fmt"
	"log/slog"
	"os"

	"go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/tracing"
)

// A reconcile's writes carry its trace in an annotation; the next
// controller reads it back.
func ExampleWithAnnotation() {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	sc := trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid, TraceFlags: trace.FlagsSampled})
	ctx := trace.ContextWithSpanContext(context.Background(), sc)

	secret := &corev1.Secret{}
	tracing.WithAnnotation(ctx, secret)
	fmt.Println(secret.Annotations[tracing.Annotation])

	got, ok := tracing.Stamped(secret)
	fmt.Println(ok, got.TraceID())
	// Output:
	// 00-4bf92f3577b34da6a3ce929d0e0e4736-00f067aa0ba902b7-01
	// true 4bf92f3577b34da6a3ce929d0e0e4736
}

// Log records written with a traced context carry its IDs.
func ExampleLogHandler() {
	tid, _ := trace.TraceIDFromHex("4bf92f3577b34da6a3ce929d0e0e4736")
	sid, _ := trace.SpanIDFromHex("00f067aa0ba902b7")
	ctx := trace.ContextWithSpanContext(context.Background(), trace.NewSpanContext(trace.SpanContextConfig{TraceID: tid, SpanID: sid}))

	noTime := func(_ []string, a slog.Attr) slog.Attr {
		if a.Key == slog.TimeKey {
			return slog.Attr{}
		}
		return a
	}
	log := slog.New(tracing.LogHandler(slog.NewTextHandler(os.Stdout, &slog.HandlerOptions{ReplaceAttr: noTime})))
	log.InfoContext(ctx, "reconciled", "key", "default/web")
	// Output:
	// level=INFO msg=reconciled key=default/web trace_id=4bf92f3577b34da6a3ce929d0e0e4736 span_id=00f067aa0ba902b7
}
