package controller

import (
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func cond(typ string, status metav1.ConditionStatus, reason string, gen int64) metav1.Condition {
	return metav1.Condition{Type: typ, Status: status, Reason: reason, ObservedGeneration: gen}
}

func TestSetStatusCondition(t *testing.T) {
	then := metav1.NewTime(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
	ready := cond("Ready", metav1.ConditionTrue, "Up", 1)
	ready.LastTransitionTime = then
	tests := []struct {
		name           string
		have           []metav1.Condition
		set            metav1.Condition
		changed        bool
		transitionKept bool // lastTransitionTime stays `then`
	}{
		{"new", nil, cond("Ready", metav1.ConditionTrue, "Up", 1), true, false},
		{"same", []metav1.Condition{ready}, cond("Ready", metav1.ConditionTrue, "Up", 1), false, true},
		{"reason only", []metav1.Condition{ready}, cond("Ready", metav1.ConditionTrue, "StillUp", 1), true, true},
		{"status flips", []metav1.Condition{ready}, cond("Ready", metav1.ConditionFalse, "Down", 1), true, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.have...)
			if got := SetStatusCondition(&conds, tt.set); got != tt.changed {
				t.Fatalf("changed = %v, want %v", got, tt.changed)
			}
			c := FindStatusCondition(conds, "Ready")
			if c == nil || c.Status != tt.set.Status || c.Reason != tt.set.Reason {
				t.Fatalf("condition = %+v, want %+v", c, tt.set)
			}
			if c.LastTransitionTime.IsZero() {
				t.Fatal("lastTransitionTime not set")
			}
			if kept := c.LastTransitionTime.Equal(&then); kept != tt.transitionKept {
				t.Fatalf("lastTransitionTime = %v, kept = %v, want kept = %v", c.LastTransitionTime, kept, tt.transitionKept)
			}
		})
	}
	if SetStatusCondition(nil, ready) {
		t.Fatal("SetStatusCondition(nil) reported a change")
	}
}

func TestSetObservedStatusCondition(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 7}}
	tests := []struct {
		name    string
		have    []metav1.Condition
		obj     metav1.Object
		changed bool
		wantGen int64
	}{
		{"new takes the generation", nil, d, true, 7},
		{"older generation is a change", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 6)}, d, true, 7},
		{"current generation is no change", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 7)}, d, false, 7},
		{"nil object keeps the given generation", nil, nil, true, 3},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			conds := append([]metav1.Condition(nil), tt.have...)
			if got := SetObservedStatusCondition(&conds, tt.obj, cond("Ready", metav1.ConditionTrue, "Up", 3)); got != tt.changed {
				t.Fatalf("changed = %v, want %v", got, tt.changed)
			}
			if g := FindStatusCondition(conds, "Ready").ObservedGeneration; g != tt.wantGen {
				t.Fatalf("observedGeneration = %d, want %d", g, tt.wantGen)
			}
		})
	}
}

func TestRemoveStatusCondition(t *testing.T) {
	tests := []struct {
		name    string
		have    []metav1.Condition
		removed bool
		left    int
	}{
		{"present", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 1), cond("Synced", metav1.ConditionTrue, "Ok", 1)}, true, 1},
		{"absent", []metav1.Condition{cond("Synced", metav1.ConditionTrue, "Ok", 1)}, false, 1},
		{"empty", nil, false, 0},
	}
	for _, tt := range tests {
		conds := append([]metav1.Condition(nil), tt.have...)
		if got := RemoveStatusCondition(&conds, "Ready"); got != tt.removed || len(conds) != tt.left {
			t.Errorf("%s: removed = %v with %d left, want %v with %d", tt.name, got, len(conds), tt.removed, tt.left)
		}
		if FindStatusCondition(conds, "Ready") != nil {
			t.Errorf("%s: Ready still there", tt.name)
		}
	}
}

func TestConditionPredicates(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Generation: 2}}
	tests := []struct {
		name                         string
		conds                        []metav1.Condition
		isTrue, isFalse, trueCurrent bool
	}{
		{"absent", nil, false, false, false},
		{"true, current", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 2)}, true, false, true},
		{"true, stale", []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 1)}, true, false, false},
		{"false", []metav1.Condition{cond("Ready", metav1.ConditionFalse, "Down", 2)}, false, true, false},
		{"unknown", []metav1.Condition{cond("Ready", metav1.ConditionUnknown, "Starting", 2)}, false, false, false},
		{"other type only", []metav1.Condition{cond("Synced", metav1.ConditionTrue, "Ok", 2)}, false, false, false},
	}
	for _, tt := range tests {
		if got := IsStatusConditionTrue(tt.conds, "Ready"); got != tt.isTrue {
			t.Errorf("%s: IsStatusConditionTrue = %v", tt.name, got)
		}
		if got := IsStatusConditionFalse(tt.conds, "Ready"); got != tt.isFalse {
			t.Errorf("%s: IsStatusConditionFalse = %v", tt.name, got)
		}
		if got := IsStatusConditionTrueForGeneration(tt.conds, d, "Ready"); got != tt.trueCurrent {
			t.Errorf("%s: IsStatusConditionTrueForGeneration = %v", tt.name, got)
		}
	}
	if IsStatusConditionTrueForGeneration([]metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 0)}, nil, "Ready") {
		t.Error("IsStatusConditionTrueForGeneration with a nil object: true")
	}
}

func TestFindStatusConditionPointsIntoTheSlice(t *testing.T) {
	conds := []metav1.Condition{cond("Ready", metav1.ConditionTrue, "Up", 1)}
	FindStatusCondition(conds, "Ready").Reason = "Changed"
	if conds[0].Reason != "Changed" {
		t.Fatal("FindStatusCondition returned a copy; its doc says it points into the slice")
	}
}
