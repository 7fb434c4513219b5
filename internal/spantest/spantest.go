// Package spantest records the spans Loom's packages make, in memory, for
// their tests: a TracerProvider that samples everything and a recorder
// that tests can wait on.
package spantest

import (
	"context"
	"fmt"
	"slices"
	"sync"

	sdktrace "go.opentelemetry.io/otel/sdk/trace"
)

// Recorder keeps every ended span and wakes waiters on each one.
type Recorder struct {
	mu      sync.Mutex
	spans   []sdktrace.ReadOnlySpan
	changed chan struct{} // closed and replaced on each span
}

// New returns a TracerProvider that samples every span and a Recorder of
// the spans it ends. Shut the provider down when done.
func New() (*sdktrace.TracerProvider, *Recorder) {
	r := &Recorder{changed: make(chan struct{})}
	tp := sdktrace.NewTracerProvider(sdktrace.WithSampler(sdktrace.AlwaysSample()), sdktrace.WithSpanProcessor(r))
	return tp, r
}

// OnStart implements sdktrace.SpanProcessor.
func (r *Recorder) OnStart(context.Context, sdktrace.ReadWriteSpan) {}

// OnEnd implements sdktrace.SpanProcessor.
func (r *Recorder) OnEnd(s sdktrace.ReadOnlySpan) {
	r.mu.Lock()
	r.spans = append(r.spans, s)
	close(r.changed)
	r.changed = make(chan struct{})
	r.mu.Unlock()
}

// Shutdown implements sdktrace.SpanProcessor.
func (r *Recorder) Shutdown(context.Context) error { return nil }

// ForceFlush implements sdktrace.SpanProcessor.
func (r *Recorder) ForceFlush(context.Context) error { return nil }

// Spans returns the ended spans, oldest first.
func (r *Recorder) Spans() []sdktrace.ReadOnlySpan {
	r.mu.Lock()
	defer r.mu.Unlock()
	return slices.Clone(r.spans)
}

// Reset forgets the spans ended so far.
func (r *Recorder) Reset() {
	r.mu.Lock()
	r.spans = nil
	r.mu.Unlock()
}

// WaitFor evaluates cond on the ended spans each time one ends, until it
// returns true or ctx ends.
func (r *Recorder) WaitFor(ctx context.Context, cond func([]sdktrace.ReadOnlySpan) bool) error {
	for {
		r.mu.Lock()
		spans, ch := slices.Clone(r.spans), r.changed
		r.mu.Unlock()
		if cond(spans) {
			return nil
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return fmt.Errorf("spantest: condition not met with %d spans: %w", len(spans), context.Cause(ctx))
		}
	}
}

// Named returns the spans with the given name, oldest first.
func Named(spans []sdktrace.ReadOnlySpan, name string) []sdktrace.ReadOnlySpan {
	var out []sdktrace.ReadOnlySpan
	for _, s := range spans {
		if s.Name() == name {
			out = append(out, s)
		}
	}
	return out
}

// Attr returns the value of a span's attribute as text, "" if absent.
func Attr(s sdktrace.ReadOnlySpan, key string) string {
	for _, a := range s.Attributes() {
		if string(a.Key) == key {
			return a.Value.Emit()
		}
	}
	return ""
}
