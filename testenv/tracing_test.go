package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"encoding/hex"
	"errors"
	"io"
	"net/http"
	"strings"
	"testing"
	"time"

	"go.opentelemetry.io/otel/attribute"
	"go.opentelemetry.io/otel/codes"
	"go.opentelemetry.io/otel/exporters/otlp/otlptrace/otlptracegrpc"
	"go.opentelemetry.io/otel/sdk/resource"
	sdktrace "go.opentelemetry.io/otel/sdk/trace"
	"go.opentelemetry.io/otel/trace"
	collectortracepb "go.opentelemetry.io/proto/otlp/collector/trace/v1"
	commonpb "go.opentelemetry.io/proto/otlp/common/v1"
	tracepb "go.opentelemetry.io/proto/otlp/trace/v1"
	"go.uber.org/goleak"
)

// randomHex returns n random bytes in hex.
func randomHex(t *testing.T, n int) string {
	t.Helper()
	b := make([]byte, n)
	if _, err := rand.Read(b); err != nil {
		t.Fatal(err)
	}
	return hex.EncodeToString(b)
}

// TestTraceCollectorSDK exports spans from the OpenTelemetry SDK to a
// collector without a cluster and checks how they are converted.
func TestTraceCollectorSDK(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()

	c, err := NewTraceCollector()
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(c.Endpoint(), "127.0.0.1:") {
		t.Fatalf("Endpoint() = %q, want 127.0.0.1:<port>", c.Endpoint())
	}
	exp, err := otlptracegrpc.New(ctx, otlptracegrpc.WithEndpoint(c.Endpoint()), otlptracegrpc.WithInsecure())
	if err != nil {
		t.Fatal(err)
	}
	tp := sdktrace.NewTracerProvider(
		sdktrace.WithSampler(sdktrace.AlwaysSample()),
		sdktrace.WithBatcher(exp),
		sdktrace.WithResource(resource.NewSchemaless(attribute.String("service.name", "unit"))),
	)
	tracer := tp.Tracer("testenv-test")

	linked := trace.NewSpanContext(trace.SpanContextConfig{
		TraceID:    trace.TraceID{0xaa, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 0xbb},
		SpanID:     trace.SpanID{0xcc, 1, 2, 3, 4, 5, 6, 0xdd},
		TraceFlags: trace.FlagsSampled,
	})
	pctx, parent := tracer.Start(ctx, "parent", trace.WithSpanKind(trace.SpanKindServer))
	_, child := tracer.Start(pctx, "child",
		trace.WithSpanKind(trace.SpanKindClient),
		trace.WithLinks(trace.Link{SpanContext: linked}),
		trace.WithAttributes(
			attribute.String("s", "text"),
			attribute.Int("n", 42),
			attribute.Bool("b", true),
			attribute.StringSlice("list", []string{"x", "y"}),
		))
	child.AddEvent("something happened")
	child.SetStatus(codes.Error, "it broke")
	child.End()
	parent.End()
	if err := tp.ForceFlush(ctx); err != nil {
		t.Fatal(err)
	}

	// ForceFlush returns once the collector has answered the export.
	spans := c.Spans()
	if len(spans) != 2 {
		t.Fatalf("got %d spans, want 2: %+v", len(spans), spans)
	}
	byName := map[string]Span{}
	for _, s := range spans {
		byName[s.Name] = s
	}
	p, ch := byName["parent"], byName["child"]
	if p.Name == "" || ch.Name == "" {
		t.Fatalf("want spans named parent and child, got %+v", spans)
	}
	wantTrace := parent.SpanContext().TraceID().String()
	if p.TraceID != wantTrace || ch.TraceID != wantTrace {
		t.Errorf("trace IDs %q, %q; want %q", p.TraceID, ch.TraceID, wantTrace)
	}
	if p.SpanID != parent.SpanContext().SpanID().String() || ch.SpanID != child.SpanContext().SpanID().String() {
		t.Errorf("span IDs %q, %q; want %s, %s", p.SpanID, ch.SpanID, parent.SpanContext().SpanID(), child.SpanContext().SpanID())
	}
	if p.ParentSpanID != "" {
		t.Errorf("parent's ParentSpanID = %q, want empty", p.ParentSpanID)
	}
	if ch.ParentSpanID != p.SpanID {
		t.Errorf("child's ParentSpanID = %q, want %q", ch.ParentSpanID, p.SpanID)
	}
	if p.Kind != "server" || ch.Kind != "client" {
		t.Errorf("kinds %q, %q; want server, client", p.Kind, ch.Kind)
	}
	if p.Service != "unit" || ch.Service != "unit" {
		t.Errorf("services %q, %q; want unit", p.Service, ch.Service)
	}
	wantAttrs := map[string]string{"s": "text", "n": "42", "b": "true", "list": `["x","y"]`}
	for k, v := range wantAttrs {
		if ch.Attributes[k] != v {
			t.Errorf("attribute %s = %q, want %q", k, ch.Attributes[k], v)
		}
	}
	if len(ch.Attributes) != len(wantAttrs) {
		t.Errorf("attributes %v, want %v", ch.Attributes, wantAttrs)
	}
	wantLink := SpanLink{TraceID: "aa0102030405060708090a0b0c0d0ebb", SpanID: "cc010203040506dd"}
	if len(ch.Links) != 1 || ch.Links[0] != wantLink {
		t.Errorf("links %+v, want [%+v]", ch.Links, wantLink)
	}
	if len(ch.Events) != 1 || ch.Events[0] != "something happened" {
		t.Errorf("events %q, want [something happened]", ch.Events)
	}
	if !ch.StatusError || ch.StatusMessage != "it broke" || p.StatusError {
		t.Errorf("status: child %v %q, parent %v; want child error \"it broke\", parent not", ch.StatusError, ch.StatusMessage, p.StatusError)
	}
	if ch.Start.IsZero() || ch.End.Before(ch.Start) || p.Start.After(ch.Start) {
		t.Errorf("times: parent %v-%v, child %v-%v", p.Start, p.End, ch.Start, ch.End)
	}
	if tr := c.Trace(strings.ToUpper(wantTrace)); len(tr) != 2 || tr[0].Name != "parent" || tr[1].Name != "child" {
		t.Errorf("Trace() = %+v, want parent then child", tr)
	}

	if err := tp.Shutdown(ctx); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatal(err)
	}
	if err := c.Close(); err != nil {
		t.Fatalf("second Close: %v", err)
	}
	if len(c.Spans()) != 2 {
		t.Error("spans are gone after Close")
	}
	goleak.VerifyNone(t, leaks)
}

