package client

import (
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/rest"
)

var _ rest.ListStream = (*List[*corev1.Pod])(nil)

// TestListTakesItems checks the List's side of streaming: items to decode
// into, for pointer and value item types, with and without a constructor.
func TestListTakesItems(t *testing.T) {
	made := 0
	withNew := &List[*corev1.Pod]{newItem: func() *corev1.Pod { made++; return new(corev1.Pod) }}
	withNew.AddItem(withNew.NewItem())
	if made != 1 || len(withNew.Items) != 1 || withNew.Items[0] == nil || !withNew.HasProtobuf() {
		t.Errorf("with a constructor: made %d, items %v", made, withNew.Items)
	}
	var ptrs List[*corev1.Pod]
	item := ptrs.NewItem().(*corev1.Pod)
	item.Name = "a"
	ptrs.AddItem(item)
	if len(ptrs.Items) != 1 || ptrs.Items[0].Name != "a" {
		t.Errorf("pointer items: %v", ptrs.Items)
	}
	var values List[corev1.Pod]
	v := values.NewItem().(*corev1.Pod)
	v.Name = "b"
	values.AddItem(v)
	if len(values.Items) != 1 || values.Items[0].Name != "b" {
		t.Errorf("value items: %v", values.Items)
	}
	var u List[*unstructured.Unstructured]
	if u.HasProtobuf() {
		t.Error("a list of unstructured objects claims a protobuf form")
	}
}

func TestFillKinds(t *testing.T) {
	item := func(apiVersion, kind string) *unstructured.Unstructured {
		u := &unstructured.Unstructured{Object: map[string]any{}}
		if apiVersion != "" {
			u.SetAPIVersion(apiVersion)
		}
		if kind != "" {
			u.SetKind(kind)
		}
		return u
	}
	l := &List[*unstructured.Unstructured]{Items: []*unstructured.Unstructured{item("", ""), item("example.com/v1", "Foo")}}
	l.APIVersion, l.Kind = "v1", "PodList"
	if err := fillKinds(l); err != nil {
		t.Fatal(err)
	}
	if got := l.Items[0].GroupVersionKind().String(); got != "/v1, Kind=Pod" {
		t.Errorf("item without a kind: %s", got)
	}
	if got := l.Items[1].GroupVersionKind().String(); got != "example.com/v1, Kind=Foo" {
		t.Errorf("item with a kind: %s", got)
	}
	noKind := &List[*unstructured.Unstructured]{Items: []*unstructured.Unstructured{item("", "")}}
	if err := fillKinds(noKind); err == nil {
		t.Error("an item with no kind in a list with none: no error")
	}
}
