// Package apischeme registers the built-in API types Loom works with: the
// k8s.io/api group versions that the pinned kube-apiserver serves by
// default, and admission/v1 (the payload of admission webhooks). It is the
// one list of them, used where a test or generator needs every built-in
// type.
package apischeme

import (
	"reflect"
	"sort"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	authenticationv1 "k8s.io/api/authentication/v1"
	authorizationv1 "k8s.io/api/authorization/v1"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	autoscalingv2 "k8s.io/api/autoscaling/v2"
	batchv1 "k8s.io/api/batch/v1"
	certificatesv1 "k8s.io/api/certificates/v1"
	coordinationv1 "k8s.io/api/coordination/v1"
	corev1 "k8s.io/api/core/v1"
	discoveryv1 "k8s.io/api/discovery/v1"
	eventsv1 "k8s.io/api/events/v1"
	flowcontrolv1 "k8s.io/api/flowcontrol/v1"
	networkingv1 "k8s.io/api/networking/v1"
	nodev1 "k8s.io/api/node/v1"
	policyv1 "k8s.io/api/policy/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	resourcev1 "k8s.io/api/resource/v1"
	schedulingv1 "k8s.io/api/scheduling/v1"
	storagev1 "k8s.io/api/storage/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// AddToScheme registers every group version of the package doc in s.
func AddToScheme(s *runtime.Scheme) error {
	for _, add := range []func(*runtime.Scheme) error{
		admissionv1.AddToScheme, admissionregistrationv1.AddToScheme, appsv1.AddToScheme,
		authenticationv1.AddToScheme, authorizationv1.AddToScheme, autoscalingv1.AddToScheme,
		autoscalingv2.AddToScheme, batchv1.AddToScheme, certificatesv1.AddToScheme,
		coordinationv1.AddToScheme, corev1.AddToScheme, discoveryv1.AddToScheme, eventsv1.AddToScheme,
		flowcontrolv1.AddToScheme, networkingv1.AddToScheme, nodev1.AddToScheme, policyv1.AddToScheme,
		rbacv1.AddToScheme, resourcev1.AddToScheme, schedulingv1.AddToScheme, storagev1.AddToScheme,
	} {
		if err := add(s); err != nil {
			return err
		}
	}
	return nil
}

// Types returns the Go type of every kind AddToScheme registers, each
// once, sorted by name: the list the decoders' differential tests walk.
func Types() ([]reflect.Type, error) {
	s := runtime.NewScheme()
	if err := AddToScheme(s); err != nil {
		return nil, err
	}
	seen := map[reflect.Type]bool{}
	var types []reflect.Type
	for _, typ := range s.AllKnownTypes() {
		if !seen[typ] {
			seen[typ] = true
			types = append(types, typ)
		}
	}
	sort.Slice(types, func(i, j int) bool { return types[i].String() < types[j].String() })
	return types, nil
}
