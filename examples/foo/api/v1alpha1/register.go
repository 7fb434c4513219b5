package v1alpha1

import (
	"sync"

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

// Scheme returns a Scheme that knows Foo and FooList, for a manager's
// Options.Scheme. It is made once; do not change it.
func Scheme() *runtime.Scheme { return scheme() }

var scheme = sync.OnceValue(func() *runtime.Scheme {
	s := runtime.NewScheme()
	_ = AddToScheme(s) // it cannot fail
	return s
})
