package testenv

import (
	"context"
	"encoding/base64"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"google.golang.org/grpc"
	_ "google.golang.org/grpc/encoding/gzip" // accept exporters that compress
)

// maxSpans is how many spans a TraceCollector keeps.
const maxSpans = 100_000

// closeGrace bounds how long Close waits for exports in flight.
const closeGrace = 5 * time.Second

// Span is one span as received.
type Span struct {
	// TraceID and SpanID are lower-case hex. ParentSpanID is empty for a
	// root span.
	TraceID, SpanID, ParentSpanID string
	Name                          string
	// Service is the service.name attribute of the span's resource.
	Service string
	// Kind is "server", "client", "internal", "producer" or "consumer";
	// empty if the sender left it unspecified.
	Kind       string
	Start, End time.Time
	// Attributes holds every attribute of the span, its value as text:
	// strings as they are, integers in decimal, booleans as true or false,
	// bytes in base64, arrays and maps in a JSON-like form.
	Attributes map[string]string
	// Links are the spans this span is linked to.
	Links []SpanLink
	// Events are the names of the span's events, in order.
	Events []string
	// StatusError is true when the span ended with an error status, and
	// StatusMessage is its description.
	StatusError   bool
	StatusMessage string
}

// SpanLink is a link from one span to another, in lower-case hex.
type SpanLink struct {
	TraceID, SpanID string
}

// TraceCollector receives spans over OTLP/gRPC (the protocol of
// OpenTelemetry's otlptracegrpc exporter, without TLS) and keeps them in
// memory for a test to inspect. Env.Traces is one, fed by kube-apiserver
// when Options.Tracing is on; NewTraceCollector makes one for any other
// program, such as a test's own OpenTelemetry SDK:
//
//	c, err := testenv.NewTraceCollector()
//	...
//	defer c.Close()
//	exp, err := otlptracegrpc.New(ctx,
//		otlptracegrpc.WithEndpoint(c.Endpoint()), otlptracegrpc.WithInsecure())
//
// It keeps the latest 100,000 spans, in the order they arrived, and drops
// the oldest beyond that. The spans stay readable after Close. Its methods
// are safe for concurrent use. The maps and slices inside the spans it
// returns are shared by every caller and must not be modified.
type TraceCollector struct {
	endpoint string
	server   *grpc.Server
	served   chan struct{} // closed when Serve has returned
	serveErr error         // Serve's error, valid once served is closed

	closeOnce sync.Once

	mu      sync.Mutex
	limit   int    // maxSpans; lower in tests
	spans   []Span // ring buffer once full: the oldest is at spans[head]
	head    int
	arrived chan struct{} // closed and replaced whenever spans arrive
}

// NewTraceCollector starts a collector on 127.0.0.1 on a free port. Stop it
// with Close.
func NewTraceCollector() (*TraceCollector, error) {
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		return nil, fmt.Errorf("testenv: trace collector: %w", err)
	}
	c := &TraceCollector{
		endpoint: l.Addr().String(),
		server:   grpc.NewServer(grpc.MaxRecvMsgSize(64 << 20)),
		served:   make(chan struct{}),
		limit:    maxSpans,
		arrived:  make(chan struct{}),
	}
	collectortracepb.RegisterTraceServiceServer(c.server, traceService{c: c})
	go func() {
		defer close(c.served)
		c.serveErr = c.server.Serve(l)
	}()
	return c, nil
}

// Endpoint is the collector's address, "127.0.0.1:<port>", as
// otlptracegrpc.WithEndpoint and kube-apiserver's tracing configuration
// take it.
func (c *TraceCollector) Endpoint() string { return c.endpoint }

