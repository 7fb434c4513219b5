package operator

import (
	"maps"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
)

func testFoo(replicas *int32) *v1alpha1.Foo {
	foo := &v1alpha1.Foo{
		ObjectMeta: metav1.ObjectMeta{Name: "example", Namespace: "ns", UID: types.UID("foo-uid"), Generation: 2},
		Spec:       v1alpha1.FooSpec{DeploymentName: "web", Replicas: replicas},
	}
	return foo
}

// deployment is foo's Deployment as the server would hold it, with the
// given spec.replicas and status.
func deployment(foo *v1alpha1.Foo, replicas int32, st appsv1.DeploymentStatus) *appsv1.Deployment {
	d := newDeployment(foo)
	d.Spec.Replicas = &replicas
	d.Generation = 4
	d.Status = st
	return d
}

func TestPlan(t *testing.T) {
	foo := testFoo(new(int32(3)))
	other := deployment(foo, 3, appsv1.DeploymentStatus{})
	other.OwnerReferences = nil
	otherFoo := deployment(foo, 3, appsv1.DeploymentStatus{})
	otherFoo.OwnerReferences[0].UID = "another-foo" // a Foo of the same name, deleted and made again
	cases := []struct {
		name                   string
		foo                    *v1alpha1.Foo
		dep                    *appsv1.Deployment
		create, conflict       bool
		update                 bool
		wantReplicasAfterwards int32
	}{
		{name: "no deployment: create it", foo: foo, create: true, wantReplicasAfterwards: 3},
		{name: "replicas unset: the default 1", foo: testFoo(nil), create: true, wantReplicasAfterwards: 1},
		{name: "zero replicas", foo: testFoo(new(int32(0))), create: true, wantReplicasAfterwards: 0},
		{name: "own, in step", foo: foo, dep: deployment(foo, 3, appsv1.DeploymentStatus{})},
		{name: "own, scaled up", foo: foo, dep: deployment(foo, 1, appsv1.DeploymentStatus{}), update: true, wantReplicasAfterwards: 3},
		{name: "own, scaled down to 0", foo: testFoo(new(int32(0))), dep: deployment(foo, 3, appsv1.DeploymentStatus{}), update: true},
		{name: "someone else's", foo: foo, dep: other, conflict: true},
		{name: "another Foo's", foo: foo, dep: otherFoo, conflict: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			var before *appsv1.Deployment
			if tc.dep != nil {
				before = tc.dep.DeepCopy()
			}
			got := plan(tc.foo, tc.dep)
			if (got.create != nil) != tc.create || (got.update != nil) != tc.update || got.conflict != tc.conflict {
				t.Fatalf("plan = create %v, update %v, conflict %v; want %v, %v, %v",
					got.create != nil, got.update != nil, got.conflict, tc.create, tc.update, tc.conflict)
			}
			if tc.dep != nil && !reflect.DeepEqual(tc.dep, before) {
				t.Errorf("plan changed the cached Deployment")
			}
			d := got.create
			if got.update != nil {
				d = got.update
				if d == tc.dep {
					t.Errorf("update is the cached Deployment itself, not a copy")
				}
			}
			if d == nil {
				return
			}
			if d.Spec.Replicas == nil || *d.Spec.Replicas != tc.wantReplicasAfterwards {
				t.Errorf("replicas %v, want %d", d.Spec.Replicas, tc.wantReplicasAfterwards)
			}
			if d.Name != "web" || d.Namespace != "ns" {
				t.Errorf("deployment %s/%s, want ns/web", d.Namespace, d.Name)
			}
			if !controller.IsControlledBy(d, tc.foo) {
				t.Errorf("deployment not controlled by the Foo: %+v", d.OwnerReferences)
			}
			if ref := d.OwnerReferences[0]; ref.APIVersion != "samplecontroller.k8s.io/v1alpha1" || ref.Kind != "Foo" || ref.Name != "example" {
				t.Errorf("owner reference %+v", ref)
			}
			want := map[string]string{"app": "nginx", "controller": "example"}
			if !maps.Equal(d.Spec.Selector.MatchLabels, want) || !maps.Equal(d.Spec.Template.Labels, want) || !maps.Equal(d.Labels, want) {
				t.Errorf("labels %v, selector %v, pod labels %v; want %v", d.Labels, d.Spec.Selector.MatchLabels, d.Spec.Template.Labels, want)
			}
			if c := d.Spec.Template.Spec.Containers; len(c) != 1 || c[0].Image != Image {
				t.Errorf("containers %+v", c)
			}
		})
	}
}

