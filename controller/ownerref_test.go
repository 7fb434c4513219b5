package controller

import (
	"errors"
	"reflect"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
)

// widget is a custom type: its kind is known only from its TypeMeta.
type widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
}

func (w *widget) DeepCopyObject() runtime.Object {
	cp := *w
	w.ObjectMeta.DeepCopyInto(&cp.ObjectMeta)
	return &cp
}

func deployment(ns, name string, uid types.UID) *appsv1.Deployment {
	return &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, UID: uid}}
}

func configMap(ns, name string, refs ...metav1.OwnerReference) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name, OwnerReferences: refs}}
}

func controllerRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid, Controller: new(true), BlockOwnerDeletion: new(true)}
}

func plainRef(apiVersion, kind, name string, uid types.UID) metav1.OwnerReference {
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: name, UID: uid}
}

func TestSetControllerReference(t *testing.T) {
	clusterRole := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "admin", UID: "cr-1"}}
	u := &unstructured.Unstructured{}
	u.SetAPIVersion("example.com/v2")
	u.SetKind("Gadget")
	u.SetNamespace("ns")
	u.SetName("g")
	u.SetUID("g-1")

	tests := []struct {
		name    string
		owner   client.Object
		owned   client.Object
		want    []metav1.OwnerReference // nil when an error is expected
		wantErr any                     // pointer to the error type, or a sentinel
	}{
		{
			name:  "typed owner without TypeMeta",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c"),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "unstructured owner",
			owner: u, owned: configMap("ns", "c"),
			want: []metav1.OwnerReference{controllerRef("example.com/v2", "Gadget", "g", "g-1")},
		},
		{
			name: "custom owner with its TypeMeta",
			owner: &widget{TypeMeta: metav1.TypeMeta{APIVersion: "example.com/v1", Kind: "Widget"},
				ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1"}}, owned: configMap("ns", "c"),
			want: []metav1.OwnerReference{controllerRef("example.com/v1", "Widget", "w", "w-1")},
		},
		{
			name:  "other owners kept",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", plainRef("v1", "ConfigMap", "x", "x-1")),
			want: []metav1.OwnerReference{plainRef("v1", "ConfigMap", "x", "x-1"), controllerRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "same owner again is a no-op",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", controllerRef("apps/v1", "Deployment", "web", "d-1")),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "same owner at another version and UID is refreshed",
			owner: deployment("ns", "web", "d-2"), owned: configMap("ns", "c", controllerRef("apps/v1beta1", "Deployment", "web", "d-1")),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "d-2")},
		},
		{
			name:  "a plain reference to the owner becomes the controller",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", plainRef("apps/v1", "Deployment", "web", "d-1")),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "cluster-scoped owner of a namespaced object",
			owner: clusterRole, owned: configMap("ns", "c"),
			want: []metav1.OwnerReference{controllerRef("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", "cr-1")},
		},
		{
			name:  "cluster-scoped owner of a cluster-scoped object",
			owner: clusterRole, owned: &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "b"}},
			want: []metav1.OwnerReference{controllerRef("rbac.authorization.k8s.io/v1", "ClusterRole", "admin", "cr-1")},
		},
		{
			name:  "another controller",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", controllerRef("apps/v1", "Deployment", "api", "d-9")),
			wantErr: new(*AlreadyOwnedError),
		},
		{
			name:  "another controller of the same name but another kind",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", controllerRef("apps/v1", "StatefulSet", "web", "s-1")),
			wantErr: new(*AlreadyOwnedError),
		},
		{
			name:  "owner in another namespace",
			owner: deployment("a", "web", "d-1"), owned: configMap("b", "c"),
			wantErr: new(*OwnerScopeError),
		},
		{
			name:  "namespaced owner of a cluster-scoped object",
			owner: deployment("a", "web", "d-1"), owned: &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "r"}},
			wantErr: new(*OwnerScopeError),
		},
		{
			name:  "owner without UID",
			owner: deployment("ns", "web", ""), owned: configMap("ns", "c"),
			wantErr: ErrOwnerNotStored,
		},
		{
			name:  "owner without name",
			owner: deployment("ns", "", "d-1"), owned: configMap("ns", "c"),
			wantErr: ErrOwnerNotStored,
		},
		{
			name:  "owner of unknown kind",
			owner: &widget{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: "w", UID: "w-1"}}, owned: configMap("ns", "c"),
			wantErr: ErrUnknownKind,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.owned.GetOwnerReferences()
			err := SetControllerReference(tt.owner, tt.owned)
			checkRefResult(t, err, tt.wantErr, tt.owned, before, tt.want)
		})
	}
}

// checkRefResult checks an owner-reference call: the error it expected, or
// the references it expected; on error, owned must be unchanged.
func checkRefResult(t *testing.T, err error, wantErr any, owned metav1.Object, before, want []metav1.OwnerReference) {
	t.Helper()
	switch w := wantErr.(type) {
	case nil:
		if err != nil {
			t.Fatal(err)
		}
		if got := owned.GetOwnerReferences(); !reflect.DeepEqual(got, want) {
			t.Fatalf("ownerReferences =\n%+v\nwant\n%+v", got, want)
		}
		return
	case error:
		if !errors.Is(err, w) {
			t.Fatalf("error = %v, want %v", err, w)
		}
	default:
		if err == nil || !errors.As(err, w) {
			t.Fatalf("error = %v, want a %T", err, reflect.ValueOf(w).Elem().Interface())
		}
	}
	if got := owned.GetOwnerReferences(); !reflect.DeepEqual(got, before) {
		t.Fatalf("ownerReferences changed on error: %+v, was %+v", got, before)
	}
}