// Close stops the collector: it refuses new exports, waits a few seconds
// for those in flight, then closes every connection. It returns once
// everything the collector started has ended. It is safe to call more
// than once.
func (c *TraceCollector) Close() error {
	c.closeOnce.Do(func() {
		graceful := make(chan struct{})
		go func() {
			defer close(graceful)
			c.server.GracefulStop()
		}()
		t := time.NewTimer(closeGrace)
		defer t.Stop()
		select {
		case <-graceful:
		case <-t.C:
			c.server.Stop() // also makes GracefulStop return
			<-graceful
		}
		<-c.served
	})
	<-c.served
	if c.serveErr != nil && !errors.Is(c.serveErr, grpc.ErrServerStopped) {
		return fmt.Errorf("testenv: trace collector: %w", c.serveErr)
	}
	return nil
}

// Spans returns every span kept, in the order they arrived.
func (c *TraceCollector) Spans() []Span {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.snapshotLocked()
}

// Trace returns the spans of one trace (traceID in hex), sorted by start
// time.
func (c *TraceCollector) Trace(traceID string) []Span {
	return spansOfTrace(c.Spans(), traceID)
}

// spansOfTrace picks the spans of one trace from spans, sorted by start
// time.
func spansOfTrace(spans []Span, traceID string) []Span {
	traceID = strings.ToLower(traceID)
	var out []Span
	for _, s := range spans {
		if s.TraceID == traceID {
			out = append(out, s)
		}
	}
	sort.SliceStable(out, func(i, j int) bool { return out[i].Start.Before(out[j].Start) })
	return out
}

// WaitFor calls cond with every span kept, now and again each time new
// spans arrive, until it returns true. If ctx ends first, WaitFor returns
// an error that wraps ctx's. cond must not keep or modify the slice.
//
// Exporters batch their spans: kube-apiserver, like the OpenTelemetry SDK
// by default, sends them every 5 seconds, so give ctx a generous deadline.
func (c *TraceCollector) WaitFor(ctx context.Context, cond func([]Span) bool) error {
	for {
		c.mu.Lock()
		spans := c.snapshotLocked()
		arrived := c.arrived
		c.mu.Unlock()
		if cond(spans) {
			return nil
		}
		select {
		case <-arrived:
		case <-ctx.Done():
			return fmt.Errorf("testenv: waiting for spans (%d received, the condition is not met): %w", len(spans), ctx.Err())
		}
	}
}

// Reset forgets every span received so far.
func (c *TraceCollector) Reset() {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.spans, c.head = nil, 0
}

// snapshotLocked copies the kept spans, oldest first.
func (c *TraceCollector) snapshotLocked() []Span {
	out := make([]Span, 0, len(c.spans))
	out = append(out, c.spans[c.head:]...)
	return append(out, c.spans[:c.head]...)
}

