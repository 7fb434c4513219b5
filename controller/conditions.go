package controller

import (
	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// The condition helpers below work on a status's []metav1.Condition (the
// standard condition type, with type, status, reason, message,
// lastTransitionTime and observedGeneration). They are thin wrappers over
// k8s.io/apimachinery/pkg/api/meta, plus what those lack: setting and
// checking observedGeneration against the object. They change the slice in
// memory only; the caller writes the status, for example with
// client.UpdateStatus or [CreateOrPatch].

// SetStatusCondition sets the condition of c's type in *conditions to c,
// appending it if absent, and reports whether anything changed.
// lastTransitionTime is set to now (unless c sets it) when the condition is
// new or its status changes, and kept otherwise. A nil conditions is
// ignored (false).
func SetStatusCondition(conditions *[]metav1.Condition, c metav1.Condition) (changed bool) {
	return meta.SetStatusCondition(conditions, c)
}

// SetObservedStatusCondition is [SetStatusCondition] with c's
// observedGeneration set to obj's metadata.generation: the condition then
// says which version of obj's spec it describes, so that readers can tell
// a current condition from one written before the last spec change (see
// [IsStatusConditionTrueForGeneration]). A nil obj leaves c's
// observedGeneration as given.
func SetObservedStatusCondition(conditions *[]metav1.Condition, obj metav1.Object, c metav1.Condition) (changed bool) {
	if !isNil(obj) {
		c.ObservedGeneration = obj.GetGeneration()
	}
	return meta.SetStatusCondition(conditions, c)
}

// RemoveStatusCondition removes the condition of the given type from
// *conditions and reports whether it was there.
func RemoveStatusCondition(conditions *[]metav1.Condition, conditionType string) (removed bool) {
	return meta.RemoveStatusCondition(conditions, conditionType)
}

// FindStatusCondition returns the condition of the given type, or nil. The
// result points into conditions: changing it changes the slice.
func FindStatusCondition(conditions []metav1.Condition, conditionType string) *metav1.Condition {
	return meta.FindStatusCondition(conditions, conditionType)
}

// IsStatusConditionTrue reports whether the condition of the given type is
// present with status True.
func IsStatusConditionTrue(conditions []metav1.Condition, conditionType string) bool {
	return meta.IsStatusConditionTrue(conditions, conditionType)
}

// IsStatusConditionFalse reports whether the condition of the given type
// is present with status False. Absent and Unknown are neither true nor
// false.
func IsStatusConditionFalse(conditions []metav1.Condition, conditionType string) bool {
	return meta.IsStatusConditionFalse(conditions, conditionType)
}

// IsStatusConditionTrueForGeneration reports whether the condition of the
// given type is True and was observed at obj's current
// metadata.generation. A True condition from an older generation says
// nothing about the current spec, so waiting for "Ready" should use this
// rather than [IsStatusConditionTrue]. A nil obj gives false.
func IsStatusConditionTrueForGeneration(conditions []metav1.Condition, obj metav1.Object, conditionType string) bool {
	if isNil(obj) {
		return false
	}
	c := meta.FindStatusCondition(conditions, conditionType)
	return c != nil && c.Status == metav1.ConditionTrue && c.ObservedGeneration == obj.GetGeneration()
}
