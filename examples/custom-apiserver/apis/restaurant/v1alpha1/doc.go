// Package v1alpha1 is the first external version of
// restaurant.programming-kubernetes.info: a Pizza lists its toppings by
// name, a name repeated once per portion. Converted to and from the
// internal version without loss.
//
// +k8s:deepcopy-gen=package
// +groupName=restaurant.programming-kubernetes.info
package v1alpha1
