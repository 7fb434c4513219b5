package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/clienttest"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/testenv"
)

// TestModify changes objects as a reconciler holds them (as read, here
// standing in for the cache's shared copy) through Modify: the object
// given is never changed; spec and status changes reach the server, each
// through its own path; a concurrent writer's change to another field
// survives; no change makes no request.
func TestModify(t *testing.T) {
	rc := restForEnv(t, testenv.Options{})
	ctx := t.Context()
	deps, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	deps = deps.Namespace("default")
	one := int32(1)
	created, err := deps.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"app": "web"}},
		Spec: appsv1.DeploymentSpec{
			Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
			},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	held := created.DeepCopy() // what the reconciler was given
	pristine := held.DeepCopy()

	// Another writer labels it after the reconciler's read.
	other := created.DeepCopy()
	other.Labels["team"] = "blue"
	if _, err := deps.Update(ctx, other, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}

	three := int32(3)
	out, res, err := controller.Modify(ctx, deps.ReadWriter(), held, func(d *appsv1.Deployment) error {
		d.Spec.Replicas = &three
		d.Status.ObservedGeneration = 7
		return nil
	})
	if err != nil || res != controller.OperationUpdatedStatus {
		t.Fatalf("Modify: %q, %v; want %q", res, err, controller.OperationUpdatedStatus)
	}
	if !equality.Semantic.DeepEqual(held, pristine) {
		t.Error("Modify changed the object it was given")
	}
	stored, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *stored.Spec.Replicas != 3 || stored.Status.ObservedGeneration != 7 || stored.Labels["team"] != "blue" {
		t.Errorf("stored: replicas %d, observedGeneration %d, labels %v; want 3, 7 and the other writer's team=blue",
			*stored.Spec.Replicas, stored.Status.ObservedGeneration, stored.Labels)
	}
	if out.ResourceVersion != stored.ResourceVersion {
		t.Errorf("Modify returned resourceVersion %s, stored is %s", out.ResourceVersion, stored.ResourceVersion)
	}

	// Status alone.
	if _, res, err = controller.Modify(ctx, deps.ReadWriter(), stored, func(d *appsv1.Deployment) error {
		d.Status.ObservedGeneration = 8
		return nil
	}); err != nil || res != controller.OperationUpdatedStatusOnly {
		t.Fatalf("status only: %q, %v", res, err)
	}
	// No change, no request: the resourceVersion stays.
	again, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	same, res, err := controller.Modify(ctx, deps.ReadWriter(), again, func(d *appsv1.Deployment) error { return nil })
	if err != nil || res != controller.OperationUnchanged || same.ResourceVersion != again.ResourceVersion {
		t.Fatalf("no change: %q, %v, resourceVersion %s (was %s)", res, err, same.ResourceVersion, again.ResourceVersion)
	}
	// The key may not change; mutate's error is returned; nothing written.
	if _, _, err := controller.Modify(ctx, deps.ReadWriter(), again, func(d *appsv1.Deployment) error {
		d.Name = "other"
		return nil
	}); !errors.Is(err, controller.ErrKeyChanged) {
		t.Errorf("renaming: %v, want ErrKeyChanged", err)
	}
	boom := errors.New("boom")
	if _, _, err := controller.Modify(ctx, deps.ReadWriter(), again, func(*appsv1.Deployment) error { return boom }); !errors.Is(err, boom) {
		t.Errorf("mutate's error: %v", err)
	}
	if _, _, err := controller.Modify[*appsv1.Deployment](ctx, deps.ReadWriter(), nil, func(*appsv1.Deployment) error { return nil }); err == nil {
		t.Error("a nil object accepted")
	}
}

// BenchmarkModify is what Modify costs beyond the request, against a
// writer that answers at once (clienttest.Recorder): a deep copy, two
// JSON encodings of a Deployment and the merge diff. BenchmarkHandPatch
// is the hand-made alternative: a deep copy and a one-field patch.
func BenchmarkModify(b *testing.B) {
	d := benchDeployment()
	rec := &clienttest.Recorder[*appsv1.Deployment]{}
	five := int32(5)
	b.ReportAllocs()
	for b.Loop() {
		if _, _, err := controller.Modify(context.Background(), rec, d, func(d *appsv1.Deployment) error {
			d.Spec.Replicas = &five
			return nil
		}); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkHandPatch(b *testing.B) {
	d := benchDeployment()
	rec := &clienttest.Recorder[*appsv1.Deployment]{}
	b.ReportAllocs()
	for b.Loop() {
		cp := d.DeepCopy()
		patch, err := json.Marshal(map[string]any{"spec": map[string]any{"replicas": 5}})
		if err != nil {
			b.Fatal(err)
		}
		if _, err := rec.Patch(context.Background(), cp, types.MergePatchType, patch, metav1.PatchOptions{}); err != nil {
			b.Fatal(err)
		}
	}
}

// benchDeployment is a Deployment of a usual size: labels, annotations,
// two containers with env, ports and resources.
func benchDeployment() *appsv1.Deployment {
	one := int32(1)
	c := func(name string) corev1.Container {
		return corev1.Container{Name: name, Image: "registry.example.com/" + name + ":v1.2.3",
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "LOG", Value: "info"}},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
		}
	}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "web", ResourceVersion: "42", Generation: 3,
			Labels:      map[string]string{"app": "web", "tier": "frontend", "team": "blue"},
			Annotations: map[string]string{"deployment.kubernetes.io/revision": "3", "owner": "platform"}},
		Spec: appsv1.DeploymentSpec{Replicas: &one,
			Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{c("web"), c("sidecar")}},
			}},
		Status: appsv1.DeploymentStatus{ObservedGeneration: 3, Replicas: 1, ReadyReplicas: 1},
	}
}
