package main

import (
	"bytes"
	"context"
	"flag"
	"io"
	"os"
	"regexp"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/tracesvg"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

var tracePicture = flag.String("trace-picture", "", "write the demo's trace as an SVG timeline to this file (docs/at-trace.svg is made so)")

// TestDemoTrace runs the At operator and `at demo` with tracing on, as
// separate services, against a kube-apiserver whose tracing is on: the
// At's creation must be one trace through all three, from the demo's span
// through kube-apiserver and the operator's admission webhooks to the
// operator's watch event, reconcile and its own API requests.
func TestDemoTrace(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1, Tracing: true})
	ep := env.Traces.Endpoint()
	var oplog syncBuffer
	e2e.Run(t, func(ctx context.Context) error {
		return run(ctx, []string{"--kubeconfig", env.KubeconfigPath, "--install-crds", "--webhooks", "--webhook-local",
			"--webhook-addr", "127.0.0.1:0", "--cert-dir", t.TempDir(), "--trace-endpoint", ep, "--trace-annotations"}, io.Discard, &oplog)
	})
	var out bytes.Buffer
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	if err := run(ctx, []string{"demo", "--kubeconfig", env.KubeconfigPath, "--in", "3s", "--trace-endpoint", ep}, &out, io.Discard); err != nil {
		t.Fatalf("at demo: %v\n%s\noperator:\n%s", err, out.String(), oplog.String())
	}
	m := regexp.MustCompile(`trace ([0-9a-f]{32})`).FindStringSubmatch(out.String())
	if m == nil {
		t.Fatalf("at demo printed no trace ID:\n%s", out.String())
	}
	id := m[1]

	var spans []testenv.Span
	var missing string
	err := env.Traces.WaitFor(ctx, func([]testenv.Span) bool {
		spans = env.Traces.Trace(id)
		missing = checkDemoTrace(spans)
		return missing == ""
	})
	if err != nil {
		for _, s := range spans {
			t.Logf("%-12s %s parent %-16s %s", s.Service, s.SpanID, s.ParentSpanID, s.Name)
		}
		t.Fatalf("the demo's trace is incomplete: %s: %v", missing, err)
	}
	t.Logf("trace %s: %d spans from %d services", id, len(spans), len(services(spans)))

	if *tracePicture != "" {
		var draw []tracesvg.Span
		for _, s := range spans {
			note := s.Attributes["http.response.status_code"]
			if r := s.Attributes["loom.result"]; r != "" {
				note = r
			}
			draw = append(draw, tracesvg.Span{ID: s.SpanID, Parent: s.ParentSpanID, Name: s.Name, Service: s.Service, Start: s.Start, End: s.End, Note: note})
		}
		f, err := os.Create(*tracePicture)
		if err != nil {
			t.Fatal(err)
		}
		defer f.Close()
		if err := tracesvg.Render(f, draw, tracesvg.Options{Title: "at demo: creating an At, traced through at-demo, kube-apiserver and at-operator (TestDemoTrace)"}); err != nil {
			t.Fatal(err)
		}
	}
}

// checkDemoTrace returns what the demo's trace lacks, or "".
func checkDemoTrace(spans []testenv.Span) string {
	byID := map[string]testenv.Span{}
	var root, post testenv.Span
	for _, s := range spans {
		byID[s.SpanID] = s
		switch {
		case s.Service == "at-demo" && strings.HasPrefix(s.Name, "at demo: create"):
			root = s
		case s.Service == "at-demo" && s.Name == "POST ats":
			post = s
		}
	}
	if root.SpanID == "" || post.ParentSpanID != root.SpanID {
		return "no demo span with its POST ats under it"
	}
	has := func(cond func(s testenv.Span) bool) bool {
		for _, s := range spans {
			if cond(s) {
				return true
			}
		}
		return false
	}
	under := func(s testenv.Span, ancestor string) bool {
		for i := 0; i < 100 && s.ParentSpanID != ""; i++ {
			if s.ParentSpanID == ancestor {
				return true
			}
			s = byID[s.ParentSpanID]
		}
		return false
	}
	for _, path := range []string{"/default-at", "/validate-at"} {
		if !has(func(s testenv.Span) bool {
			return s.Service == "at-operator" && s.Name == "webhook "+path && under(s, post.SpanID) && byID[s.ParentSpanID].Service == "apiserver"
		}) {
			return "no " + path + " webhook span called by kube-apiserver under the POST"
		}
	}
	var add testenv.Span
	for _, s := range spans {
		if s.Service == "at-operator" && s.Name == "watch add" && s.ParentSpanID == root.SpanID {
			add = s
		}
	}
	if add.SpanID == "" {
		return "no operator watch add continuing the demo's span (the stamp)"
	}
	var rec testenv.Span
	for _, s := range spans {
		if s.Name == "reconcile at" && s.ParentSpanID == add.SpanID {
			rec = s
		}
	}
	if rec.SpanID == "" {
		return "no reconcile under the watch add"
	}
	if !has(func(s testenv.Span) bool {
		return s.Service == "at-operator" && s.Attributes["http.request.method"] == "PUT" && s.ParentSpanID == rec.SpanID
	}) {
		return "no PUT of the reconcile"
	}
	if !has(func(s testenv.Span) bool { return s.Service == "apiserver" && under(s, rec.SpanID) }) {
		return "no kube-apiserver span under the reconcile"
	}
	return ""
}

func services(spans []testenv.Span) map[string]bool {
	m := map[string]bool{}
	for _, s := range spans {
		m[s.Service] = true
	}
	return m
}

// syncBuffer is a bytes.Buffer safe for a writer and a reader.
type syncBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (s *syncBuffer) Write(p []byte) (int, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.Write(p)
}

func (s *syncBuffer) String() string {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.b.String()
}
