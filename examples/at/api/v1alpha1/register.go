package v1alpha1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of At.
var GroupVersion = schema.GroupVersion{Group: "cnat.programming-kubernetes.info", Version: "v1alpha1"}

// AddToScheme registers At and AtList in s, so that Loom's clients,
// informers, owner references and events know their kind.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &At{}, &AtList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}

// Hub marks v1alpha1 as the conversion hub: every other version of At
// converts to and from it (see package webhook).
func (*At) Hub() {}
