package protodec

import (
	"reflect"
	"testing"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestStringsDoNotAliasInput(t *testing.T) {
	src := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "name", Labels: map[string]string{"k": "v"}}, BinaryData: map[string][]byte{"b": []byte("bytes")}}
	data, _ := src.Marshal()
	var got corev1.ConfigMap
	if err := Unmarshal(data, &got); err != nil {
		t.Fatal(err)
	}
	for i := range data {
		data[i] = 'X'
	}
	if !reflect.DeepEqual(src, &got) {
		t.Fatalf("decoded object changed with its input: %+v", got)
	}
}

func TestAllocations(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "pod-name", Namespace: "namespace", Labels: map[string]string{"app": "web-server", "tier": "frontend"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{
			{Name: "app-container", Image: "registry.example/app:v1", Args: []string{"--flag-one", "--flag-two", "--flag-three"}},
			{Name: "sidecar-container", Image: "registry.example/proxy:v2"},
		}}}
	data, _ := pod.Marshal()
	gen := testing.AllocsPerRun(100, func() { var p corev1.Pod; _ = p.Unmarshal(data) })
	ours := testing.AllocsPerRun(100, func() { var p corev1.Pod; _ = Unmarshal(data, &p) })
	t.Logf("allocations per decode: generated %.0f, protodec %.0f", gen, ours)
	if ours >= gen {
		t.Errorf("protodec allocates %.0f times, generated code %.0f", ours, gen)
	}
}

func TestUnsupported(t *testing.T) {
	type bad struct {
		X map[int]string `protobuf:"bytes,1,rep,name=x"`
	}
	if Supported(reflect.TypeFor[bad]()) {
		t.Error("map[int]string should not be supported")
	}
	if err := Unmarshal([]byte{}, &bad{}); err == nil {
		t.Error("Unmarshal of an unsupported type should fail")
	}
}

// FuzzDifferential decodes arbitrary bytes as a Pod with both decoders. It
// must never panic, and when both succeed the results must be equal. (The
// random-object differential tests are in ./difftest, so that this fuzz
// binary does not instrument all of k8s.io/api.)
func FuzzDifferential(f *testing.F) {
	for _, p := range []*corev1.Pod{examplePod(), {}} {
		b, _ := p.Marshal()
		f.Add(b)
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		var want, got corev1.Pod
		errWant := want.Unmarshal(data)
		errGot := Unmarshal(data, &got)
		if errWant == nil && errGot == nil && !reflect.DeepEqual(&want, &got) {
			t.Fatalf("decoders differ\nwant %+v\n got %+v", want, got)
		}
	})
}

func examplePod() *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "web-1", Namespace: "team-a", Labels: map[string]string{"app": "web"}, Annotations: map[string]string{"a": "b"}},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "registry.example/app:v1", Args: []string{"--x"},
			Env: []corev1.EnvVar{{Name: "K", Value: "V"}}, Ports: []corev1.ContainerPort{{ContainerPort: 80}}}}},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.1"},
	}
}

// TestListItemsHaveTheirOwnStrings checks that each item of a list has
// string blocks of its own.
func TestListItemsHaveTheirOwnStrings(t *testing.T) {
	list := corev1.PodList{Items: []corev1.Pod{*examplePod(), *examplePod(), *examplePod()}}
	data, _ := list.Marshal()
	var got corev1.PodList
	n, err := unmarshal(data, &got)
	if err != nil {
		t.Fatal(err)
	}
	if n != 3 || len(got.Items) != 3 || got.Items[2].Name != "web-1" {
		t.Fatalf("%d string blocks for a list of %d (with no strings of its own), want 3", n, len(got.Items))
	}
	pd, _ := examplePod().Marshal()
	var pod corev1.Pod
	if n, err := unmarshal(pd, &pod); err != nil || n != 1 {
		t.Fatalf("a Pod made %d blocks (%v), want 1", n, err)
	}
}

// TestOnlyStringsAreKept checks that decoding keeps the bytes of string
// fields, not the whole message: a Pod with large managedFields (bytes)
// keeps string blocks far smaller than its encoding.
func TestOnlyStringsAreKept(t *testing.T) {
	pod := examplePod()
	big := make([]byte, 16<<10)
	for i := range big {
		big[i] = 'x'
	}
	pod.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubectl", FieldsV1: &metav1.FieldsV1{Raw: big}}}
	data, _ := pod.Marshal()
	var got corev1.Pod
	blocks, size, err := unmarshalStats(data, &got, intern.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if size > 1024 || blocks != 1 {
		t.Fatalf("%d blocks of %d bytes kept for a %d-byte Pod with %d bytes of strings", blocks, size, len(data), 150)
	}
	if len(got.ManagedFields[0].FieldsV1.Raw) != len(big) {
		t.Fatal("managedFields lost")
	}
}
