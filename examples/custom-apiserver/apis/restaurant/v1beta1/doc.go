// Package v1beta1 is the second external version of
// restaurant.programming-kubernetes.info, and the one stored: a Pizza lists
// each topping once, with a quantity (default 1).
//
// +k8s:deepcopy-gen=package
// +groupName=restaurant.programming-kubernetes.info
package v1beta1
