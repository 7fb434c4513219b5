package shard

import (
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

func TestKey(t *testing.T) {
	yes := true
	widgets := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	cms := schema.GroupKind{Kind: "ConfigMap"}
	owned := func(ctrl *bool, apiVersion string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: "team-a", Name: "w1-config", OwnerReferences: []metav1.OwnerReference{
			{APIVersion: "v1", Kind: "Secret", Name: "other"},
			{APIVersion: apiVersion, Kind: "Widget", Name: "w1", Controller: ctrl},
		}}
	}
	for _, tc := range []struct {
		name string
		gk   schema.GroupKind
		obj  metav1.Object
		want string
	}{
		{"primary", widgets, &metav1.ObjectMeta{Namespace: "team-a", Name: "w1"}, "example.com/Widget/team-a/w1"},
		{"cluster-scoped", schema.GroupKind{Kind: "Node"}, &metav1.ObjectMeta{Name: "node-1"}, "/Node//node-1"},
		{"owned by its controller", cms, owned(&yes, "example.com/v1"), "example.com/Widget/team-a/w1"},
		{"owner that is not its controller", cms, owned(nil, "example.com/v1"), "/ConfigMap/team-a/w1-config"},
		{"controller with a malformed apiVersion", cms, owned(&yes, "a/b/c"), "/ConfigMap/team-a/w1-config"},
	} {
		if got := Key(tc.gk, tc.obj); got != tc.want {
			t.Errorf("%s: Key = %q, want %q", tc.name, got, tc.want)
		}
	}
}
