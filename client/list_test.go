package client

import (
	"reflect"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestListProtobufRoundTrip(t *testing.T) {
	in := corev1.PodList{
		ListMeta: metav1.ListMeta{ResourceVersion: "42", Continue: "tok"},
		Items: []corev1.Pod{
			{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: map[string]string{"x": "y"}}},
			{ObjectMeta: metav1.ObjectMeta{Name: "b"}, Spec: corev1.PodSpec{NodeName: "n1"}},
		},
	}
	data, err := in.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	l := &List[*corev1.Pod]{newItem: func() *corev1.Pod { return new(corev1.Pod) }}
	if err := l.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	if l.ResourceVersion != "42" || l.Continue != "tok" || len(l.Items) != 2 {
		t.Fatalf("decoded %+v", l)
	}
	for i := range in.Items {
		if !reflect.DeepEqual(&in.Items[i], l.Items[i]) {
			t.Errorf("item %d: %+v != %+v", i, l.Items[i], in.Items[i])
		}
	}
	// Truncated input is an error, never a panic.
	for n := range len(data) {
		l := &List[*corev1.Pod]{newItem: func() *corev1.Pod { return new(corev1.Pod) }}
		_ = l.Unmarshal(data[:n])
	}
}