// add keeps spans, dropping the oldest beyond the limit, and wakes
// WaitFor.
func (c *TraceCollector) add(spans []Span) {
	if len(spans) == 0 {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, s := range spans {
		if len(c.spans) < c.limit {
			c.spans = append(c.spans, s)
			continue
		}
		c.spans[c.head] = s
		c.head = (c.head + 1) % len(c.spans)
	}
	close(c.arrived)
	c.arrived = make(chan struct{})
}

// traceService is the gRPC side of a TraceCollector. It is separate so
// that the collector's own method set stays free of protocol methods.
type traceService struct {
	collectortracepb.UnimplementedTraceServiceServer
	c *TraceCollector
}

// Export receives one batch of spans.
func (s traceService) Export(_ context.Context, req *collectortracepb.ExportTraceServiceRequest) (*collectortracepb.ExportTraceServiceResponse, error) {
	var spans []Span
	for _, rs := range req.GetResourceSpans() {
		var service string
		for _, kv := range rs.GetResource().GetAttributes() {
			if kv.GetKey() == "service.name" {
				service = formatValue(kv.GetValue(), false)
			}
		}
		for _, ss := range rs.GetScopeSpans() {
			for _, sp := range ss.GetSpans() {
				spans = append(spans, convertSpan(sp, service))
			}
		}
	}
	s.c.add(spans)
	return &collectortracepb.ExportTraceServiceResponse{}, nil
}

// convertSpan turns an OTLP span into a Span.
func convertSpan(sp *tracepb.Span, service string) Span {
	out := Span{
		TraceID:      hexID(sp.GetTraceId()),
		SpanID:       hexID(sp.GetSpanId()),
		ParentSpanID: hexID(sp.GetParentSpanId()),
		Name:         sp.GetName(),
		Service:      service,
		Kind:         spanKind(sp.GetKind()),
		Start:        unixNano(sp.GetStartTimeUnixNano()),
		End:          unixNano(sp.GetEndTimeUnixNano()),
		Attributes:   make(map[string]string, len(sp.GetAttributes())),
	}
	for _, kv := range sp.GetAttributes() {
		out.Attributes[kv.GetKey()] = formatValue(kv.GetValue(), false)
	}
	for _, l := range sp.GetLinks() {
		out.Links = append(out.Links, SpanLink{TraceID: hexID(l.GetTraceId()), SpanID: hexID(l.GetSpanId())})
	}
	for _, ev := range sp.GetEvents() {
		out.Events = append(out.Events, ev.GetName())
	}
	if st := sp.GetStatus(); st != nil {
		out.StatusError = st.GetCode() == tracepb.Status_STATUS_CODE_ERROR
		out.StatusMessage = st.GetMessage()
	}
	return out
}

// hexID formats a trace or span ID; an absent or all-zero ID is empty.
func hexID(b []byte) string {
	for _, x := range b {
		if x != 0 {
			return hex.EncodeToString(b)
		}
	}
	return ""
}

func unixNano(ns uint64) time.Time {
	if ns == 0 {
		return time.Time{}
	}
	return time.Unix(0, int64(ns))
}

func spanKind(k tracepb.Span_SpanKind) string {
	switch k {
	case tracepb.Span_SPAN_KIND_INTERNAL:
		return "internal"
	case tracepb.Span_SPAN_KIND_SERVER:
		return "server"
	case tracepb.Span_SPAN_KIND_CLIENT:
		return "client"
	case tracepb.Span_SPAN_KIND_PRODUCER:
		return "producer"
	case tracepb.Span_SPAN_KIND_CONSUMER:
		return "consumer"
	}
	return ""
}

// formatValue formats an attribute value as text. Inside arrays and maps
// (nested), strings are quoted so that the result reads as JSON.
func formatValue(v *commonpb.AnyValue, nested bool) string {
	switch x := v.GetValue().(type) {
	case *commonpb.AnyValue_StringValue:
		if nested {
			return strconv.Quote(x.StringValue)
		}
		return x.StringValue
	case *commonpb.AnyValue_BoolValue:
		return strconv.FormatBool(x.BoolValue)
	case *commonpb.AnyValue_IntValue:
		return strconv.FormatInt(x.IntValue, 10)
	case *commonpb.AnyValue_DoubleValue:
		return strconv.FormatFloat(x.DoubleValue, 'g', -1, 64)
	case *commonpb.AnyValue_BytesValue:
		s := base64.StdEncoding.EncodeToString(x.BytesValue)
		if nested {
			return strconv.Quote(s)
		}
		return s
	case *commonpb.AnyValue_ArrayValue:
		parts := make([]string, 0, len(x.ArrayValue.GetValues()))
		for _, e := range x.ArrayValue.GetValues() {
			parts = append(parts, formatValue(e, true))
		}
		return "[" + strings.Join(parts, ",") + "]"
	case *commonpb.AnyValue_KvlistValue:
		parts := make([]string, 0, len(x.KvlistValue.GetValues()))
		for _, kv := range x.KvlistValue.GetValues() {
			parts = append(parts, strconv.Quote(kv.GetKey())+":"+formatValue(kv.GetValue(), true))
		}
		return "{" + strings.Join(parts, ",") + "}"
	}
	if nested {
		return "null"
	}
	return ""
}
