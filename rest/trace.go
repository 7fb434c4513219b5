package rest

import (
	"context"
	"net/http"
	"net/url"
	"strconv"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
)

// startSpan starts the client span of one attempt and puts its traceparent
// on req. It is called only with tracing on.
func (r *Request) startSpan(ctx context.Context, req *http.Request, u *url.URL, attempt int) trace.Span {
	name := r.method
	switch {
	case r.res != "" && r.sub != "":
		name += " " + r.res + "/" + r.sub
	case r.res != "":
		name += " " + r.res
	default:
		name += " " + u.Path
	}
	attrs := make([]attribute.KeyValue, 0, 8)
	attrs = append(attrs,
		attribute.String("http.request.method", r.method),
		attribute.String("server.address", u.Hostname()),
		attribute.String("url.path", u.Path),
	)
	if p := u.Port(); p != "" {
		if n, err := strconv.Atoi(p); err == nil {
			attrs = append(attrs, attribute.Int("server.port", n))
		}
	}
	if r.res != "" {
		res := r.res
		if r.sub != "" {
			res += "/" + r.sub
		}
		attrs = append(attrs, attribute.String("k8s.resource", res))
	}
	if r.ns != "" {
		attrs = append(attrs, attribute.String("k8s.namespace.name", r.ns))
	}
	if r.name != "" {
		attrs = append(attrs, attribute.String("k8s.object.name", r.name))
	}
	if attempt > 0 {
		attrs = append(attrs, attribute.Int("http.request.resend_count", attempt))
	}
	ctx, span := r.c.tracer.Start(ctx, name, trace.WithSpanKind(trace.SpanKindClient), trace.WithAttributes(attrs...))
	propagation.TraceContext{}.Inject(ctx, propagation.HeaderCarrier(req.Header))
	return span
}

// endSpan ends an attempt's span when its response headers arrived (code >
// 0) or it failed (err). A status of 400 or more is an error, as for any
// HTTP client span.
func endSpan(span trace.Span, code int, err error) {
	if code > 0 {
		span.SetAttributes(attribute.Int("http.response.status_code", code))
	}
	switch {
	case err != nil:
		span.RecordError(err)
		span.SetStatus(codes.Error, err.Error())
	case code >= 400:
		span.SetStatus(codes.Error, http.StatusText(code))
	}
	span.End()
}
