package server

import (
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/install"
)

// Scheme holds the restaurant group (internal, v1alpha1 and v1beta1) and
// the meta types every API server answers with.
var Scheme = runtime.NewScheme()

// Codecs encodes and decodes with Scheme.
var Codecs = serializer.NewCodecFactory(Scheme)

func init() {
	install.Install(Scheme)
	// The list, get, delete and watch options, and the unversioned types
	// of discovery and errors.
	metav1.AddToGroupVersion(Scheme, schema.GroupVersion{Version: "v1"})
	Scheme.AddUnversionedTypes(schema.GroupVersion{Version: "v1"},
		&metav1.Status{}, &metav1.APIVersions{}, &metav1.APIGroupList{}, &metav1.APIGroup{}, &metav1.APIResourceList{})
}
