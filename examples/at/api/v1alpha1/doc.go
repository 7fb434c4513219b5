// Package v1alpha1 is the cnat.programming-kubernetes.info/v1alpha1 API of
// the At example: an At runs a command once, at a scheduled time, in a Pod.
// It is the "cnat" (cloud-native at) operator of Programming Kubernetes.
//
// The CRD manifest and the deep-copy methods are generated from the Go
// types and their markers by controller-gen (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=cnat.programming-kubernetes.info
package v1alpha1
