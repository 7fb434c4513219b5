// Package install registers the whole restaurant group in a scheme: the
// internal version and both external versions, v1beta1 first (the
// preferred and stored version).
package install

import (
	"k8s.io/apimachinery/pkg/runtime"
	utilruntime "k8s.io/apimachinery/pkg/util/runtime"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1alpha1"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1beta1"
)

// Install registers the group in s. It panics on a registration error,
// which is a programming error.
func Install(s *runtime.Scheme) {
	utilruntime.Must(restaurant.AddToScheme(s))
	utilruntime.Must(v1beta1.AddToScheme(s))
	utilruntime.Must(v1alpha1.AddToScheme(s))
	utilruntime.Must(s.SetVersionPriority(v1beta1.SchemeGroupVersion, v1alpha1.SchemeGroupVersion))
}
