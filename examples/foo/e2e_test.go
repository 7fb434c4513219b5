package main

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strings"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/foo/operator"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// TestFooEndToEnd installs the example's manifests as a user would (kubectl
// apply -k config), runs the operator as its own service account, and
// checks sample-controller's behaviour: a Foo gets a Deployment whose Pods
// (on a kwok node) become available, kubectl scale moves both, a name that
// is taken is never overwritten but recovered once free, and the garbage
// collector removes the Deployment with its Foo.
func TestFooEndToEnd(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	ctx := t.Context()
	e2e.Kubectl(t, env, "apply", "-k", "config")
	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	if err := crd.WaitEstablished(ctx, rc, crd.Options{}, "foos.samplecontroller.k8s.io"); err != nil {
		t.Fatal(err)
	}

	// Least privilege: the role is enough (the operator runs below with
	// it), and it is no more than the operator needs.
	for _, c := range []struct {
		verb, resource string
		extra          []string
		want           bool
	}{
		{"watch", "foos.samplecontroller.k8s.io", nil, true},
		{"update", "foos.samplecontroller.k8s.io", []string{"--subresource", "status"}, true},
		{"update", "foos.samplecontroller.k8s.io", nil, false},
		{"create", "foos.samplecontroller.k8s.io", nil, false},
		{"delete", "foos.samplecontroller.k8s.io", nil, false},
		{"update", "foos.samplecontroller.k8s.io", []string{"--subresource", "scale"}, false},
		{"create", "deployments.apps", nil, true},
		{"update", "deployments.apps", []string{"-n", "kube-system"}, true},
		{"delete", "deployments.apps", nil, false},
		{"patch", "deployments.apps", nil, false},
		{"list", "pods", nil, false},
		{"list", "secrets", nil, false},
		{"create", "events.events.k8s.io", nil, true},
		{"update", "leases.coordination.k8s.io", []string{"-n", "foo-system"}, true},
		{"update", "leases.coordination.k8s.io", []string{"-n", "default"}, false},
	} {
		if got := e2e.CanI(t, env, "foo-system", "foo-operator", c.verb, c.resource, c.extra...); got != c.want {
			t.Errorf("foo-operator can %s %s %v: %v, want %v", c.verb, c.resource, c.extra, got, c.want)
		}
	}

	sa := e2e.ServiceAccount(t, env, "foo-system", "foo-operator")
	e2e.Run(t, func(ctx context.Context) error {
		return operator.Run(ctx, sa, operator.Options{
			LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "foo-system", Name: "foo-operator"},
			Logger:         testLogger(t),
		})
	})

	foos, err := client.For[v1alpha1.Foo](rc, client.Options{Scheme: v1alpha1.Scheme(), Mapper: discovery.MapperFor(rc)})
	if err != nil {
		t.Fatal(err)
	}
	foos = foos.Namespace("default")
	deps, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deps = deps.Namespace("default")

	// A Foo with one replica gets its Deployment, which becomes available.
	created, err := foos.Create(ctx, &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "example"},
		Spec:       v1alpha1.FooSpec{DeploymentName: "example-nginx", Replicas: new(int32(1))},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	waitFoo(t, foos, deps, "example", "example-nginx", 1)
	dep, err := deps.Get(ctx, "example-nginx", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if ref := metav1.GetControllerOf(dep); ref == nil || ref.UID != created.UID || ref.Kind != "Foo" {
		t.Errorf("deployment's controller %+v, want the Foo", ref)
	}
	if got := dep.Spec.Template.Labels; got["app"] != "nginx" || got["controller"] != "example" {
		t.Errorf("pod labels %v, want app=nginx, controller=example", got)
	}

	// The schema defaults replicas to 1.
	defaulted, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "defaulted"},
		Spec: v1alpha1.FooSpec{DeploymentName: "defaulted"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if defaulted.Spec.Replicas == nil || *defaulted.Spec.Replicas != 1 {
		t.Errorf("replicas defaulted to %v, want 1", defaulted.Spec.Replicas)
	}

	// kubectl scale goes through the scale subresource: the Deployment
	// follows, and so does the Foo's status.
	e2e.Kubectl(t, env, "scale", "foo", "example", "--replicas", "3")
	waitFoo(t, foos, deps, "example", "example-nginx", 3)

	// The scale subresource, read raw by kubectl and through Loom's scale
	// client (resolving the short name), says the same.
	var raw autoscalingv1.Scale
	out := e2e.Kubectl(t, env, "get", "--raw", "/apis/samplecontroller.k8s.io/v1alpha1/namespaces/default/foos/example/scale")
	if err := json.Unmarshal([]byte(out), &raw); err != nil {
		t.Fatalf("scale: %v\n%s", err, out)
	}
	scaler := client.NewScaler(rc, discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}))
	sc, err := scaler.Get(ctx, "fo", "default", "example")
	if err != nil {
		t.Fatal(err)
	}
	for _, s := range []*autoscalingv1.Scale{&raw, sc} {
		if s.Spec.Replicas != 3 || s.Status.Replicas != 3 || s.Status.Selector != "app=nginx,controller=example" {
			t.Errorf("scale %+v %+v, want 3 wanted, 3 available, selector app=nginx,controller=example", s.Spec, s.Status)
		}
	}
	// Scaling through Loom's client works the same way.
	if _, err := scaler.SetReplicas(ctx, "foos.samplecontroller.k8s.io", "default", "example", 2, ""); err != nil {
		t.Fatal(err)
	}
	waitFoo(t, foos, deps, "example", "example-nginx", 2)

	// kubectl shows the printer columns, and finds Foos by category.
	if out := e2e.Kubectl(t, env, "get", "fo", "example"); !fieldsMatch(out, []string{"NAME", "DEPLOYMENT", "DESIRED", "AVAILABLE", "AGE"}, []string{"example", "example-nginx", "2", "2"}) {
		t.Errorf("kubectl get fo example:\n%s", out)
	}
	if out := e2e.Kubectl(t, env, "get", "samples", "-o", "name"); !strings.Contains(out, "foo.samplecontroller.k8s.io/example") {
		t.Errorf("kubectl get samples -o name:\n%s", out)
	}

	// The schema rejects replicas out of 0..100, whatever the way in, a
	// name that is not a DNS name, and a change of the Deployment's name.
	if out, err := e2e.KubectlErr(env, "scale", "foo", "example", "--replicas", "1000"); err == nil || !strings.Contains(out, "spec.replicas") {
		t.Errorf("kubectl scale --replicas 1000: %v\n%s\nwant an error naming spec.replicas", err, out)
	}
	for _, bad := range []v1alpha1.FooSpec{
		{DeploymentName: "too-big", Replicas: new(int32(1000))},
		{DeploymentName: "negative", Replicas: new(int32(-1))},
		{DeploymentName: "Not_A_Name"},
	} {
		_, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "bad"}, Spec: bad}, metav1.CreateOptions{})
		field := "spec.replicas"
		if bad.Replicas == nil {
			field = "spec.deploymentName"
		}
		if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), field) {
			t.Errorf("create with %+v: %v, want Invalid naming %s", bad, err, field)
		}
	}
	_, err = foos.Mutate(ctx, "example", func(f *v1alpha1.Foo) error { f.Spec.DeploymentName = "renamed"; return nil })
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), "immutable") {
		t.Errorf("renaming the deployment: %v, want Invalid: immutable", err)
	}
	if sc, err := scaler.Get(ctx, "fo", "default", "example"); err != nil || sc.Spec.Replicas != 2 {
		t.Errorf("after the rejected changes: scale %+v, %v; want 2 replicas", sc, err)
	}

	// A name taken by a Deployment that is not the Foo's: the Deployment
	// is left alone, the Foo says why it is not ready.
	taken, err := deps.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "taken", Labels: map[string]string{"app": "other"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(1)),
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "other"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "other"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "other", Image: "busybox:1.37"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := foos.Create(ctx, &v1alpha1.Foo{ObjectMeta: metav1.ObjectMeta{Name: "thief"},
		Spec: v1alpha1.FooSpec{DeploymentName: "taken", Replicas: new(int32(2))}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the Foo thief to report the name conflict", func() (bool, string) {
		foo, err := foos.Get(ctx, "thief", metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := controller.FindStatusCondition(foo.Status.Conditions, operator.ConditionReady)
		return c != nil && c.Status == metav1.ConditionFalse && c.Reason == operator.ReasonConflict, fmt.Sprintf("%+v", c)
	})
	evs, err := client.For[eventsv1.Event](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the Foo example's events", func() (bool, string) {
		l, err := evs.Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=example,regarding.kind=Foo"})
		if err != nil {
			return false, err.Error()
		}
		var notes []string
		for _, e := range l.Items {
			notes = append(notes, e.Reason+": "+e.Note)
		}
		return slices.Contains(notes, "DeploymentCreated: created deployment example-nginx with 1 replicas") &&
			slices.Contains(notes, "DeploymentScaled: scaled deployment example-nginx from 1 to 3 replicas") &&
			slices.Contains(notes, "DeploymentScaled: scaled deployment example-nginx from 3 to 2 replicas"), strings.Join(notes, "; ")
	})
	e2e.Eventually(t, "a Warning event ErrResourceExists on the Foo thief", func() (bool, string) {
		l, err := evs.Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=thief,regarding.kind=Foo"})
		if err != nil {
			return false, err.Error()
		}
		var seen []string
		for _, e := range l.Items {
			if e.Type == corev1.EventTypeWarning && e.Reason == operator.ReasonResourceExists && strings.Contains(e.Note, "taken") {
				return true, ""
			}
			seen = append(seen, e.Type+" "+e.Reason+": "+e.Note)
		}
		return false, strings.Join(seen, "; ")
	})
	now, err := deps.Get(ctx, "taken", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if now.Generation != taken.Generation || len(now.OwnerReferences) != 0 || *now.Spec.Replicas != 1 || now.Labels["app"] != "other" {
		t.Errorf("the other Deployment was changed: generation %d → %d, owners %v, replicas %d, labels %v",
			taken.Generation, now.Generation, now.OwnerReferences, *now.Spec.Replicas, now.Labels)
	}

	// Once the other Deployment goes, the Foo makes its own.
	if err := deps.Delete(ctx, "taken", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitFoo(t, foos, deps, "thief", "taken", 2)

	// Deleting a Foo deletes its Deployment (the garbage collector follows
	// the owner reference).
	if err := foos.Delete(ctx, "example", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	e2e.Eventually(t, "the Deployment example-nginx to be gone with its Foo", func() (bool, string) {
		_, err := deps.Get(ctx, "example-nginx", metav1.GetOptions{})
		return apierrors.IsNotFound(err), errString(err)
	})
}

// waitFoo waits until the Foo name has a Deployment depName that it
// controls, with the given replicas, all available, and says so in its
// status.
func waitFoo(t *testing.T, foos *client.Client[*v1alpha1.Foo], deps *client.Client[*appsv1.Deployment], name, depName string, replicas int32) {
	t.Helper()
	ctx := t.Context()
	e2e.Eventually(t, fmt.Sprintf("Foo %s with %d available replicas", name, replicas), func() (bool, string) {
		foo, err := foos.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		dep, err := deps.Get(ctx, depName, metav1.GetOptions{})
		if err != nil {
			return false, err.Error()
		}
		c := controller.FindStatusCondition(foo.Status.Conditions, operator.ConditionReady)
		state := fmt.Sprintf("deployment replicas %v, available %d, controlled by the Foo: %v; Foo available %d, Ready %+v",
			dep.Spec.Replicas, dep.Status.AvailableReplicas, controller.IsControlledBy(dep, foo), foo.Status.AvailableReplicas, c)
		return controller.IsControlledBy(dep, foo) && dep.Spec.Replicas != nil && *dep.Spec.Replicas == replicas &&
			dep.Status.AvailableReplicas == replicas && foo.Status.AvailableReplicas == replicas &&
			c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == foo.Generation, state
	})
}

// fieldsMatch reports whether a kubectl table has the header and a row
// that begin with the given cells.
func fieldsMatch(out string, header, row []string) bool {
	lines := strings.Split(strings.TrimSpace(out), "\n")
	if len(lines) != 2 {
		return false
	}
	begins := func(line string, want []string) bool {
		f := strings.Fields(line)
		if len(f) < len(want) {
			return false
		}
		for i := range want {
			if f[i] != want[i] {
				return false
			}
		}
		return true
	}
	return begins(lines[0], header) && begins(lines[1], row)
}

func errString(err error) string {
	if err == nil {
		return "exists"
	}
	return err.Error()
}
