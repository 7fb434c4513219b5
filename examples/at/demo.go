package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"time"

	"go.opentelemetry.io/otel/trace"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/examples/internal/otlp"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
)

// runDemo creates an At due after --in and prints each phase change until
// DONE. It is the client half of the demo: the operator runs in its own
// process, as it would in a cluster (`make demo` starts it with
// --install-crds --webhooks --webhook-local), so that its conversion
// webhook keeps answering after the demo returns, when `loom get ats` reads
// the v1beta1 view.
func runDemo(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("at demo", flag.ContinueOnError)
	fs.SetOutput(errOut)
	var conn config.Flags
	conn.Register(fs)
	in := fs.Duration("in", 5*time.Second, "how far ahead to schedule the At")
	command := fs.String("command", `echo "Kubernetes native rocks!"`, "the command the At runs")
	name := fs.String("name", "hello", "the At's name (in the kubeconfig's namespace, or -n)")
	timeout := fs.Duration("timeout", 2*time.Minute, "give up when the At is not DONE after this long")
	traceTo := fs.String("trace-endpoint", "", "trace the At's creation: send OpenTelemetry spans over OTLP/gRPC (plain) to this collector and stamp the At with the trace (run the operator with --trace-endpoint --trace-annotations to follow it there)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	cfg, err := load(conn)
	if err != nil {
		return err
	}
	ctx, cancel := context.WithTimeout(ctx, *timeout)
	defer cancel()
	start := time.Now()
	say := func(format string, args ...any) {
		fmt.Fprintf(out, "[%5.1fs] %s\n", time.Since(start).Seconds(), fmt.Sprintf(format, args...))
	}

	var topts tracing.Options
	if *traceTo != "" {
		tp, err := otlp.Provider(ctx, *traceTo, "at-demo")
		if err != nil {
			return err
		}
		defer otlp.Shutdown(tp)
		topts = tracing.Options{Provider: tp, Annotate: true}
	}
	rc, err := rest.New(cfg, rest.Options{Tracing: topts})
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	// The operator installs the CRD as it starts.
	if err := crd.WaitEstablished(ctx, rc, crd.Options{}, operator.CRDName); err != nil {
		return fmt.Errorf("is the operator running? %w", err)
	}
	say("CRD %s is established (v1alpha1 and v1beta1, converted by the operator's webhook)", operator.CRDName)
	ats, err := client.For[v1alpha1.At](rc, client.Options{Scheme: operator.Scheme(), Mapper: discovery.MapperFor(rc)})
	if err != nil {
		return err
	}
	ats = ats.Namespace(cfg.Namespace)
	if err := waitWebhooks(ctx, ats); err != nil {
		return err
	}
	if err := ats.Delete(ctx, *name, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
		return err
	}
	if err := waitGone(ctx, ats, *name); err != nil {
		return err
	}
	say("webhooks answer (validation, defaulting, conversion; certificates made by the operator)")
	due := time.Now().Add(*in).UTC().Truncate(time.Second)
	at := &v1alpha1.At{
		ObjectMeta: metav1.ObjectMeta{Name: *name},
		Spec:       v1alpha1.AtSpec{Schedule: due.Format(time.RFC3339), Command: *command},
	}
	cctx, span := ctx, trace.Span(nil)
	if topts.Enabled() {
		// One span for the creation; the At carries it to the operator.
		cctx, span = topts.Tracer().Start(ctx, "at demo: create "+*name)
	}
	created, err := ats.Create(cctx, at, metav1.CreateOptions{})
	if span != nil {
		span.End()
	}
	if err != nil {
		return err
	}
	say("created At %s/%s: schedule %s, command %q", cfg.Namespace, *name, at.Spec.Schedule, *command)
	if span != nil {
		say("trace %s", span.SpanContext().TraceID())
	}

	w, err := ats.Watch(ctx, metav1.ListOptions{
		FieldSelector:   fields.OneTermEqualSelector("metadata.name", *name).String(),
		ResourceVersion: created.ResourceVersion,
	})
	if err != nil {
		return err
	}
	defer w.Stop()
	var phase v1alpha1.Phase
	for {
		ev, err := w.Next()
		if err != nil {
			if ctx.Err() != nil {
				return fmt.Errorf("the At is not DONE after %s (phase %q)", *timeout, phase)
			}
			return err
		}
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		if p := ev.Object.Status.Phase; p != phase {
			phase = p
			say("At %s is %s%s", *name, p, podNote(ev.Object))
		}
		if phase == v1alpha1.PhaseDone {
			return nil
		}
	}
}

func podNote(at *v1alpha1.At) string {
	switch at.Status.Phase {
	case v1alpha1.PhaseRunning:
		return " (pod " + at.Status.PodName + ")"
	case v1alpha1.PhaseDone:
		for _, c := range at.Status.Conditions {
			if c.Type == "Succeeded" {
				return fmt.Sprintf(" (Succeeded=%s: %s)", c.Status, c.Message)
			}
		}
	}
	return ""
}

// waitWebhooks waits until the API server calls the operator's webhooks:
// the operator injects their CA bundle as it starts.
func waitWebhooks(ctx context.Context, ats *client.Client[*v1alpha1.At]) error {
	for {
		probe := &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "probe"},
			Spec: v1alpha1.AtSpec{Schedule: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}
		_, err := ats.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil {
			return nil
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("the operator's webhooks never answered (is the operator running with --webhooks?): %w", err)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// waitGone waits until an earlier run's At, deleted just before, is gone
// (its finalizer needs the operator, which is running).
func waitGone(ctx context.Context, ats *client.Client[*v1alpha1.At], name string) error {
	for {
		_, err := ats.Get(ctx, name, metav1.GetOptions{})
		if apierrors.IsNotFound(err) {
			return nil
		}
		if err != nil {
			return err
		}
		select {
		case <-ctx.Done():
			return errors.New("an earlier At " + name + " is still being deleted")
		case <-time.After(200 * time.Millisecond):
		}
	}
}
