package rest

import (
	"context"
	"net/http"
	"sync"
	"testing"
	"time"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-k8s/loom/internal/spantest"
	"github.com/loom-k8s/loom/tracing"
)

// TestTracing checks the client spans: one per attempt, named after method
// and resource, with the traceparent header the server received naming
// that very span, and none of it with tracing off.
func TestTracing(t *testing.T) {
	var mu sync.Mutex
	var got []string // traceparent headers, one per call
	codes := []int{503, 200}
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		got = append(got, r.Header.Get("traceparent"))
		code := codes[0]
		if len(codes) > 1 {
			codes = codes[1:]
		}
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(code)
		w.Write([]byte(`{"kind":"Status","apiVersion":"v1","status":"Failure"}`))
	})

	t.Run("off", func(t *testing.T) {
		got, codes = nil, []int{200}
		c, _ := newTestClient(t, h, Options{})
		if err := c.Get().Resource("pods").Namespace("ns").Name("p").Do(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		if got[0] != "" {
			t.Errorf("traceparent sent with tracing off: %q", got[0])
		}
	})

	t.Run("a span per attempt", func(t *testing.T) {
		got, codes = nil, []int{503, 200}
		tp, rec := spantest.New()
		defer tp.Shutdown(context.Background())
		c, _ := newTestClient(t, h, Options{Tracing: tracing.Options{Provider: tp}, Retry: RetryPolicy{Backoff: time.Millisecond}})
		ctx, parent := tp.Tracer("test").Start(t.Context(), "parent")
		if err := c.Put().Resource("deployments").SubResource("status").Namespace("ns").Name("web").Body([]byte(`{}`)).Do(ctx, nil); err != nil {
			t.Fatal(err)
		}
		parent.End()
		spans := spantest.Named(rec.Spans(), "PUT deployments/status")
		if len(spans) != 2 || len(got) != 2 {
			t.Fatalf("%d spans and %d requests, want 2 and 2", len(spans), len(got))
		}
		for i, s := range spans {
			if s.Parent().SpanID() != parent.SpanContext().SpanID() {
				t.Errorf("attempt %d: parent %v, want the caller's span", i, s.Parent().SpanID())
			}
			if s.SpanKind() != trace.SpanKindClient {
				t.Errorf("attempt %d: kind %v", i, s.SpanKind())
			}
			if want := "00-" + s.SpanContext().TraceID().String() + "-" + s.SpanContext().SpanID().String() + "-01"; got[i] != want {
				t.Errorf("attempt %d: server got traceparent %q, want %q", i, got[i], want)
			}
			for k, v := range map[string]string{"k8s.resource": "deployments/status", "k8s.namespace.name": "ns", "k8s.object.name": "web", "http.request.method": "PUT"} {
				if a := spantest.Attr(s, k); a != v {
					t.Errorf("attempt %d: %s = %q, want %q", i, k, a, v)
				}
			}
		}
		if a := spantest.Attr(spans[0], "http.response.status_code"); a != "503" || spans[0].Status().Code.String() != "Error" {
			t.Errorf("first attempt: code %q status %v", a, spans[0].Status())
		}
		if a := spantest.Attr(spans[1], "http.request.resend_count"); a != "1" {
			t.Errorf("retry's resend_count = %q", a)
		}
		if spans[1].Status().Code.String() == "Error" {
			t.Errorf("the successful attempt is marked as an error")
		}
	})

	t.Run("unsampled caller", func(t *testing.T) {
		got, codes = nil, []int{200}
		tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.NeverSample()))
		defer tp.Shutdown(context.Background())
		c, _ := newTestClient(t, h, Options{Tracing: tracing.Options{Provider: tp}})
		if err := c.Get().AbsPath("version").Do(t.Context(), nil); err != nil {
			t.Fatal(err)
		}
		// The header still goes, so the server does not sample either.
		if len(got) != 1 || len(got[0]) != 55 || got[0][53:] != "00" {
			t.Errorf("traceparent %q, want an unsampled one", got)
		}
	})
}
