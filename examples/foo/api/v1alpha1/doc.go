// Package v1alpha1 is the samplecontroller.k8s.io/v1alpha1 API of the Foo
// example: a Foo asks for a Deployment of the given name and size, which
// the operator creates, owns and keeps at that size. It is the API of
// Kubernetes' sample-controller, with a schema that validates it and a
// scale subresource, so that `kubectl scale foo` works.
//
// The CRD manifest and the deep-copy methods are generated from the Go
// types and their markers by controller-gen (`make generate`).
//
// +kubebuilder:object:generate=true
// +groupName=samplecontroller.k8s.io
package v1alpha1
