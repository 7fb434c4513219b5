package main

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	fooconfig "github.com/loom-k8s/loom/examples/foo/config"
	"github.com/loom-k8s/loom/examples/foo/operator"
	"github.com/loom-k8s/loom/examples/internal/otlp"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
	"github.com/loom-k8s/loom/tracing"
	"github.com/loom-k8s/loom/webhook"
)

// TestFooTrace runs the Foo operator with tracing on against a
// kube-apiserver whose own tracing exports to testenv's collector, with a
// Loom validating webhook on Deployments (another traced process in
// spirit: its own service name). The reconcile that creates a Foo's
// Deployment must be one trace: the reconcile span (naming the watch event
// that queued it), its POST deployments client span, kube-apiserver's
// spans as that span's children, and kube-apiserver's call to the webhook
// with the webhook's server span.
//
// The operator runs as the admin here: kube-apiserver continues a
// caller's trace only for system:masters and system:monitoring (for
// others it starts a new trace that links to it).
func TestFooTrace(t *testing.T) {
	env := testenv.New(t, testenv.Options{Tracing: true})
	ctx := t.Context()
	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	crds, err := crd.Read(fooconfig.CRDs, "crd/*.yaml")
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, rc, crds, crd.Options{FieldManager: "test"}); err != nil {
		t.Fatal(err)
	}

	// The webhook: a validating webhook on Deployments that refuses the
	// name "forbidden", served by a manager of its own.
	whTP, err := otlp.Provider(ctx, env.Traces.Endpoint(), "deployment-guard")
	if err != nil {
		t.Fatal(err)
	}
	defer otlp.Shutdown(whTP)
	vcs, err := client.For[admissionregistrationv1.ValidatingWebhookConfiguration](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	fail := admissionregistrationv1.Fail
	none := admissionregistrationv1.SideEffectClassNone
	path := "/validate-deployment"
	if _, err := vcs.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "deployment-guard"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name:                    "deployments.guard.loom.test",
			ClientConfig:            admissionregistrationv1.WebhookClientConfig{URL: new("https://127.0.0.1:1" + path)},
			Rules:                   []admissionregistrationv1.RuleWithOperations{{Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update}, Rule: admissionregistrationv1.Rule{APIGroups: []string{"apps"}, APIVersions: []string{"v1"}, Resources: []string{"deployments"}}}},
			FailurePolicy:           &fail,
			SideEffects:             &none,
			AdmissionReviewVersions: []string{"v1"},
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	whm, err := manager.New(manager.Options{Config: &admin, Tracing: tracing.Options{Provider: whTP}})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := whm.Webhooks(t.Context(), manager.WebhookOptions{Addr: "127.0.0.1:0", LocalURL: true, ValidatingConfigs: []string{"deployment-guard"}, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	srv.Register(path, webhook.ValidatorFor[appsv1.Deployment](guard{}))
	e2e.Run(t, whm.Start)
	deps, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deps = deps.Namespace("default")
	e2e.Eventually(t, "the webhook to deny a Deployment named forbidden", func() (bool, string) {
		_, err := deps.Create(ctx, &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "forbidden"},
			Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"a": "b"}},
				Template: podTemplate()}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		return err != nil && strings.Contains(err.Error(), "forbidden by the guard"), errString(err)
	})

	// The operator, traced.
	opTP, err := otlp.Provider(ctx, env.Traces.Endpoint(), "foo-operator")
	if err != nil {
		t.Fatal(err)
	}
	defer otlp.Shutdown(opTP)
	e2e.Run(t, func(ctx context.Context) error {
		return operator.Run(ctx, admin, operator.Options{Namespace: "default", Tracing: tracing.Options{Provider: opTP, Annotate: true}})
	})
	foos, err := client.For[v1alpha1.Foo](rc, client.Options{Scheme: v1alpha1.Scheme(), Mapper: discovery.MapperFor(rc)})
	if err != nil {
		t.Fatal(err)
	}
	foos = foos.Namespace("default")
	if _, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "traced"},
		Spec: v1alpha1.FooSpec{DeploymentName: "traced-nginx", Replicas: new(int32(1))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	// Find the POST deployments of the reconcile, then wait for the whole
	// trace around it.
	var post testenv.Span
	wctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	err = env.Traces.WaitFor(wctx, func(spans []testenv.Span) bool {
		for _, s := range spans {
			if s.Service == "foo-operator" && s.Name == "POST deployments" && s.Attributes["http.response.status_code"] == "201" {
				post = s
				return true
			}
		}
		return false
	})
	if err != nil {
		t.Fatal(err)
	}
	var trace []testenv.Span
	var missing string
	err = env.Traces.WaitFor(wctx, func([]testenv.Span) bool {
		trace = env.Traces.Trace(post.TraceID)
		missing = checkFooTrace(trace, post)
		return missing == ""
	})
	if err != nil {
		for _, s := range trace {
			t.Logf("%s %s/%s parent %s: %s %v", s.Service, s.TraceID[:8], s.SpanID, s.ParentSpanID, s.Name, s.Attributes)
		}
		t.Fatalf("the reconcile's trace is incomplete: %s: %v", missing, err)
	}
	// The Deployment carries the reconcile's trace for the next controller.
	dep, err := deps.Get(ctx, "traced-nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if sc, ok := tracing.Stamped(dep); !ok || sc.TraceID().String() != post.TraceID || sc.SpanID().String() != post.ParentSpanID {
		t.Errorf("the Deployment's stamp %q does not name the reconcile %s/%s", dep.Annotations[tracing.Annotation], post.TraceID, post.ParentSpanID)
	}
}

