package controller

import (
	"context"
	"log/slog"
)

// loggerKey is the context key of a reconcile's logger.
type loggerKey struct{}

// LoggerFrom returns the logger of the reconcile that ctx belongs to: the
// controller's Options.Logger with the controller's name, the object's key
// and the reconcile's ID, whose lines carry the trace and span IDs when
// the handler is a tracing.LogHandler (a manager with tracing sets that
// up). A ReconcileFunc logs through it instead of carrying a logger of
// its own:
//
//	func reconcile(ctx context.Context, foo *v1.Foo) (controller.Result, error) {
//		log := controller.LoggerFrom(ctx)
//		log.InfoContext(ctx, "scaling", "replicas", foo.Spec.Replicas)
//		...
//	}
//
// Outside a reconcile (or with no Options.Logger) it returns a logger
// that discards.
func LoggerFrom(ctx context.Context) *slog.Logger {
	if l, ok := ctx.Value(loggerKey{}).(*slog.Logger); ok {
		return l
	}
	return slog.New(slog.DiscardHandler)
}
