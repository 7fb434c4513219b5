package webhook_test

import (
	"context"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"

	"github.com/loom-k8s/loom/internal/spantest"
	"github.com/loom-k8s/loom/tracing"
	"github.com/loom-k8s/loom/webhook"
)

// TestTracing checks the server span of a webhook request: it continues a
// valid traceparent, starts a new trace for a missing or malformed one, and
// carries what the admission review asked and answered.
func TestTracing(t *testing.T) {
	const (
		traceID = "4bf92f3577b34da6a3ce929d0e0e4736"
		spanID  = "00f067aa0ba902b7"
	)
	tests := []struct {
		name        string
		traceparent string
		continues   bool
	}{
		{"continued", "00-" + traceID + "-" + spanID + "-01", true},
		{"missing", "", false},
		{"malformed", "00-" + traceID + "-zz-01", false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			tp, rec := spantest.New()
			defer tp.Shutdown(context.Background())
			srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir(), Tracing: tracing.Options{Provider: tp}})
			if err != nil {
				t.Fatal(err)
			}
			var inHandler trace.SpanContext
			srv.Register("/validate", webhook.Admission(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
				inHandler = trace.SpanContextFromContext(ctx)
				return webhook.Allowed()
			}))
			body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u1","operation":"CREATE","namespace":"ns","name":"web","resource":{"group":"apps","version":"v1","resource":"deployments"},"object":{}}}`
			req := httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			if tt.traceparent != "" {
				req.Header.Set("traceparent", tt.traceparent)
			}
			w := httptest.NewRecorder()
			srv.Handler().ServeHTTP(w, req)
			if w.Code != 200 {
				t.Fatalf("status %d: %s", w.Code, w.Body)
			}
			spans := spantest.Named(rec.Spans(), "webhook /validate")
			if len(spans) != 1 {
				t.Fatalf("%d webhook spans, want 1", len(spans))
			}
			s := spans[0]
			if s.SpanKind() != trace.SpanKindServer || inHandler.SpanID() != s.SpanContext().SpanID() {
				t.Errorf("kind %v; handler's span %v, want %v", s.SpanKind(), inHandler.SpanID(), s.SpanContext().SpanID())
			}
			continued := s.SpanContext().TraceID().String() == traceID && s.Parent().SpanID().String() == spanID && s.Parent().IsRemote()
			if continued != tt.continues {
				t.Errorf("continued the caller's trace = %v, want %v (parent %v)", continued, tt.continues, s.Parent())
			}
			if !tt.continues && s.Parent().IsValid() {
				t.Errorf("a new trace has a parent: %v", s.Parent())
			}
			for k, v := range map[string]string{
				"k8s.admission.operation": "CREATE", "k8s.admission.uid": "u1", "k8s.resource": "deployments",
				"k8s.namespace.name": "ns", "k8s.object.name": "web", "k8s.admission.allowed": "true",
				"http.response.status_code": "200",
			} {
				if got := spantest.Attr(s, k); got != v {
					t.Errorf("%s = %q, want %q", k, got, v)
				}
			}
		})
	}
}
