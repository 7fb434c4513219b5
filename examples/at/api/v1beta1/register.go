package v1beta1

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// GroupVersion is the API group and version of this At.
var GroupVersion = schema.GroupVersion{Group: "cnat.programming-kubernetes.info", Version: "v1beta1"}

// AddToScheme registers At and AtList in s.
func AddToScheme(s *runtime.Scheme) error {
	s.AddKnownTypes(GroupVersion, &At{}, &AtList{})
	metav1.AddToGroupVersion(s, GroupVersion)
	return nil
}