func TestAlreadyOwnedErrorNamesTheController(t *testing.T) {
	existing := controllerRef("apps/v1", "Deployment", "api", "d-9")
	err := SetControllerReference(deployment("ns", "web", "d-1"), configMap("ns", "c", existing))
	var ae *AlreadyOwnedError
	if !errors.As(err, &ae) {
		t.Fatalf("error = %v, want *AlreadyOwnedError", err)
	}
	if ae.Object != "ns/c" || !reflect.DeepEqual(ae.Owner, existing) {
		t.Fatalf("AlreadyOwnedError = %+v", ae)
	}
	if ae.Error() == "" {
		t.Fatal("empty message")
	}
}

func TestSetOwnerReference(t *testing.T) {
	tests := []struct {
		name    string
		owner   client.Object
		owned   client.Object
		want    []metav1.OwnerReference
		wantErr any
	}{
		{
			name:  "added",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c"),
			want: []metav1.OwnerReference{plainRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "next to a controller of another owner",
			owner: deployment("ns", "web", "d-1"), owned: configMap("ns", "c", controllerRef("apps/v1", "Deployment", "api", "d-9")),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "api", "d-9"), plainRef("apps/v1", "Deployment", "web", "d-1")},
		},
		{
			name:  "refreshing the controller reference keeps it the controller",
			owner: deployment("ns", "web", "d-2"), owned: configMap("ns", "c", controllerRef("apps/v1", "Deployment", "web", "d-1")),
			want: []metav1.OwnerReference{controllerRef("apps/v1", "Deployment", "web", "d-2")},
		},
		{
			name:  "owner in another namespace",
			owner: deployment("a", "web", "d-1"), owned: configMap("b", "c"),
			wantErr: new(*OwnerScopeError),
		},
		{
			name:  "owner without UID",
			owner: deployment("ns", "web", ""), owned: configMap("ns", "c"),
			wantErr: ErrOwnerNotStored,
		},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			before := tt.owned.GetOwnerReferences()
			err := SetOwnerReference(tt.owner, tt.owned)
			checkRefResult(t, err, tt.wantErr, tt.owned, before, tt.want)
		})
	}
}

func TestOwnerReferenceNilObjects(t *testing.T) {
	var nilCM *corev1.ConfigMap
	if err := SetControllerReference(nilCM, configMap("ns", "c")); err == nil {
		t.Error("SetControllerReference with a nil owner: no error")
	}
	if err := SetOwnerReference(deployment("ns", "web", "d-1"), nilCM); err == nil {
		t.Error("SetOwnerReference with a nil owned: no error")
	}
	if GetControllerOf(nilCM) != nil || GetControllerOf(nil) != nil {
		t.Error("GetControllerOf(nil) != nil")
	}
	if IsControlledBy(nilCM, deployment("ns", "web", "d-1")) || IsControlledBy(configMap("ns", "c"), nil) {
		t.Error("IsControlledBy with nil objects: true")
	}
}

var widgetGVK = schema.GroupVersionKind{Group: "example.com", Version: "v1", Kind: "Widget"}

func TestOwnerScopeErrorMessage(t *testing.T) {
	for _, e := range []*OwnerScopeError{
		{Owner: widgetGVK, OwnerNamespace: "a", OwnerName: "w", OwnedNamespace: "b", OwnedName: "c"},
		{Owner: widgetGVK, OwnerNamespace: "a", OwnerName: "w", OwnedName: "r"},
	} {
		if e.Error() == "" {
			t.Errorf("%+v: empty message", e)
		}
	}
}

func TestGetControllerOf(t *testing.T) {
	ctrl := controllerRef("apps/v1", "Deployment", "web", "d-1")
	notCtrl := plainRef("v1", "ConfigMap", "x", "x-1")
	falseCtrl := notCtrl
	falseCtrl.Controller = new(false)
	tests := []struct {
		name string
		refs []metav1.OwnerReference
		want *metav1.OwnerReference
	}{
		{"none", nil, nil},
		{"only plain references", []metav1.OwnerReference{notCtrl, falseCtrl}, nil},
		{"controller among others", []metav1.OwnerReference{notCtrl, ctrl}, &ctrl},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			obj := configMap("ns", "c", tt.refs...)
			got := GetControllerOf(obj)
			if !reflect.DeepEqual(got, tt.want) {
				t.Fatalf("GetControllerOf = %+v, want %+v", got, tt.want)
			}
			if got != nil {
				got.Name = "changed"
				if obj.OwnerReferences[len(obj.OwnerReferences)-1].Name == "changed" {
					t.Fatal("GetControllerOf returned a pointer into the object")
				}
			}
		})
	}
}

func TestIsControlledBy(t *testing.T) {
	owner := deployment("ns", "web", "d-1")
	tests := []struct {
		name  string
		owned *corev1.ConfigMap
		owner metav1.Object
		want  bool
	}{
		{"controlled", configMap("ns", "c", controllerRef("apps/v1", "Deployment", "web", "d-1")), owner, true},
		{"plain owner only", configMap("ns", "c", plainRef("apps/v1", "Deployment", "web", "d-1")), owner, false},
		{"same name, recreated owner", configMap("ns", "c", controllerRef("apps/v1", "Deployment", "web", "d-0")), owner, false},
		{"no owner", configMap("ns", "c"), owner, false},
		{"owner without UID", configMap("ns", "c", controllerRef("apps/v1", "Deployment", "web", "")), deployment("ns", "web", ""), false},
	}
	for _, tt := range tests {
		if got := IsControlledBy(tt.owned, tt.owner); got != tt.want {
			t.Errorf("%s: IsControlledBy = %v, want %v", tt.name, got, tt.want)
		}
	}
}