// exportSpans sends one batch to c as an exporter would, with spans named
// names, in one trace, started one second apart in reverse order.
func exportSpans(t *testing.T, c *TraceCollector, traceID []byte, names ...string) {
	t.Helper()
	var spans []*tracepb.Span
	base := uint64(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC).UnixNano())
	for i, n := range names {
		spans = append(spans, &tracepb.Span{
			TraceId:           traceID,
			SpanId:            []byte{0, 0, 0, 0, 0, 0, 0, byte(i + 1)},
			Name:              n,
			StartTimeUnixNano: base + uint64(len(names)-i)*uint64(time.Second),
			Attributes: []*commonpb.KeyValue{
				{Key: "f", Value: &commonpb.AnyValue{Value: &commonpb.AnyValue_DoubleValue{DoubleValue: 1.5}}},
			},
		})
	}
	_, err := traceService{c: c}.Export(t.Context(), &collectortracepb.ExportTraceServiceRequest{
		ResourceSpans: []*tracepb.ResourceSpans{{ScopeSpans: []*tracepb.ScopeSpans{{Spans: spans}}}},
	})
	if err != nil {
		t.Fatal(err)
	}
}

// TestTraceCollectorKeepsLatest checks the limit on kept spans, Trace's
// order, Reset, and that WaitFor wakes on new spans and gives up with its
// context.
func TestTraceCollectorKeepsLatest(t *testing.T) {
	c, err := NewTraceCollector()
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	c.mu.Lock()
	c.limit = 3
	c.mu.Unlock()

	tid := []byte{1: 1, 15: 0xff}
	exportSpans(t, c, tid, "a", "b")
	exportSpans(t, c, tid, "c", "d", "e")
	var names []string
	for _, s := range c.Spans() {
		names = append(names, s.Name)
	}
	if strings.Join(names, ",") != "c,d,e" {
		t.Fatalf("kept %v, want the latest 3: c,d,e", names)
	}
	names = nil
	for _, s := range c.Trace(hex.EncodeToString(tid)) {
		names = append(names, s.Name)
		if s.Attributes["f"] != "1.5" || s.ParentSpanID != "" || s.Kind != "" {
			t.Errorf("span %s: attributes %v, parent %q, kind %q", s.Name, s.Attributes, s.ParentSpanID, s.Kind)
		}
	}
	if strings.Join(names, ",") != "e,d,c" {
		t.Fatalf("Trace() = %v, want e,d,c (by start time)", names)
	}

	// WaitFor returns at once when the condition already holds, and wakes
	// when spans arrive.
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	if err := c.WaitFor(ctx, func(s []Span) bool { return len(s) == 3 }); err != nil {
		t.Fatal(err)
	}
	c.Reset()
	if n := len(c.Spans()); n != 0 {
		t.Fatalf("%d spans after Reset", n)
	}
	calls := make(chan int, 10)
	done := make(chan error, 1)
	go func() {
		done <- c.WaitFor(ctx, func(s []Span) bool {
			calls <- len(s)
			return len(s) > 0 && s[0].Name == "later"
		})
	}()
	if n := <-calls; n != 0 {
		t.Fatalf("first check saw %d spans, want 0", n)
	}
	exportSpans(t, c, tid, "later")
	if err := <-done; err != nil {
		t.Fatal(err)
	}

	// WaitFor gives up when its context ends.
	short, cancelShort := context.WithCancel(t.Context())
	cancelShort()
	err = c.WaitFor(short, func([]Span) bool { return false })
	if !errors.Is(err, context.Canceled) || !strings.Contains(err.Error(), "testenv:") {
		t.Fatalf("WaitFor with a canceled context: %v", err)
	}
}

