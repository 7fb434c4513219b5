package controller

import (
	"context"
	"slices"
	"sync"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/trace"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/tracing"
)

// maxLinks bounds the links a reconcile span carries: the event spans
// folded into it beyond the latest, and the reconcile that requeued its
// key.
const maxLinks = 32

// maxFree bounds the spare pendingTraces a tracer keeps for reuse.
const maxFree = 256

// Reconcile spans are ended together, at most endEvery after their
// reconcile (with its time as their end), or as soon as maxEnded wait:
// an SDK's batch span processor wakes its goroutine for each span ended,
// which can cost as much CPU as making the span.
const (
	endEvery = 100 * time.Millisecond
	maxEnded = 256
)

// tracer makes a controller's spans. A nil *tracer is off: every method
// is then a no-op, so the controller calls them unconditionally.
type tracer struct {
	t          trace.Tracer
	annotate   bool
	eventSpans bool
	name       string
	// Made once, as a reconcile span needs them: its name, its options as
	// a child (or in a context without a span), and as a new root.
	spanName  string
	childOpts []trace.SpanStartOption
	rootOpts  []trace.SpanStartOption

	mu      sync.Mutex
	pending map[Request]*pendingTrace // keys queued since their last reconcile
	free    []*pendingTrace           // spare ones, zeroed, for reuse

	endMu    sync.Mutex
	ended    []endedSpan // reconcile spans to end
	endTimer *time.Timer // runs flush endEvery after the first of them
}

// endedSpan is a reconcile's span, and when the reconcile ended.
type endedSpan struct {
	span trace.Span
	at   time.Time
}

// pendingTrace is what the next reconcile of a key descends from.
type pendingTrace struct {
	parent trace.SpanContext // the latest event span that queued the key
	links  []trace.Link      // earlier event spans, and a requeuing reconcile
	// The events that queued the key, with or without spans: how many,
	// the latest one's operation, and when the first came.
	events int
	op     string
	first  time.Time
}

// pendingLocked returns what the next reconcile of k descends from, new
// if need be. t.mu must be held.
func (t *tracer) pendingLocked(k Request) *pendingTrace {
	p := t.pending[k]
	if p == nil {
		if n := len(t.free); n > 0 {
			p, t.free = t.free[n-1], t.free[:n-1]
		} else {
			p = &pendingTrace{}
		}
		t.pending[k] = p
	}
	return p
}

// takeLocked removes what the next reconcile of k descends from and
// returns a copy (the zero value when no event queued k). t.mu must be
// held.
func (t *tracer) takeLocked(k Request) pendingTrace {
	p := t.pending[k]
	if p == nil {
		return pendingTrace{}
	}
	delete(t.pending, k)
	q := *p
	if len(t.free) < maxFree {
		*p = pendingTrace{}
		t.free = append(t.free, p)
	}
	return q
}

// note counts an event that queued the key.
func (p *pendingTrace) note(op string, at time.Time) {
	if p.events == 0 {
		p.first = at
	}
	p.events++
	p.op = op
}

func newTracer(opts tracing.Options, name string) *tracer {
	t := opts.Tracer()
	if t == nil {
		return nil
	}
	// Only the controller's name is given at the start, for samplers that
	// choose by it; the other attributes are set once, at the end, which
	// spares the SDK copying and growing them twice.
	attrs := trace.WithAttributes(attribute.String("loom.controller", name))
	return &tracer{
		t: t, annotate: opts.Annotate, eventSpans: opts.EventSpans, name: name,
		spanName:  "reconcile " + name,
		childOpts: []trace.SpanStartOption{attrs},
		rootOpts:  []trace.SpanStartOption{trace.WithNewRoot(), attrs},
		pending:   map[Request]*pendingTrace{},
	}
}

// event records a watch event that queues keys. remote is the trace the
// event continues (from a fresh tracing.Annotation stamp), or invalid.
// An event that continues a trace, or any event with
// tracing.Options.EventSpans, gets a span of its own, which the reconcile
// descends from; any other event is counted for the reconcile's attributes.
func (t *tracer) event(op string, obj client.Object, remote trace.SpanContext, keys []Request) {
	if t == nil || len(keys) == 0 {
		return
	}
	now := time.Now()
	if !remote.IsValid() && !t.eventSpans {
		t.mu.Lock()
		for _, k := range keys {
			t.pendingLocked(k).note(op, now)
		}
		t.mu.Unlock()
		return
	}
	ctx := context.Background()
	opts := make([]trace.SpanStartOption, 0, 3)
	if remote.IsValid() {
		ctx = trace.ContextWithRemoteSpanContext(ctx, remote)
	} else {
		opts = append(opts, trace.WithNewRoot())
	}
	opts = append(opts, trace.WithSpanKind(trace.SpanKindConsumer), trace.WithAttributes(
		attribute.String("loom.controller", t.name),
		attribute.String("k8s.namespace.name", obj.GetNamespace()),
		attribute.String("k8s.object.name", obj.GetName()),
		attribute.String("k8s.resource_version", obj.GetResourceVersion()),
	))
	_, span := t.t.Start(ctx, op, opts...)
	sc := span.SpanContext()
	span.End()
	t.mu.Lock()
	for _, k := range keys {
		p := t.pendingLocked(k)
		if p.parent.IsValid() && len(p.links) < maxLinks {
			p.links = append(p.links, trace.Link{SpanContext: p.parent, Attributes: foldedAttrs})
		}
		p.parent = sc
		p.note(op, now)
	}
	t.mu.Unlock()
}

