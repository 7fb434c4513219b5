package shard

import (
	"maps"
	"strconv"
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

func TestSetBucket(t *testing.T) {
	yes := true
	widgets := schema.GroupKind{Group: "example.com", Kind: "Widget"}
	cms := schema.GroupKind{Kind: "ConfigMap"}
	label := BucketLabel("r")
	bucketOf := func(key string) string { return strconv.Itoa(Bucket(key)) }
	ownedBy := func(name, apiVersion string) *metav1.ObjectMeta {
		return &metav1.ObjectMeta{Namespace: "team-a", Name: name, OwnerReferences: []metav1.OwnerReference{
			{APIVersion: apiVersion, Kind: "Widget", Name: "w1", Controller: &yes},
		}}
	}
	for _, tc := range []struct {
		name string
		gk   schema.GroupKind
		obj  *metav1.ObjectMeta
		want string // "" for no label
	}{
		{"primary", widgets, &metav1.ObjectMeta{Namespace: "team-a", Name: "w1"}, bucketOf("example.com/Widget/team-a/w1")},
		{"owned, its owner's bucket", cms, ownedBy("w1-config", "example.com/v1"), bucketOf("example.com/Widget/team-a/w1")},
		{"owned, generateName", cms, ownedBy("", "example.com/v1"), bucketOf("example.com/Widget/team-a/w1")},
		{"generateName, no owner", widgets, &metav1.ObjectMeta{Namespace: "team-a", GenerateName: "w-"}, ""},
		{"generateName, owner's apiVersion malformed", cms, ownedBy("", "a/b/c"), ""},
		{"wrong label corrected", widgets, &metav1.ObjectMeta{Namespace: "team-a", Name: "w1", Labels: map[string]string{label: "7", "app": "x"}},
			bucketOf("example.com/Widget/team-a/w1")},
	} {
		t.Run(tc.name, func(t *testing.T) {
			shared := tc.obj.Labels
			before := maps.Clone(shared)
			SetBucket("r", tc.gk, tc.obj)
			got, ok := tc.obj.Labels[label]
			if got != tc.want || ok != (tc.want != "") {
				t.Errorf("label %q (set %v), want %q", got, ok, tc.want)
			}
			if !maps.Equal(shared, before) {
				t.Errorf("the labels map the object had was changed in place: %v, was %v", shared, before)
			}
			for k, v := range before {
				if k != label && tc.obj.Labels[k] != v {
					t.Errorf("label %s = %q, want %q kept", k, tc.obj.Labels[k], v)
				}
			}
		})
	}
}
