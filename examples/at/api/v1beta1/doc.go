// Package v1beta1 is the cnat.programming-kubernetes.info/v1beta1 API of
// the At example. It differs from v1alpha1 in one field: the schedule is
// structured (a date, a time of day and a UTC offset) instead of one
// RFC 3339 string. v1alpha1 stays the storage version and the conversion
// hub; this version converts to and from it (conversion.go), and the API
// server calls the operator's conversion webhook to do so.
//
// +kubebuilder:object:generate=true
// +groupName=cnat.programming-kubernetes.info
package v1beta1
