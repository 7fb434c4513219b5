package controller

import (
	"slices"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// TestOwners: Owns maps an object to its controller owner of the
// controller's kind; OwnsAny to every owner of that kind.
func TestOwners(t *testing.T) {
	c := &Controller[*appsv1.Deployment]{kind: appsv1.SchemeGroupVersion.WithKind("Deployment")}
	yes := true
	secret := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "shared", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "1"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "api", UID: "2", Controller: &yes},
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "3"},
		{APIVersion: "example.com/v1", Kind: "Deployment", Name: "other-group", UID: "4"},
	}}}
	got := c.owners(secret)
	want := []Request{{Namespace: "ns", Name: "web"}, {Namespace: "ns", Name: "api"}}
	if !slices.Equal(got, want) {
		t.Errorf("owners: %v, want %v", got, want)
	}
	if req, _, ok := c.owner(secret); !ok || req != (Request{Namespace: "ns", Name: "api"}) {
		t.Errorf("owner: %v %v, want the controller owner ns/api", req, ok)
	}
	if got := c.owners(&corev1.Secret{}); len(got) != 0 {
		t.Errorf("no owners: %v", got)
	}
}