func TestNextStatus(t *testing.T) {
	foo := testFoo(new(int32(3)))
	st := func(observed int64, replicas, updated, available int32) appsv1.DeploymentStatus {
		return appsv1.DeploymentStatus{ObservedGeneration: observed, Replicas: replicas, UpdatedReplicas: updated, AvailableReplicas: available}
	}
	ready := func(status metav1.ConditionStatus, reason string, generation int64) []metav1.Condition {
		return []metav1.Condition{{Type: ConditionReady, Status: status, Reason: reason, ObservedGeneration: generation,
			Message: "whatever", LastTransitionTime: metav1.Now()}}
	}
	withStatus := func(foo *v1alpha1.Foo, available int32, conds []metav1.Condition) *v1alpha1.Foo {
		f := foo.DeepCopy()
		f.Status = v1alpha1.FooStatus{AvailableReplicas: available, Selector: "app=nginx,controller=example", Conditions: conds}
		return f
	}
	// A Foo whose status already is what nextStatus writes for an
	// available Deployment.
	settled, _ := nextStatus(foo, deployment(foo, 3, st(4, 3, 3, 3)), false)
	cases := []struct {
		name          string
		foo           *v1alpha1.Foo
		dep           *appsv1.Deployment
		conflict      bool
		wantAvailable int32
		wantReady     metav1.ConditionStatus
		wantReason    string
		wantMessage   string
		wantChanged   bool
	}{
		{name: "new Foo, deployment not known yet", foo: foo, wantReady: metav1.ConditionFalse, wantReason: ReasonProgressing,
			wantMessage: "creating deployment web", wantChanged: true},
		{name: "just created", foo: foo, dep: deployment(foo, 3, st(0, 0, 0, 0)), wantReady: metav1.ConditionFalse,
			wantReason: ReasonProgressing, wantMessage: "waiting for the deployment controller to see the change; 0 of 3 replicas available", wantChanged: true},
		{name: "rolling out", foo: foo, dep: deployment(foo, 3, st(4, 3, 3, 1)), wantAvailable: 1, wantReady: metav1.ConditionFalse,
			wantReason: ReasonProgressing, wantMessage: "1 of 3 replicas available", wantChanged: true},
		{name: "available", foo: foo, dep: deployment(foo, 3, st(4, 3, 3, 3)), wantAvailable: 3, wantReady: metav1.ConditionTrue,
			wantReason: ReasonAvailable, wantMessage: "3 of 3 replicas available", wantChanged: true},
		{name: "available, status already says so", foo: settled, dep: deployment(foo, 3, st(4, 3, 3, 3)),
			wantAvailable: 3, wantReady: metav1.ConditionTrue, wantReason: ReasonAvailable, wantMessage: "3 of 3 replicas available", wantChanged: false},
		{name: "scaled down, old pods still terminating", foo: foo, dep: deployment(foo, 3, st(4, 5, 3, 5)), wantAvailable: 5,
			wantReady: metav1.ConditionFalse, wantReason: ReasonProgressing, wantMessage: "5 of 3 replicas available", wantChanged: true},
		{name: "scaled to zero", foo: testFoo(new(int32(0))), dep: deployment(foo, 0, st(4, 0, 0, 0)), wantReady: metav1.ConditionTrue,
			wantReason: ReasonAvailable, wantMessage: "0 of 0 replicas available", wantChanged: true},
		{name: "name conflict", foo: withStatus(foo, 2, ready(metav1.ConditionTrue, ReasonAvailable, 2)), dep: deployment(foo, 3, st(4, 3, 3, 3)),
			conflict: true, wantReady: metav1.ConditionFalse, wantReason: ReasonConflict,
			wantMessage: "deployment web exists and is not managed by this Foo", wantChanged: true},
		{name: "spec changed since the condition was written", foo: withStatus(foo, 3, ready(metav1.ConditionTrue, ReasonAvailable, 1)),
			dep: deployment(foo, 3, st(4, 3, 3, 3)), wantAvailable: 3, wantReady: metav1.ConditionTrue, wantReason: ReasonAvailable,
			wantMessage: "3 of 3 replicas available", wantChanged: true},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			before := tc.foo.DeepCopy()
			next, changed := nextStatus(tc.foo, tc.dep, tc.conflict)
			if changed != tc.wantChanged {
				t.Errorf("changed = %v, want %v", changed, tc.wantChanged)
			}
			if !reflect.DeepEqual(tc.foo, before) {
				t.Errorf("nextStatus changed the cached Foo")
			}
			if next.Status.AvailableReplicas != tc.wantAvailable {
				t.Errorf("availableReplicas %d, want %d", next.Status.AvailableReplicas, tc.wantAvailable)
			}
			if next.Status.Selector != "app=nginx,controller=example" {
				t.Errorf("selector %q", next.Status.Selector)
			}
			c := controller.FindStatusCondition(next.Status.Conditions, ConditionReady)
			if c == nil || c.Status != tc.wantReady || c.Reason != tc.wantReason || c.Message != tc.wantMessage {
				t.Fatalf("Ready condition %+v, want %s %s %q", c, tc.wantReady, tc.wantReason, tc.wantMessage)
			}
			if c.ObservedGeneration != tc.foo.Generation {
				t.Errorf("observedGeneration %d, want the Foo's %d", c.ObservedGeneration, tc.foo.Generation)
			}
			if len(next.Status.Conditions) != 1 {
				t.Errorf("conditions %+v, want Ready only", next.Status.Conditions)
			}
		})
	}
}
