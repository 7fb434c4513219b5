package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of Foo.
var GroupVersion = schema.GroupVersion{Group: "samplecontroller.k8s.io", Version: "v1alpha1"}

// AddToScheme registers Foo and FooList in s, so that Loom's clients,
// informers, owner references and events know their kind.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &Foo{}, &FooList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
