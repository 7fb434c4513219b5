package v1beta1_test

import (
	"reflect"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/api/v1beta1"
)

// TestRoundTrip: v1alpha1 → v1beta1 → v1alpha1 and v1beta1 → v1alpha1 →
// v1beta1 give back the object unchanged, for a table of objects.
func TestRoundTrip(t *testing.T) {
	meta := metav1.ObjectMeta{Name: "a", Namespace: "ns", Labels: map[string]string{"x": "y"}, Finalizers: []string{"f"}}
	status := v1alpha1.AtStatus{Phase: v1alpha1.PhaseDone, PodName: "a-pod",
		Conditions: []metav1.Condition{{Type: "Succeeded", Status: metav1.ConditionTrue, Reason: "Done", Message: "ok"}}}
	for _, schedule := range []string{
		"2026-11-22T15:04:05Z",
		"2026-11-22T15:04:05.123456789Z",
		"2026-11-22T15:04:05+01:00",
		"2026-11-22T15:04:05-09:30",
		"",
	} {
		for _, spec := range []v1alpha1.AtSpec{
			{Schedule: schedule, Command: "echo hi", Image: "busybox:1.37"},
			{Schedule: schedule},
		} {
			in := &v1alpha1.At{ObjectMeta: meta, Spec: spec, Status: status}
			var mid v1beta1.At
			if err := mid.ConvertFrom(in.DeepCopy()); err != nil {
				t.Fatalf("%q: to v1beta1: %v", schedule, err)
			}
			var out v1alpha1.At
			if err := mid.ConvertTo(&out); err != nil {
				t.Fatalf("%q: back to v1alpha1: %v", schedule, err)
			}
			if !reflect.DeepEqual(in, &out) {
				t.Fatalf("v1alpha1 round trip of %q:\n in %+v\nout %+v", schedule, in.Spec, out.Spec)
			}
		}
	}
	for _, s := range []v1beta1.Schedule{
		{Date: "2026-11-22", Time: "15:04:05", Offset: "Z"},
		{Date: "2026-11-22", Time: "15:04:05.5", Offset: "+05:45"},
	} {
		in := &v1beta1.At{ObjectMeta: meta, Spec: v1beta1.AtSpec{Schedule: s, Command: "date"}, Status: status}
		var mid v1alpha1.At
		if err := in.DeepCopy().ConvertTo(&mid); err != nil {
			t.Fatal(err)
		}
		var out v1beta1.At
		if err := out.ConvertFrom(&mid); err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(in, &out) {
			t.Fatalf("v1beta1 round trip:\n in %+v\nout %+v", in.Spec, out.Spec)
		}
	}
}

func TestConvertFromBadSchedule(t *testing.T) {
	// What the v1alpha1 schema's pattern refuses, conversion refuses too.
	for _, s := range []string{"tomorrow", "2026-11-22t15:04:05z", "2026-11-22T15:04Z"} {
		var out v1beta1.At
		if err := out.ConvertFrom(&v1alpha1.At{Spec: v1alpha1.AtSpec{Schedule: s}}); err == nil {
			t.Errorf("no error for schedule %q", s)
		}
	}
}
