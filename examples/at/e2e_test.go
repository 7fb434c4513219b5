package main

import (
	"context"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// TestAtEndToEnd installs the example's manifests as a user would (kubectl
// apply -k config), runs the operator as its own service account, and
// follows an At from PENDING through RUNNING (a Pod on a kwok node) to
// DONE (kwok completes the Pod).
func TestAtEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	ctx := t.Context()
	_, rc := install(t, env)

	// Least privilege: the role is enough (the operator runs below with
	// it), and it is no more than the operator needs.
	for _, c := range []struct {
		verb, resource string
		extra          []string
		want           bool
	}{
		{"create", "pods", nil, true},
		{"watch", "ats.cnat.programming-kubernetes.info", nil, true},
		{"delete", "ats.cnat.programming-kubernetes.info", nil, false},
		{"update", "pods", nil, false},
		{"list", "secrets", nil, false},
		{"create", "deployments.apps", nil, false},
		{"update", "leases.coordination.k8s.io", []string{"-n", "at-system"}, true},
		{"update", "leases.coordination.k8s.io", []string{"-n", "default"}, false},
		{"update", "customresourcedefinitions.apiextensions.k8s.io/ats.cnat.programming-kubernetes.info", nil, true},
		{"update", "customresourcedefinitions.apiextensions.k8s.io/foos.example.com", nil, false},
		{"update", "validatingwebhookconfigurations.admissionregistration.k8s.io/at-validating-webhook-configuration", nil, true},
		{"update", "validatingwebhookconfigurations.admissionregistration.k8s.io/other", nil, false},
		{"list", "validatingwebhookconfigurations.admissionregistration.k8s.io", nil, false},
	} {
		if got := e2e.CanI(t, env, "at-system", "at-operator", c.verb, c.resource, c.extra...); got != c.want {
			t.Errorf("at-operator can %s %s %v: %v, want %v", c.verb, c.resource, c.extra, got, c.want)
		}
	}

	sa := e2e.ServiceAccount(t, env, "at-system", "at-operator")
	e2e.Run(t, func(ctx context.Context) error {
		return operator.Run(ctx, sa, operator.Options{
			LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "at-system", Name: "at-operator"},
			Webhooks:       &operator.WebhookOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir(), LocalURL: true},
			Logger:         testLogger(t),
		})
	})

	ats, err := client.For[v1alpha1.At](rc, client.Options{Scheme: operator.Scheme(), Mapper: discovery.MapperFor(rc)})
	if err != nil {
		t.Fatal(err)
	}
	ats = ats.Namespace("default")
	if err := waitWebhooks(ctx, ats); err != nil {
		t.Fatal(err)
	}
	due := time.Now().Add(3 * time.Second).UTC().Format(time.RFC3339)
	created, err := ats.Create(ctx, &v1alpha1.At{
		ObjectMeta: metav1.ObjectMeta{Name: "hello"},
		Spec:       v1alpha1.AtSpec{Schedule: due, Command: "echo hello"},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.Spec.Image != "busybox:1.37" {
		t.Errorf("image defaulted to %q by the CRD schema, want busybox:1.37", created.Spec.Image)
	}

	// Every phase is seen, in order.
	phases := watchPhases(t, ats, created.ResourceVersion, "hello")
	if want := []v1alpha1.Phase{v1alpha1.PhasePending, v1alpha1.PhaseRunning, v1alpha1.PhaseDone}; !equal(phases, want) {
		t.Fatalf("phases %v, want %v", phases, want)
	}
	done, err := ats.Get(ctx, "hello", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c := meta(done.Status.Conditions, "Succeeded"); c == nil || c.Status != metav1.ConditionTrue || c.ObservedGeneration != done.Generation {
		t.Errorf("Succeeded condition %+v, want True for generation %d", c, done.Generation)
	}
	if !hasString(done.Finalizers, operator.Finalizer) {
		t.Errorf("finalizers %v, want %s", done.Finalizers, operator.Finalizer)
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	pod, err := pods.Namespace("default").Get(ctx, "hello-pod", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(pod); ref == nil || ref.UID != done.UID || ref.Kind != "At" {
		t.Errorf("pod's controller %+v, want the At", ref)
	}
	if pod.Status.Phase != corev1.PodSucceeded || pod.Spec.NodeName == "" {
		t.Errorf("pod phase %s on node %q, want Succeeded on a kwok node", pod.Status.Phase, pod.Spec.NodeName)
	}
	if got := strings.Join(pod.Spec.Containers[0].Command, " "); got != "sh -c echo hello" {
		t.Errorf("pod command %q", got)
	}

	// The operator told the story in events.
	evs, err := client.For[eventsv1.Event](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the At's events", func() (bool, string) {
		l, err := evs.Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=hello,regarding.kind=At"})
		if err != nil {
			return false, err.Error()
		}
		var reasons []string
		for _, e := range l.Items {
			reasons = append(reasons, e.Reason)
		}
		return hasString(reasons, "Pending") && hasString(reasons, "Running") && hasString(reasons, "Done"), strings.Join(reasons, ",")
	})

	// The schema rejects a schedule that is not RFC 3339.
	_, err = ats.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "bad"},
		Spec: v1alpha1.AtSpec{Schedule: "tomorrow", Command: "true"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "spec.schedule") {
		t.Errorf("create with schedule %q: %v, want Invalid naming spec.schedule", "tomorrow", err)
	}

	// The finalizer: deleting the At even with orphan propagation, which
	// the garbage collector would leave the Pod to, removes the Pod.
	orphan := metav1.DeletePropagationOrphan
	if err := ats.Delete(ctx, "hello", metav1.DeleteOptions{PropagationPolicy: &orphan}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the At and its Pod to be gone", func() (bool, string) {
		_, errAt := ats.Get(ctx, "hello", metav1.GetOptions{})
		_, errPod := pods.Namespace("default").Get(ctx, "hello-pod", metav1.GetOptions{})
		return apierrors.IsNotFound(errAt) && apierrors.IsNotFound(errPod), "at: " + errString(errAt) + ", pod: " + errString(errPod)
	})

	// The operator's webhooks: a schedule in the past is refused, a
	// missing command is filled in.
	_, err = ats.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "past"},
		Spec: v1alpha1.AtSpec{Schedule: "2020-01-01T00:00:00Z", Command: "true"}}, metav1.CreateOptions{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "is in the past") {
		t.Errorf("create with a past schedule: %v, want the validating webhook's refusal", err)
	}
	// An At far in the future stays PENDING, with no Pod, and deletes
	// cleanly.
	later, err := ats.Create(ctx, &v1alpha1.At{ObjectMeta: metav1.ObjectMeta{Name: "later"},
		Spec: v1alpha1.AtSpec{Schedule: time.Now().Add(time.Hour).UTC().Format(time.RFC3339)}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if later.Spec.Command != operator.DefaultCommand {
		t.Errorf("command %q, want the defaulting webhook's %q", later.Spec.Command, operator.DefaultCommand)
	}
	e2e.Eventually(t, "the later At to be PENDING", func() (bool, string) {
		at, err := ats.Get(ctx, "later", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		return at.Status.Phase == v1alpha1.PhasePending, string(at.Status.Phase)
	})
	if _, err := pods.Namespace("default").Get(ctx, "later-pod", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Errorf("pod of an At due in an hour: %v, want NotFound", err)
	}
	if err := ats.Delete(ctx, "later", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the later At to be gone", func() (bool, string) {
		_, err := ats.Get(ctx, "later", metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// watchPhases returns the phases an At goes through, from rv until DONE.
func watchPhases(t *testing.T, ats *client.Client[*v1alpha1.At], rv, name string) []v1alpha1.Phase {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	w, err := ats.Watch(ctx, metav1.ListOptions{ResourceVersion: rv, FieldSelector: fields.OneTermEqualSelector("metadata.name", name).String()})
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	var phases []v1alpha1.Phase
	for {
		ev, err := w.Next()
		if err != nil {
			t.Fatalf("watch ended (%v) after phases %v", err, phases)
		}
		if ev.Type != watch.Added && ev.Type != watch.Modified {
			continue
		}
		p := ev.Object.Status.Phase
		if p != "" && (len(phases) == 0 || phases[len(phases)-1] != p) {
			phases = append(phases, p)
		}
		if p == v1alpha1.PhaseDone {
			return phases
		}
	}
}

func meta(conds []metav1.Condition, typ string) *metav1.Condition {
	for i := range conds {
		if conds[i].Type == typ {
			return &conds[i]
		}
	}
	return nil
}

func hasString(list []string, s string) bool {
	for _, x := range list {
		if x == s {
			return true
		}
	}
	return false
}

func equal[T comparable](a, b []T) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func errString(err error) string {
	if err == nil {
		return "exists"
	}
	return err.Error()
}
