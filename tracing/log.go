package tracing

import (
	"context"
	"log/slog"

	"go.opentelemetry.io/otel/trace"
)

// LogHandler returns a handler that adds the attributes trace_id and
// span_id to every record logged with a context holding a valid span (the
// slog *Context methods: logger.InfoContext(ctx, ...)), then passes it to
// h. Records logged without such a context pass unchanged. Loom's
// controllers log a reconcile's lines with the reconcile's context, so
// with tracing on their lines can be matched to its span.
func LogHandler(h slog.Handler) slog.Handler {
	if _, ok := h.(logHandler); ok {
		return h
	}
	return logHandler{h}
}

type logHandler struct{ next slog.Handler }

func (l logHandler) Enabled(ctx context.Context, level slog.Level) bool {
	return l.next.Enabled(ctx, level)
}

func (l logHandler) Handle(ctx context.Context, r slog.Record) error {
	if sc := trace.SpanContextFromContext(ctx); sc.IsValid() {
		r = r.Clone()
		r.AddAttrs(slog.String("trace_id", sc.TraceID().String()), slog.String("span_id", sc.SpanID().String()))
	}
	return l.next.Handle(ctx, r)
}

func (l logHandler) WithAttrs(attrs []slog.Attr) slog.Handler {
	return logHandler{l.next.WithAttrs(attrs)}
}

func (l logHandler) WithGroup(name string) slog.Handler {
	return logHandler{l.next.WithGroup(name)}
}
