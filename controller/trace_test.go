package controller_test

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"go.opentelemetry.io/otel/sdk/trace"
	oteltrace "go.opentelemetry.io/otel/trace"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/internal/spantest"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/tracing"
)

// TestTracing follows one change through two controllers against
// kube-apiserver: the test creates a ConfigMap under a span of its own; the
// "cm" controller's reconcile of it creates an owned Secret; the "secret"
// controller reconciles that. With annotations on, all of it is one trace:
// test span → cm's watch add → reconcile cm → (POST secrets, and the
// secret's watch add → reconcile secret).
func TestTracing(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	tp, rec := spantest.New()
	defer tp.Shutdown(context.Background())
	topts := tracing.Options{Provider: tp, Annotate: true}
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()

	// A stamped ConfigMap that exists before the manager starts: its
	// stamp is old news, so its initial add starts a trace of its own.
	rc, err := rest.New(cfg, rest.Options{Tracing: topts})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace("default")
	tracer := tp.Tracer("test")
	octx, old := tracer.Start(ctx, "old change")
	if _, err := cms.Create(octx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "old"}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	old.End()

	mgr, err := manager.New(manager.Options{Config: &cfg, Namespace: "default", Tracing: topts})
	if err != nil {
		t.Fatal(err)
	}
	secrets := manager.CachedClient[corev1.Secret](mgr)
	var failedOnce atomic.Bool
	controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		if cm.Name == "flaky" && !failedOnce.Swap(true) {
			return controller.Result{}, errors.New("first try fails")
		}
		if cm.Name != "new" {
			return controller.Result{}, nil
		}
		sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: cm.Namespace, Name: cm.Name + "-secret"}}
		_, err := controller.CreateOrUpdate(ctx, secrets, sec, func(sec *corev1.Secret) error {
			sec.StringData = map[string]string{"from": cm.Name}
			return controller.SetControllerReference(cm, sec)
		})
		return controller.Result{}, err
	}, controller.Options{Name: "cm"})
	controller.New(mgr, func(ctx context.Context, s *corev1.Secret) (controller.Result, error) {
		return controller.Result{}, nil
	}, controller.Options{Name: "secret"})
	// The same ConfigMaps, with a span for every event.
	controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		return controller.Result{}, nil
	}, controller.Options{Name: "cmspans", Tracing: tracing.Options{Provider: tp, Annotate: true, EventSpans: true}})
	errc := make(chan error, 1)
	go func() { errc <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-errc; err != nil {
			t.Error(err)
		}
	}()

	wait := func(what string, cond func([]trace.ReadOnlySpan) bool) {
		t.Helper()
		wctx, wcancel := context.WithTimeout(ctx, time.Minute)
		defer wcancel()
		if err := rec.WaitFor(wctx, cond); err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
		}
	}
	byKey := func(spans []trace.ReadOnlySpan, name, key string) []trace.ReadOnlySpan {
		var out []trace.ReadOnlySpan
		for _, s := range spantest.Named(spans, name) {
			if spantest.Attr(s, "loom.key") == key || spantest.Attr(s, "k8s.object.name") == key {
				out = append(out, s)
			}
		}
		return out
	}

	t.Run("initial list starts new traces", func(t *testing.T) {
		wait("the reconciles of the old ConfigMap", func(s []trace.ReadOnlySpan) bool {
			return len(byKey(s, "reconcile cm", "default/old")) > 0 && len(byKey(s, "reconcile cmspans", "default/old")) > 0
		})
		spans := rec.Spans()
		// Without event spans: the reconcile starts a trace, and names
		// the event that queued it.
		r := byKey(spans, "reconcile cm", "default/old")[0]
		if r.Parent().IsValid() || r.SpanContext().TraceID() == old.SpanContext().TraceID() {
			t.Errorf("reconcile cm of old: parent %v, trace %v; want a new trace", r.Parent(), r.SpanContext().TraceID())
		}
		if ev, wait := spantest.Attr(r, "loom.event"), spantest.Attr(r, "loom.event.wait_us"); ev != "watch add" || wait == "" || wait[0] == '-' {
			t.Errorf("reconcile cm of old: loom.event %q, loom.event.wait_us %q; want watch add and a wait", ev, wait)
		}
		for _, a := range byKey(spans, "watch add", "old") {
			if spantest.Attr(a, "loom.controller") == "cm" {
				t.Errorf("controller cm made a span for an event without a stamp")
			}
		}
		// With event spans: the event's span is new too, and the reconcile's parent.
		var add trace.ReadOnlySpan
		for _, a := range byKey(spans, "watch add", "old") {
			if spantest.Attr(a, "loom.controller") == "cmspans" {
				add = a
			}
		}
		if add == nil {
			t.Fatal("no watch add span of controller cmspans")
		}
		if add.SpanContext().TraceID() == old.SpanContext().TraceID() || add.Parent().IsValid() {
			t.Errorf("initial add of a stamped object continued its old trace (parent %v)", add.Parent())
		}
		rs := byKey(spans, "reconcile cmspans", "default/old")[0]
		if rs.Parent().SpanID() != add.SpanContext().SpanID() {
			t.Errorf("reconcile's parent = %v, want the watch add span %v", rs.Parent().SpanID(), add.SpanContext().SpanID())
		}
	})

	t.Run("a change flows through two controllers as one trace", func(t *testing.T) {
		rctx, root := tracer.Start(ctx, "test change")
		mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "new"}}
		stored, err := cms.Create(rctx, mine, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		root.End()
		if mine.Annotations != nil {
			t.Errorf("Create stamped the caller's object: %v", mine.Annotations)
		}
		if v, want := stored.Annotations[tracing.Annotation], traceparentOf(root.SpanContext()); v != want {
			t.Errorf("stored stamp %q, want the caller's span %q", v, want)
		}
		tid := root.SpanContext().TraceID()
		inTrace := func(s []trace.ReadOnlySpan) []trace.ReadOnlySpan {
			var out []trace.ReadOnlySpan
			for _, x := range s {
				if x.SpanContext().TraceID() == tid {
					out = append(out, x)
				}
			}
			return out
		}
		// Spans are recorded as they end: the cm reconcile may end after
		// the secret reconcile it led to.
		wait("both reconciles in the test's trace", func(s []trace.ReadOnlySpan) bool {
			in := inTrace(s)
			return len(byKey(in, "reconcile secret", "default/new-secret")) > 0 && len(byKey(in, "reconcile cm", "default/new")) > 0
		})
		spans := inTrace(rec.Spans())
		one := func(name, key string) trace.ReadOnlySpan {
			t.Helper()
			s := byKey(spans, name, key)
			if len(s) == 0 {
				t.Fatalf("no %q span for %s in the trace; have %v", name, key, names(spans))
			}
			return s[0]
		}
		post := spantest.Named(spans, "POST configmaps")
		if len(post) != 1 || post[0].Parent().SpanID() != root.SpanContext().SpanID() {
			t.Fatalf("POST configmaps spans under the test span: %d", len(post))
		}
		cmAdd := one("watch add", "new") // the first: cm's and cmspans' events both continue the stamp
		if c := spantest.Attr(cmAdd, "loom.controller"); c != "cm" {
			for _, a := range byKey(spans, "watch add", "new") {
				if spantest.Attr(a, "loom.controller") == "cm" {
					cmAdd = a
				}
			}
		}
		cmRec := one("reconcile cm", "default/new")
		secPost := spantest.Named(spans, "POST secrets")
		secAdd := one("watch add", "new-secret")
		secRec := one("reconcile secret", "default/new-secret")
		for _, c := range []struct {
			what          string
			child, parent oteltrace.SpanContext
			got           oteltrace.SpanContext
		}{
			{"cm watch add under the test span", cmAdd.SpanContext(), root.SpanContext(), cmAdd.Parent()},
			{"reconcile cm under its event", cmRec.SpanContext(), cmAdd.SpanContext(), cmRec.Parent()},
			{"secret watch add under reconcile cm (the stamp)", secAdd.SpanContext(), cmRec.SpanContext(), secAdd.Parent()},
			{"reconcile secret under its event", secRec.SpanContext(), secAdd.SpanContext(), secRec.Parent()},
		} {
			if c.got.SpanID() != c.parent.SpanID() {
				t.Errorf("%s: parent %v, want %v", c.what, c.got.SpanID(), c.parent.SpanID())
			}
		}
		if len(secPost) != 1 || secPost[0].Parent().SpanID() != cmRec.SpanContext().SpanID() {
			t.Errorf("POST secrets is not a child of reconcile cm")
		}
		if got := spantest.Attr(cmRec, "loom.result"); got != "success" {
			t.Errorf("reconcile cm result = %q", got)
		}
		if cmAdd.SpanKind() != oteltrace.SpanKindConsumer || secPost[0].SpanKind() != oteltrace.SpanKindClient {
			t.Errorf("kinds: event %v, request %v", cmAdd.SpanKind(), secPost[0].SpanKind())
		}
		// The Secret as stored carries the reconcile's trace.
		got, err := mgrSecret(ctx, rc, "new-secret")
		if err != nil {
			t.Fatal(err)
		}
		if v, want := got.Annotations[tracing.Annotation], traceparentOf(cmRec.SpanContext()); v != want {
			t.Errorf("stored stamp %q, want %q", v, want)
		}
	})

	t.Run("a retry links to the reconcile that failed", func(t *testing.T) {
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "flaky"}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		wait("two reconciles of flaky", func(s []trace.ReadOnlySpan) bool {
			return len(byKey(s, "reconcile cm", "default/flaky")) >= 2
		})
		recs := byKey(rec.Spans(), "reconcile cm", "default/flaky")
		first, second := recs[0], recs[1]
		if spantest.Attr(first, "loom.result") != "error" || len(first.Events()) == 0 {
			t.Errorf("first reconcile: result %q, %d events (want error, a recorded error)", spantest.Attr(first, "loom.result"), len(first.Events()))
		}
		linked := false
		for _, l := range second.Links() {
			if l.SpanContext.SpanID() == first.SpanContext().SpanID() {
				linked = true
			}
		}
		if !linked {
			t.Errorf("the retry has no link to the failed reconcile: %v", second.Links())
		}
	})
}

func mgrSecret(ctx context.Context, rc *rest.Client, name string) (*corev1.Secret, error) {
	c, err := client.For[corev1.Secret](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	return c.Namespace("default").Get(ctx, name, metav1.GetOptions{})
}

func traceparentOf(sc oteltrace.SpanContext) string {
	return "00-" + sc.TraceID().String() + "-" + sc.SpanID().String() + "-01"
}

func names(spans []trace.ReadOnlySpan) []string {
	var out []string
	for _, s := range spans {
		out = append(out, s.Name())
	}
	return out
}
