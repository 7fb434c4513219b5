package operator

import (
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
)

func TestPlan(t *testing.T) {
	now := time.Date(2026, 11, 22, 12, 0, 0, 0, time.UTC)
	at := func(phase v1alpha1.Phase, schedule string) *v1alpha1.At {
		a := &v1alpha1.At{Spec: v1alpha1.AtSpec{Schedule: schedule, Command: "true"}, Status: v1alpha1.AtStatus{Phase: phase}}
		a.Name = "x"
		return a
	}
	pod := func(phase corev1.PodPhase) *corev1.Pod { return &corev1.Pod{Status: corev1.PodStatus{Phase: phase}} }
	yes, no := true, false
	cases := []struct {
		name    string
		at      *v1alpha1.At
		pod     *corev1.Pod
		want    step
		wantErr bool
	}{
		{name: "new", at: at("", "2026-11-22T12:00:10Z"), want: step{phase: v1alpha1.PhasePending, reason: "Pending"}},
		{name: "pending, due later: a timer, not a poll", at: at(v1alpha1.PhasePending, "2026-11-22T12:00:10Z"), want: step{requeue: 10 * time.Second}},
		{name: "pending, other time zone", at: at(v1alpha1.PhasePending, "2026-11-22T13:00:05+01:00"), want: step{requeue: 5 * time.Second}},
		{name: "pending, due now", at: at(v1alpha1.PhasePending, "2026-11-22T12:00:00Z"), want: step{phase: v1alpha1.PhaseRunning, createPod: true, reason: "Running"}},
		{name: "pending, overdue, pod there already", at: at(v1alpha1.PhasePending, "2026-11-22T11:00:00Z"), pod: pod(corev1.PodPending),
			want: step{phase: v1alpha1.PhaseRunning, reason: "Running"}},
		{name: "pending, bad date", at: at(v1alpha1.PhasePending, "2026-13-01T00:00:00Z"), wantErr: true},
		{name: "running, pod missing", at: at(v1alpha1.PhaseRunning, "2026-11-22T11:00:00Z"), want: step{createPod: true}},
		{name: "running, pod running", at: at(v1alpha1.PhaseRunning, "2026-11-22T11:00:00Z"), pod: pod(corev1.PodRunning), want: step{}},
		{name: "running, pod succeeded", at: at(v1alpha1.PhaseRunning, "2026-11-22T11:00:00Z"), pod: pod(corev1.PodSucceeded),
			want: step{phase: v1alpha1.PhaseDone, succeeded: &yes, reason: "Done"}},
		{name: "running, pod failed", at: at(v1alpha1.PhaseRunning, "2026-11-22T11:00:00Z"), pod: pod(corev1.PodFailed),
			want: step{phase: v1alpha1.PhaseDone, succeeded: &no, reason: "Failed"}},
		{name: "done", at: at(v1alpha1.PhaseDone, "2026-11-22T11:00:00Z"), pod: pod(corev1.PodSucceeded), want: step{}},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := plan(tc.at, tc.pod, now)
			if (err != nil) != tc.wantErr {
				t.Fatalf("err = %v, want error: %v", err, tc.wantErr)
			}
			if got.phase != tc.want.phase || got.createPod != tc.want.createPod || got.requeue != tc.want.requeue || got.reason != tc.want.reason {
				t.Fatalf("plan = %+v, want %+v", got, tc.want)
			}
			if (got.succeeded == nil) != (tc.want.succeeded == nil) || (got.succeeded != nil && *got.succeeded != *tc.want.succeeded) {
				t.Fatalf("succeeded = %v, want %v", got.succeeded, tc.want.succeeded)
			}
		})
	}
}
