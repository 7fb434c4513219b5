package client_test

import (
	"encoding/json"
	"errors"
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/fake"
	"github.com/loom-k8s/loom/rest"
)

// ownedFields returns the FieldsV1 of manager's Apply entry for
// subresource ("" for the main resource), decoded, or nil when there is
// none.
func ownedFields(t *testing.T, obj metav1.Object, manager, subresource string) map[string]any {
	t.Helper()
	for _, e := range obj.GetManagedFields() {
		if e.Manager != manager || e.Operation != metav1.ManagedFieldsOperationApply || e.Subresource != subresource || e.FieldsV1 == nil {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal(e.FieldsV1.Raw, &m); err != nil {
			t.Fatal(err)
		}
		return m
	}
	return nil
}

// owns reports whether fields holds the path of field names, such as
// "f:spec", "f:replicas".
func owns(fields map[string]any, path ...string) bool {
	for i, p := range path {
		next, ok := fields[p]
		if !ok {
			return false
		}
		if i == len(path)-1 {
			return true
		}
		if fields, ok = next.(map[string]any); !ok {
			return false
		}
	}
	return len(path) == 0
}

func keys(m map[string]any) []string {
	out := make([]string, 0, len(m))
	for k := range m {
		out = append(out, k)
	}
	slices.Sort(out)
	return out
}

// webDeployment is the desired state a reconciler would apply: only the
// fields it means to own.
func webDeployment(ns string, replicas *int32) *appsv1.Deployment {
	labels := map[string]string{"app": "web"}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Replicas: replicas,
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{
					NodeName:   "nobody", // no scheduler or kubelet changes the Pods
					Containers: []corev1.Container{{Name: "web", Image: "nginx"}},
				},
			},
		},
	}
}

// TestApplyOwnsWhatIsSet applies typed Deployments against the API
// server: the field manager owns the fields the object sets and no
// others, a zero set through a pointer is owned, two managers conflict
// until one forces, and ApplyStatus owns only status.
func TestApplyOwnsWhatIsSet(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	applyOwnsWhatIsSet(t, rc, namespace(t, rc), true)
}

// TestApplyOwnsWhatIsSetOnFake is the same scenario on client/fake, which
// applies with the API server's own libraries.
func TestApplyOwnsWhatIsSetOnFake(t *testing.T) {
	srv, err := fake.New(fake.Options{})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := srv.REST(rest.Options{ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	applyOwnsWhatIsSet(t, rc, "default", false)
}

// applyOwnsWhatIsSet runs the scenario in namespace ns. defaults says
// whether the server defaults built-in kinds (the fake does not, a
// documented difference), so that an unset replicas reads back as 1.
func applyOwnsWhatIsSet(t *testing.T, rc *rest.Client, ns string, defaults bool) {
	ctx := t.Context()
	teamA, err := client.For[appsv1.Deployment](rc, client.Options{FieldOwner: "team-a"})
	if err != nil {
		t.Fatal(err)
	}
	teamB, err := client.For[appsv1.Deployment](rc, client.Options{FieldOwner: "team-b"})
	if err != nil {
		t.Fatal(err)
	}

	// Replicas unset: not owned (the server defaults it to 1).
	got, err := teamA.Apply(ctx, webDeployment(ns, nil), client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fields := ownedFields(t, got, "team-a", "")
	if fields == nil {
		t.Fatalf("no Apply entry for team-a in %+v", got.ManagedFields)
	}
	if owns(fields, "f:spec", "f:replicas") {
		t.Errorf("team-a owns spec.replicas, which it did not set: %v", fields)
	}
	for _, p := range [][]string{{"f:spec", "f:selector"}, {"f:spec", "f:template", "f:spec", "f:containers"}} {
		if !owns(fields, p...) {
			t.Errorf("team-a does not own %v, which it set: %v", p, fields)
		}
	}
	if owns(fields, "f:spec", "f:strategy") || owns(fields, "f:status") || owns(fields, "f:metadata", "f:creationTimestamp") {
		t.Errorf("team-a owns fields it left zero: %v", fields)
	}
	if defaults && (got.Spec.Replicas == nil || *got.Spec.Replicas != 1) {
		t.Errorf("replicas = %v, want the server's default 1", got.Spec.Replicas)
	}

	// Replicas set to zero on purpose: owned.
	zero := int32(0)
	got, err = teamA.Apply(ctx, webDeployment(ns, &zero), client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !owns(ownedFields(t, got, "team-a", ""), "f:spec", "f:replicas") || *got.Spec.Replicas != 0 {
		t.Errorf("after applying replicas 0: replicas %d, team-a's fields %v", *got.Spec.Replicas, ownedFields(t, got, "team-a", ""))
	}

	// Another manager conflicts on replicas, and Force settles it.
	two := int32(2)
	_, err = teamB.Apply(ctx, webDeployment(ns, &two), client.ApplyOptions{})
	if !apierrors.IsConflict(err) {
		t.Fatalf("team-b's apply of replicas 2 = %v, want a 409 Conflict", err)
	}
	got, err = teamB.Apply(ctx, webDeployment(ns, &two), client.ApplyOptions{Force: true})
	if err != nil {
		t.Fatal(err)
	}
	if *got.Spec.Replicas != 2 || !owns(ownedFields(t, got, "team-b", ""), "f:spec", "f:replicas") ||
		owns(ownedFields(t, got, "team-a", ""), "f:spec", "f:replicas") {
		t.Errorf("after team-b forced: replicas %d, team-a %v, team-b %v", *got.Spec.Replicas,
			ownedFields(t, got, "team-a", ""), ownedFields(t, got, "team-b", ""))
	}

	// ApplyStatus owns status, and only status.
	status := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
		Status: appsv1.DeploymentStatus{Conditions: []appsv1.DeploymentCondition{{
			Type: "Reviewed", Status: corev1.ConditionTrue, Reason: "Test", Message: "set by ApplyStatus",
		}}},
	}
	got, err = teamA.ApplyStatus(ctx, status, client.ApplyOptions{})
	if err != nil {
		t.Fatal(err)
	}
	sfields := ownedFields(t, got, "team-a", "status")
	if !slices.Equal(keys(sfields), []string{"f:status"}) || !owns(sfields, "f:status", "f:conditions") {
		t.Errorf("team-a's status entry = %v, want f:status with its conditions only", sfields)
	}
	if !slices.ContainsFunc(got.Status.Conditions, func(c appsv1.DeploymentCondition) bool { return c.Type == "Reviewed" }) {
		t.Errorf("conditions = %+v, want Reviewed among them", got.Status.Conditions)
	}

	// With no field owner anywhere, Apply says what is missing.
	anon, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := anon.Apply(ctx, webDeployment(ns, nil), client.ApplyOptions{}); !errors.Is(err, client.ErrNoFieldManager) {
		t.Errorf("Apply without a field manager = %v, want ErrNoFieldManager", err)
	}
}