// checkFooTrace returns what the trace of post (the reconcile's POST
// deployments) lacks, or "".
func checkFooTrace(trace []testenv.Span, post testenv.Span) string {
	byID := map[string]testenv.Span{}
	for _, s := range trace {
		byID[s.SpanID] = s
	}
	rec, ok := byID[post.ParentSpanID]
	if !ok || rec.Name != "reconcile foo" || rec.Service != "foo-operator" {
		return "the POST's parent is not the reconcile span"
	}
	if rec.Attributes["loom.key"] != "default/traced" {
		return "the reconcile span's key is " + rec.Attributes["loom.key"]
	}
	// The Foo was created without a stamp: the watch event that queued
	// it has no span, and the reconcile starts the trace, naming it.
	if rec.ParentSpanID != "" || rec.Attributes["loom.event"] != "watch add" {
		return "the reconcile is not a root span naming its watch add"
	}
	var server *testenv.Span
	for i, s := range trace {
		if s.Service == "apiserver" && s.ParentSpanID == post.SpanID {
			server = &trace[i]
		}
	}
	if server == nil {
		return "no kube-apiserver span is a child of the POST"
	}
	// kube-apiserver's call to the webhook, and the webhook's span under it.
	for _, call := range trace {
		if call.Service != "apiserver" || !strings.Contains(call.Name, "webhook") || !descends(byID, call, server.SpanID) {
			continue
		}
		for _, s := range trace {
			if s.Service == "deployment-guard" && s.Name == "webhook /validate-deployment" && descends(byID, s, call.SpanID) &&
				s.Attributes["k8s.admission.operation"] == "CREATE" && s.Attributes["k8s.object.name"] == "traced-nginx" {
				return ""
			}
		}
	}
	return "no webhook server span under kube-apiserver's webhook call"
}

// descends reports whether s is a (grand)child of the span ancestor.
func descends(byID map[string]testenv.Span, s testenv.Span, ancestor string) bool {
	for i := 0; i < 100 && s.ParentSpanID != ""; i++ {
		if s.ParentSpanID == ancestor {
			return true
		}
		p, ok := byID[s.ParentSpanID]
		if !ok {
			return false
		}
		s = p
	}
	return false
}

// guard refuses Deployments named "forbidden".
type guard struct{}

func (guard) ValidateCreate(_ context.Context, d *appsv1.Deployment) (webhook.Warnings, error) {
	if d.Name == "forbidden" {
		return nil, errors.New("forbidden by the guard")
	}
	return nil, nil
}

func (g guard) ValidateUpdate(ctx context.Context, _, d *appsv1.Deployment) (webhook.Warnings, error) {
	return g.ValidateCreate(ctx, d)
}

func (guard) ValidateDelete(context.Context, *appsv1.Deployment) (webhook.Warnings, error) {
	return nil, nil
}

func podTemplate() corev1.PodTemplateSpec {
	return corev1.PodTemplateSpec{
		ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"a": "b"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox:1.37"}}},
	}
}
