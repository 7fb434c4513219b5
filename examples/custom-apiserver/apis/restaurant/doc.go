// Package restaurant holds the internal (hub) version of the API group
// restaurant.programming-kubernetes.info: the types the server works with.
// Requests in any external version (v1alpha1, v1beta1) are decoded,
// defaulted and converted into these types, and answers are converted back
// into the version the client asked for. The internal version is never on
// the wire.
//
// +k8s:deepcopy-gen=package
// +groupName=restaurant.programming-kubernetes.info
package restaurant
