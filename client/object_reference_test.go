package client_test

import (
	"errors"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

// widget is a custom type that no table knows until a scheme has it.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata"`
}

func (w *widget) DeepCopyObject() runtime.Object { c := *w; return &c }

func TestReferenceTo(t *testing.T) {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "web", UID: "u1", ResourceVersion: "7"}}
	ref, err := client.ReferenceTo(d, nil)
	if err != nil {
		t.Fatal(err)
	}
	if ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.Namespace != "ns" || ref.Name != "web" || ref.UID != "u1" || ref.ResourceVersion != "7" {
		t.Errorf("a built-in type's reference: %+v", ref)
	}

	w := &widget{ObjectMeta: metav1.ObjectMeta{Name: "w"}}
	var unknown *client.UnknownTypeError
	if _, err := client.ReferenceTo(w, nil); !errors.As(err, &unknown) {
		t.Errorf("a type no one knows: %v, want *UnknownTypeError", err)
	}
	scheme := runtime.NewScheme()
	gv := schema.GroupVersion{Group: "example.com", Version: "v1"}
	scheme.AddKnownTypeWithName(gv.WithKind("Widget"), &widget{})
	if ref, err := client.ReferenceTo(w, scheme); err != nil || ref.APIVersion != "example.com/v1" || ref.Kind != "Widget" {
		t.Errorf("from the scheme: %+v, %v", ref, err)
	}
}
