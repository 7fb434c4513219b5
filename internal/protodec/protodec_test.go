package protodec

import (
	"errors"
	"fmt"
	"reflect"
	"runtime"
	"testing"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"
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
// must never panic; the decoders must agree on whether the bytes decode
// (see agree), and when both succeed the results must be equal. (The
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
		if agree(t, data, reflect.TypeFor[corev1.Pod](), errWant, errGot) && !reflect.DeepEqual(&want, &got) {
			t.Fatalf("decoders differ\nwant %+v\n got %+v", want, got)
		}
		// At a depth limit below a Pod's most (14 levels, see
		// difftest's TestAPITypesDepth), the same result or ErrTooDeep;
		// at 14, always the same result.
		for _, limit := range []int{1 + len(data)%13, 14} {
			var lim corev1.Pod
			errLim := unmarshalWithLimit(data, &lim, intern.Options{}, limit)
			switch {
			case errGot != nil:
				if errLim == nil {
					t.Fatalf("limit %d: decoded what fails without a limit (%v)", limit, errGot)
				}
			case errors.Is(errLim, ErrTooDeep) && limit < 14:
			case errLim != nil:
				t.Fatalf("limit %d: %v", limit, errLim)
			case !reflect.DeepEqual(&got, &lim):
				t.Fatalf("limit %d: decoded differently\nwant %+v\n got %+v", limit, got, lim)
			}
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

// TestSizerFitsBlocks checks that with a Sizer, once it has learnt from a
// few objects of one shape, each object gets one string block that fits
// its own strings, where the fixed first block of 512 bytes would leave
// most of it unused. The objects' managed-fields blobs, owner references
// and labels come from the table, so their bytes hold no strings of the
// object's own.
func TestSizerFitsBlocks(t *testing.T) {
	blob := make([]byte, 300)
	for i := range blob {
		blob[i] = 'f'
	}
	cm := func(i int) *corev1.ConfigMap {
		return &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{
				Name: fmt.Sprintf("shelf-%04d-a", i), Namespace: "bench", UID: types.UID(fmt.Sprintf("0c5e3a55-1b7e-4b7e-9d0c-%012d", i)), ResourceVersion: fmt.Sprint(100000 + i),
				Labels:          map[string]string{"shard.loom.dev/bench": "r1"},
				OwnerReferences: []metav1.OwnerReference{{APIVersion: "bench.loom.dev/v1", Kind: "Shelf", Name: "owner", UID: "0c5e3a55-1b7e-4b7e-9d0c-000000000000"}},
				ManagedFields:   []metav1.ManagedFieldsEntry{{Manager: "replica", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: blob}}},
			},
			Data: map[string]string{"value": fmt.Sprint(i)},
		}
	}
	// The strings each object keeps of its own.
	own := func(c *corev1.ConfigMap) int {
		m := c.ManagedFields[0]
		return len(c.Name) + len(c.Namespace) + len(c.UID) + len(c.ResourceVersion) + len(m.Manager) + len(m.Operation) + len(m.APIVersion) + len(m.FieldsType) + len("value") + len(c.Data["value"])
	}
	for _, tc := range []struct {
		name  string
		sizer *intern.Sizer
	}{{"fixed first block", nil}, {"sizer", &intern.Sizer{}}} {
		t.Run(tc.name, func(t *testing.T) {
			opts := intern.Options{Share: intern.New(), Structs: true, Sizer: tc.sizer}
			var keep []*corev1.ConfigMap // keep the shared parts alive
			for i := range 40 {
				src := cm(i)
				data, _ := src.Marshal()
				got := &corev1.ConfigMap{}
				blocks, size, err := unmarshalStats(data, got, opts)
				if err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(src, got) {
					t.Fatalf("object %d decoded as %+v", i, got)
				}
				keep = append(keep, got)
				if i == 39 {
					t.Logf("last object: %d block(s), %d bytes, for %d bytes of strings (encoding %d bytes)", blocks, size, own(src), len(data))
				}
				if i < 8 {
					continue // learning
				}
				want := own(src)
				fits := blocks == 1 && size <= want+want/4+48
				if tc.sizer != nil && !fits {
					t.Errorf("object %d: %d block(s) of %d bytes in all for %d bytes of strings", i, blocks, size, want)
				}
				if tc.sizer == nil && fits {
					t.Errorf("object %d: %d bytes for %d bytes of strings without a sizer: the test no longer shows the fixed block's waste", i, size, want)
				}
			}
			runtime.KeepAlive(keep)
		})
	}
}
