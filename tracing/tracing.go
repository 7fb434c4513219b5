package tracing

import (
	"context"

	"go.opentelemetry.io/otel/propagation"
	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// ScopeName is the instrumentation scope of every span Loom makes.
const ScopeName = "github.com/loom-k8s/loom"

// Annotation is the annotation that carries a trace from the reconcile that
// wrote an object to the controllers that see the write. Its value is a W3C
// traceparent ("00-<trace id>-<span id>-<flags>").
const Annotation = "loom.dev/traceparent"

// Options turn tracing on. The zero value is off.
type Options struct {
	// Provider makes the tracers, usually an SDK TracerProvider with an
	// exporter and a sampler of your choice. Nil (the default) turns
	// tracing off.
	Provider trace.TracerProvider
	// Annotate stamps the objects a reconcile creates, updates or applies
	// with [Annotation], and continues traces from such stamps (see the
	// package doc). Default off: objects are written as given.
	Annotate bool
	// EventSpans gives every watch event that queues a key a span of its
	// own, and makes the reconcile its child. Default off: only an event
	// that continues a stamped trace gets a span; any other event is named
	// in the attributes of the reconcile it leads to, which starts a new
	// trace. A span per event roughly doubles the spans, and the cost, of
	// tracing a controller.
	EventSpans bool
}

// Enabled reports whether o turns tracing on.
func (o Options) Enabled() bool { return o.Provider != nil }

// Tracer returns Loom's tracer from o.Provider, or nil when tracing is
// off.
func (o Options) Tracer() trace.Tracer {
	if o.Provider == nil {
		return nil
	}
	return o.Provider.Tracer(ScopeName)
}

// AnnotationValue returns the traceparent of the span in ctx, or "" when
// ctx holds no sampled span: an unsampled trace is not worth carrying to
// the next controller.
func AnnotationValue(ctx context.Context) string {
	sc := trace.SpanContextFromContext(ctx)
	if !sc.IsValid() || !sc.IsSampled() {
		return ""
	}
	return traceparent(sc)
}

// traceparent formats sc as a W3C traceparent value.
func traceparent(sc trace.SpanContext) string {
	const hex = "0123456789abcdef"
	var b [55]byte
	copy(b[:], "00-")
	tid, sid := sc.TraceID(), sc.SpanID()
	for i, x := range tid {
		b[3+2*i], b[4+2*i] = hex[x>>4], hex[x&0xf]
	}
	b[35] = '-'
	for i, x := range sid {
		b[36+2*i], b[37+2*i] = hex[x>>4], hex[x&0xf]
	}
	b[52] = '-'
	f := byte(sc.TraceFlags())
	b[53], b[54] = hex[f>>4], hex[f&0xf]
	return string(b[:])
}

// Remote parses a traceparent value, as found in [Annotation], into a
// remote span context. ok is false for an empty or malformed value.
func Remote(value string) (sc trace.SpanContext, ok bool) {
	if value == "" {
		return trace.SpanContext{}, false
	}
	ctx := propagation.TraceContext{}.Extract(context.Background(), valueCarrier(value))
	sc = trace.SpanContextFromContext(ctx)
	return sc, sc.IsValid()
}

// valueCarrier is a TextMapCarrier holding one traceparent.
type valueCarrier string

func (v valueCarrier) Get(key string) string {
	if key == "traceparent" {
		return string(v)
	}
	return ""
}
func (valueCarrier) Set(string, string) {}
func (valueCarrier) Keys() []string     { return []string{"traceparent"} }

// Stamped returns the trace context stamped on obj, if any.
func Stamped(obj metav1.Object) (trace.SpanContext, bool) {
	if obj == nil {
		return trace.SpanContext{}, false
	}
	return Remote(obj.GetAnnotations()[Annotation])
}

// WithAnnotation sets [Annotation] on obj to the traceparent of the span in
// ctx and reports whether it changed obj. It changes nothing and returns
// false when ctx holds no sampled span, or when obj already carries that
// value. obj's annotation map is replaced, not written in place, so a map
// shared with another object (a shallow copy of a cached one, say) is left
// alone.
func WithAnnotation(ctx context.Context, obj metav1.Object) bool {
	v := AnnotationValue(ctx)
	if v == "" {
		return false
	}
	old := obj.GetAnnotations()
	if old[Annotation] == v {
		return false
	}
	m := make(map[string]string, len(old)+1)
	for k, x := range old {
		m[k] = x
	}
	m[Annotation] = v
	obj.SetAnnotations(m)
	return true
}
