package webhook

import (
	"net/http"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"
)

// traced wraps h in a server span that continues the traceparent of the
// request (kube-apiserver sends one when its tracing is on), or starts a
// trace when there is none or it is malformed.
func (s *Server) traced(path string, h http.Handler) http.Handler {
	t := s.opts.Tracing.Tracer()
	if t == nil {
		return h
	}
	name := "webhook " + path
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		ctx := propagation.TraceContext{}.Extract(r.Context(), propagation.HeaderCarrier(r.Header))
		ctx, span := t.Start(ctx, name, trace.WithSpanKind(trace.SpanKindServer), trace.WithAttributes(
			attribute.String("http.request.method", r.Method),
			attribute.String("url.path", r.URL.Path),
			attribute.String("http.route", path),
		))
		defer span.End()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		h.ServeHTTP(rec, r.WithContext(ctx))
		span.SetAttributes(attribute.Int("http.response.status_code", rec.code))
		if rec.code >= 500 {
			span.SetStatus(codes.Error, http.StatusText(rec.code))
		}
	})
}

// traceAdmission adds what an admission review asked and answered to the
// request's span, if it records.
func traceAdmission(span trace.Span, req *admissionv1.AdmissionRequest, resp *admissionv1.AdmissionResponse) {
	if !span.IsRecording() {
		return
	}
	res := req.Resource.Resource
	if req.SubResource != "" {
		res += "/" + req.SubResource
	}
	span.SetAttributes(
		attribute.String("k8s.admission.operation", string(req.Operation)),
		attribute.String("k8s.admission.uid", string(req.UID)),
		attribute.String("k8s.resource", res),
		attribute.String("k8s.namespace.name", req.Namespace),
		attribute.String("k8s.object.name", req.Name),
		attribute.Bool("k8s.admission.allowed", resp.Allowed),
	)
	if !resp.Allowed && resp.Result != nil {
		span.SetAttributes(attribute.String("k8s.admission.message", resp.Result.Message))
	}
}