var (
	foldedAttrs  = []attribute.KeyValue{attribute.String("loom.link", "folded_event")}
	requeueAttrs = []attribute.KeyValue{attribute.String("loom.link", "requeued_by")}
)

// stamped returns the trace an event continues: obj's stamp, when the
// controller follows stamps and the stamp is new with this event (old is
// the object before an update, nil for an add).
func (t *tracer) stamped(obj, old client.Object) trace.SpanContext {
	if t == nil || !t.annotate {
		return trace.SpanContext{}
	}
	v := obj.GetAnnotations()[tracing.Annotation]
	if v == "" || old != nil && old.GetAnnotations()[tracing.Annotation] == v {
		return trace.SpanContext{}
	}
	sc, _ := tracing.Remote(v)
	return sc
}

// reconcileSpan is a reconcile's span, with what queued its key.
type reconcileSpan struct {
	span   trace.Span
	events int           // the events that queued the key
	op     string        // the latest one's operation
	wait   time.Duration // from the first one to the reconcile's start
}

// start starts the span of a reconcile of req: a child of the latest event
// span that queued it (or a new trace), linked to the other event spans and
// to a requeuing reconcile.
func (t *tracer) start(ctx context.Context, req Request) (context.Context, reconcileSpan) {
	if t == nil {
		return ctx, reconcileSpan{}
	}
	now := time.Now()
	t.mu.Lock()
	p := t.takeLocked(req)
	t.mu.Unlock()
	opts := t.childOpts
	switch {
	case p.parent.IsValid():
		ctx = trace.ContextWithSpanContext(ctx, p.parent)
	case trace.SpanContextFromContext(ctx).IsValid():
		// The controller was started under a span: the reconcile is not
		// part of that trace.
		opts = t.rootOpts
	}
	if len(p.links) > 0 {
		opts = append(slices.Clip(opts), trace.WithLinks(p.links...))
	}
	ctx, span := t.t.Start(ctx, t.spanName, opts...)
	rs := reconcileSpan{span: span, events: p.events, op: p.op}
	if p.events > 0 {
		rs.wait = now.Sub(p.first)
	}
	return ctx, rs
}

// end ends a reconcile's span with its attributes and outcome. requeued
// says the key is queued again without a change (an error or
// RequeueAfter): the next reconcile links back to this one.
func (t *tracer) end(rs reconcileSpan, req Request, outcome string, res Result, err error, requeued bool) {
	if t == nil {
		return
	}
	span := rs.span
	recording := span.IsRecording() // false for a trace not sampled
	if recording {
		attrs := make([]attribute.KeyValue, 0, 6)
		attrs = append(attrs, attribute.String("loom.key", req.String()))
		if rs.events > 0 {
			attrs = append(attrs, attribute.String("loom.event", rs.op), attribute.Int64("loom.event.wait_us", rs.wait.Microseconds()))
			if rs.events > 1 {
				attrs = append(attrs, attribute.Int("loom.event.count", rs.events))
			}
		}
		attrs = append(attrs, attribute.String("loom.result", outcome))
		if res.RequeueAfter > 0 {
			attrs = append(attrs, attribute.String("loom.requeue_after", res.RequeueAfter.String()))
		}
		span.SetAttributes(attrs...)
		if err != nil {
			span.RecordError(err)
			span.SetStatus(codes.Error, err.Error())
		}
	}
	if requeued {
		link := trace.Link{SpanContext: span.SpanContext(), Attributes: requeueAttrs}
		t.mu.Lock()
		if p := t.pendingLocked(req); len(p.links) < maxLinks {
			p.links = append(p.links, link)
		}
		t.mu.Unlock()
	}
	if !recording {
		span.End() // nothing reaches a span processor
		return
	}
	t.endMu.Lock()
	t.ended = append(t.ended, endedSpan{span, time.Now()})
	switch n := len(t.ended); {
	case n >= maxEnded:
		t.endMu.Unlock()
		t.flush()
		return
	case n == 1 && t.endTimer == nil:
		t.endTimer = time.AfterFunc(endEvery, t.flush)
	case n == 1:
		t.endTimer.Reset(endEvery)
	}
	t.endMu.Unlock()
}

// flush ends the reconcile spans that wait to be ended. The controller
// calls it once more when it stops.
func (t *tracer) flush() {
	if t == nil {
		return
	}
	t.endMu.Lock()
	batch := t.ended
	t.ended = nil
	t.endMu.Unlock()
	for _, e := range batch {
		e.span.End(trace.WithTimestamp(e.at))
	}
}