// TestTracingAPIServer sends requests to a kube-apiserver started with
// Options.Tracing and checks which of them it traces.
func TestTracingAPIServer(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	t.Cleanup(func() { goleak.VerifyNone(t, leaks) }) // runs after the Env stops
	env := New(t, Options{Tracing: true})
	if env.Traces == nil {
		t.Fatal("Env.Traces is nil with Options.Tracing on")
	}
	if shared != nil && shared.Traces != nil {
		t.Error("Env.Traces is set with Options.Tracing off")
	}
	admin, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()

	// get sends a GET with an optional traceparent header.
	get := func(t *testing.T, hc *http.Client, path, traceparent string, want int) {
		t.Helper()
		req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, env.URL+path, nil)
		if err != nil {
			t.Fatal(err)
		}
		if traceparent != "" {
			req.Header.Set("traceparent", traceparent)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		_, _ = io.Copy(io.Discard, resp.Body)
		if resp.StatusCode != want {
			t.Fatalf("GET %s: status %d, want %d", path, resp.StatusCode, want)
		}
	}
	// serverSpan is kube-apiserver's span for a request, the child of the
	// span in its traceparent.
	serverSpan := func(spans []Span, traceID, parentID string) (Span, bool) {
		for _, s := range spans {
			if s.TraceID == traceID && s.ParentSpanID == parentID && s.Kind == "server" {
				return s, true
			}
		}
		return Span{}, false
	}
	// waitSampled sends a sampled request as the admin and waits for
	// kube-apiserver's span of it. Exporters send spans in the order they
	// end, so spans of earlier requests have arrived by then too.
	waitSampled := func(t *testing.T, path string) (traceID, parentID string) {
		t.Helper()
		traceID, parentID = randomHex(t, 16), randomHex(t, 8)
		get(t, admin, path, "00-"+traceID+"-"+parentID+"-01", http.StatusOK)
		ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
		defer cancel()
		err := env.Traces.WaitFor(ctx, func(spans []Span) bool {
			_, ok := serverSpan(spans, traceID, parentID)
			return ok
		})
		if err != nil {
			t.Fatal(err)
		}
		return traceID, parentID
	}
	// mentions reports whether any span has an attribute containing s.
	mentions := func(spans []Span, s string) bool {
		for _, sp := range spans {
			for _, v := range sp.Attributes {
				if strings.Contains(v, s) {
					return true
				}
			}
		}
		return false
	}

	t.Run("sampled", func(t *testing.T) {
		const path = "/api/v1/namespaces/default"
		traceID, parentID := waitSampled(t, path)
		spans := env.Traces.Trace(traceID)
		for _, s := range spans {
			t.Logf("%s %s %q parent=%s attrs=%v", s.Service, s.Kind, s.Name, s.ParentSpanID, s.Attributes)
			if s.Service != "apiserver" {
				t.Errorf("span %q from service %q, want apiserver", s.Name, s.Service)
			}
		}
		var tops []Span
		for _, s := range spans {
			if s.ParentSpanID == parentID {
				tops = append(tops, s)
			}
		}
		if len(tops) != 1 {
			t.Fatalf("%d spans are children of the sent span %s, want 1", len(tops), parentID)
		}
		top := tops[0]
		if spans[0].SpanID != top.SpanID {
			t.Errorf("the first span of the trace is %q, not kube-apiserver's server span %q", spans[0].Name, top.Name)
		}
		if top.Attributes["http.target"] != path {
			t.Errorf("http.target = %q, want %q", top.Attributes["http.target"], path)
		}
		if !strings.HasPrefix(top.Name, "GET ") || top.End.Before(top.Start) || top.StatusError {
			t.Errorf("server span %+v", top)
		}
	})

	t.Run("unsampled", func(t *testing.T) {
		notSampled := randomHex(t, 16)
		flagged := "/api/v1/namespaces/default/configmaps/loom-flags-00-" + randomHex(t, 4)
		bare := "/api/v1/namespaces/default/configmaps/loom-no-traceparent-" + randomHex(t, 4)
		get(t, admin, flagged, "00-"+notSampled+"-"+randomHex(t, 8)+"-00", http.StatusNotFound)
		get(t, admin, bare, "", http.StatusNotFound)
		waitSampled(t, "/api/v1/namespaces/kube-system")
		spans := env.Traces.Spans()
		if tr := env.Traces.Trace(notSampled); len(tr) > 0 {
			t.Errorf("%d spans of the unsampled trace, first %q", len(tr), tr[0].Name)
		}
		for _, p := range []string{flagged, bare} {
			if mentions(spans, p) {
				t.Errorf("a span mentions %s, sent without a sampled traceparent", p)
			}
		}
	})

	t.Run("unprivileged", func(t *testing.T) {
		// A user outside system:masters and system:monitoring: its
		// traceparent is not continued, and with a sampling rate of 0
		// kube-apiserver records nothing.
		certPEM, keyPEM, err := env.UserCert("loom-tracing-user")
		if err != nil {
			t.Fatal(err)
		}
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			t.Fatal(err)
		}
		user := env.httpClient([]tls.Certificate{cert})
		defer user.CloseIdleConnections()
		traceID := randomHex(t, 16)
		path := "/api/v1/namespaces/default/configmaps/loom-unprivileged-" + randomHex(t, 4)
		get(t, user, path, "00-"+traceID+"-"+randomHex(t, 8)+"-01", http.StatusForbidden)
		waitSampled(t, "/api/v1/namespaces/kube-public")
		spans := env.Traces.Spans()
		if tr := env.Traces.Trace(traceID); len(tr) > 0 {
			t.Errorf("%d spans continue an unprivileged caller's trace, first %q", len(tr), tr[0].Name)
		}
		if mentions(spans, path) {
			t.Errorf("a span records the unprivileged request %s", path)
		}
	})
}

// TestTracingStartFailure checks that a Start that fails after the trace
// collector started stops it again.
func TestTracingStartFailure(t *testing.T) {
	leaks := goleak.IgnoreCurrent()
	ctx, cancel := context.WithTimeout(t.Context(), 60*time.Second)
	defer cancel()
	env, err := Start(ctx, Options{Tracing: true, APIServerArgs: []string{"--no-such-flag"}})
	if err == nil {
		_ = env.Stop()
		t.Fatal("Start succeeded with an unknown kube-apiserver flag")
	}
	goleak.VerifyNone(t, leaks)
}
