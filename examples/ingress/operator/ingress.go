package operator

import (
	"errors"
	"fmt"
	"net"
	"strings"

	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/util/validation"

	"github.com/loom-k8s/loom/controller"
)

// The annotations a Service asks for its Ingress with.
const (
	// AnnotationHTTP set to "true" asks for an Ingress; any other value,
	// or none, asks for none (and removes the one the operator made).
	AnnotationHTTP = "ingress/http"
	// AnnotationHost, when set, is the host of the Ingress's rule (such as
	// "shop.example.com" or "*.example.com"). Default: every host.
	AnnotationHost = "ingress/host"
	// AnnotationClass, when set, is the Ingress's spec.ingressClassName.
	// Default: left to the cluster (the default IngressClass, if any, is
	// filled in on create by the API server's admission).
	AnnotationClass = "ingress/class"
)

// desired returns the Ingress svc asks for, or nil when it asks for none.
// The Ingress has the Service's name and namespace and one rule: path "/"
// (prefix) to the Service's first port, by number, for the host of
// AnnotationHost (all hosts without it), in the class of AnnotationClass.
// Only the name, namespace and spec are set; apply adds the controller
// reference.
//
// It fails, for an annotated Service, when no valid Ingress can be made of
// it: the Service has no port, or the host or class annotation is not
// something the API server would accept. Retrying cannot fix that; the
// Service has to change.
func desired(svc *corev1.Service) (*networkingv1.Ingress, error) {
	if svc.Annotations[AnnotationHTTP] != "true" {
		return nil, nil
	}
	if len(svc.Spec.Ports) == 0 {
		return nil, errors.New("the service has no port to route to")
	}
	host := svc.Annotations[AnnotationHost]
	if err := validHost(host); err != nil {
		return nil, fmt.Errorf("annotation %s: %w", AnnotationHost, err)
	}
	prefix := networkingv1.PathTypePrefix
	ing := &networkingv1.Ingress{
		ObjectMeta: metav1.ObjectMeta{Name: svc.Name, Namespace: svc.Namespace},
		Spec: networkingv1.IngressSpec{
			Rules: []networkingv1.IngressRule{{
				Host: host,
				IngressRuleValue: networkingv1.IngressRuleValue{HTTP: &networkingv1.HTTPIngressRuleValue{
					Paths: []networkingv1.HTTPIngressPath{{
						Path:     "/",
						PathType: &prefix,
						Backend: networkingv1.IngressBackend{Service: &networkingv1.IngressServiceBackend{
							Name: svc.Name,
							Port: networkingv1.ServiceBackendPort{Number: svc.Spec.Ports[0].Port},
						}},
					}},
				}},
			}},
		},
	}
	if class, ok := svc.Annotations[AnnotationClass]; ok {
		if msgs := validation.IsDNS1123Subdomain(class); len(msgs) > 0 {
			return nil, fmt.Errorf("annotation %s: %q is not a valid class name: %s", AnnotationClass, class, strings.Join(msgs, "; "))
		}
		ing.Spec.IngressClassName = &class
	}
	return ing, nil
}

// validHost checks an Ingress rule's host as the API server does: empty
// (every host), a DNS subdomain, or a wildcard "*." followed by one; never
// an IP address.
func validHost(host string) error {
	var msgs []string
	switch {
	case host == "":
		return nil
	case net.ParseIP(host) != nil:
		msgs = []string{"must be a DNS name, not an IP address"}
	case strings.Contains(host, "*"):
		msgs = validation.IsWildcardDNS1123Subdomain(host)
	default:
		msgs = validation.IsDNS1123Subdomain(host)
	}
	if len(msgs) > 0 {
		return fmt.Errorf("%q is not a valid host: %s", host, strings.Join(msgs, "; "))
	}
	return nil
}

// errTaken is wrapped by claim's error for an Ingress that someone else
// made: the operator never overwrites it.
var errTaken = errors.New("exists and is not controlled by the service")

// errEarlierOwner is claim's error for an Ingress controlled by an earlier
// Service of the same name: the garbage collector deletes it, and its
// deletion reconciles the Service again.
var errEarlierOwner = errors.New("is controlled by an earlier service of the same name, which the garbage collector will delete")

// claim says whether the operator may write ing, as stored, for svc: nil
// when svc controls it (by UID), errEarlierOwner when a deleted Service of
// the same name does, and an error wrapping errTaken when anything else
// does, or nothing (an Ingress made by hand is not adopted).
func claim(ing *networkingv1.Ingress, svc *corev1.Service) error {
	if controller.IsControlledBy(ing, svc) {
		return nil
	}
	ref := controller.GetControllerOf(ing)
	if ref != nil && ref.APIVersion == "v1" && ref.Kind == "Service" && ref.Name == svc.Name {
		return errEarlierOwner
	}
	who := "no controller"
	if ref != nil {
		who = "controller " + ref.Kind + " " + ref.Name
	}
	return fmt.Errorf("ingress %s/%s %w (it has %s)", ing.Namespace, ing.Name, errTaken, who)
}

// apply makes ing (new, or as stored and claimed) match want, the result
// of desired for svc: it sets the controller reference to svc and the
// parts of the spec the operator owns: the rules, no default backend and
// no TLS (a hand edit of those is undone). The class is set only when the
// Service names one. Labels, annotations and status that others write are
// left alone, so that an Ingress already in line is not written.
func apply(ing, want *networkingv1.Ingress, svc *corev1.Service) error {
	if err := controller.SetControllerReference(svc, ing); err != nil {
		return err
	}
	spec := want.Spec.DeepCopy()
	ing.Spec.Rules = spec.Rules
	ing.Spec.DefaultBackend = nil
	ing.Spec.TLS = nil
	if spec.IngressClassName != nil {
		ing.Spec.IngressClassName = spec.IngressClassName
	}
	return nil
}
