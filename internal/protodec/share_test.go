package protodec

import (
	"reflect"
	"runtime"
	"testing"
	"time"
	"unsafe"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

func managedPod(name string) *corev1.Pod {
	p := examplePod()
	p.Name = name
	p.Spec.SecurityContext = &corev1.PodSecurityContext{RunAsUser: new(int64(1000)), SupplementalGroups: []int64{1, 2}}
	p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate,
		FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:phase":{},"f:podIP":{}}}`)}}}
	return p
}

func decodeShared(t *testing.T, o intern.Options, p *corev1.Pod) *corev1.Pod {
	t.Helper()
	data, err := p.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.Pod
	if err := UnmarshalWith(data, &got, o); err != nil {
		t.Fatal(err)
	}
	if o.SkipManagedFields {
		p = p.DeepCopy()
		p.ManagedFields = nil
	}
	if !reflect.DeepEqual(p, &got) {
		t.Fatalf("decoded %+v\nwant %+v", got, p)
	}
	return &got
}

func TestSharing(t *testing.T) {
	tests := []struct {
		name         string
		opts         intern.Options
		structs, mfs bool // containers, labels and pointers shared; managed-fields blobs shared
	}{
		{"off", intern.Options{}, false, false},
		{"bytes", intern.Options{Share: intern.New()}, false, true},
		{"all", intern.Options{Share: intern.New(), Structs: true}, true, true},
	}
	for _, tc := range tests {
		t.Run(tc.name, func(t *testing.T) {
			// Parts met once are decoded into their object's own memory,
			// and cost the table no entry; met again, they are put in it.
			first := decodeShared(t, tc.opts, managedPod("first"))
			if tc.opts.Share != nil && tc.opts.Share.Len() != 0 {
				t.Errorf("the first object's parts took %d table entries", tc.opts.Share.Len())
			}
			a := decodeShared(t, tc.opts, managedPod("a"))
			b := decodeShared(t, tc.opts, managedPod("b"))
			if &first.Spec.Containers[0] == &a.Spec.Containers[0] || unsafe.SliceData(first.ManagedFields[0].FieldsV1.Raw) == unsafe.SliceData(a.ManagedFields[0].FieldsV1.Raw) {
				t.Error("the first object's parts, decoded in place, are shared")
			}
			if same := &a.Spec.Containers[0] == &b.Spec.Containers[0]; same != tc.structs {
				t.Errorf("containers shared: %t, want %t", same, tc.structs)
			}
			if same := reflect.ValueOf(a.Labels).UnsafePointer() == reflect.ValueOf(b.Labels).UnsafePointer(); same != tc.structs {
				t.Errorf("labels shared: %t, want %t", same, tc.structs)
			}
			if same := a.Spec.SecurityContext == b.Spec.SecurityContext; same != tc.structs {
				t.Errorf("security context shared: %t, want %t", same, tc.structs)
			}
			same := unsafe.SliceData(a.ManagedFields[0].FieldsV1.Raw) == unsafe.SliceData(b.ManagedFields[0].FieldsV1.Raw) ||
				a.ManagedFields[0].FieldsV1 == b.ManagedFields[0].FieldsV1
			if same != tc.mfs {
				t.Errorf("managed fields shared: %t, want %t", same, tc.mfs)
			}
			if unsafe.StringData(a.Name) == unsafe.StringData(b.Name) {
				t.Error("names share memory")
			}
			if c := a.Spec.Containers; tc.structs && cap(c) != len(c) {
				t.Errorf("shared slice has spare capacity %d > %d: an append would write into it", cap(c), len(c))
			}
		})
	}
}

// TestSharedValuesDoNotKeepTheirFirstObject checks that a shared part has
// string blocks of its own: the containers b takes from the table must not
// keep alive the block that holds a's name.
func TestSharedValuesDoNotKeepTheirFirstObject(t *testing.T) {
	o := intern.Options{Share: intern.New(), Structs: true}
	decodeShared(t, o, managedPod("first")) // met once: not put in the table
	a := decodeShared(t, o, managedPod("a"))
	b := decodeShared(t, o, managedPod("b"))
	if &a.Spec.Containers[0] != &b.Spec.Containers[0] {
		t.Fatal("containers not shared")
	}
	freed := make(chan struct{})
	runtime.AddCleanup(unsafe.StringData(a.Name), func(c chan struct{}) { close(c) }, freed)
	a = nil
	deadline := time.Now().Add(30 * time.Second)
	for done := false; !done; {
		runtime.GC()
		select {
		case <-freed:
			done = true
		case <-time.After(10 * time.Millisecond):
			if time.Now().After(deadline) {
				t.Fatal("a's strings are still alive: b's shared containers keep them")
			}
		}
	}
	runtime.KeepAlive(b)
}

func TestSkipManagedFields(t *testing.T) {
	got := decodeShared(t, intern.Options{SkipManagedFields: true}, managedPod("a"))
	if got.ManagedFields != nil {
		t.Fatal("managedFields decoded")
	}
}

// TestTableEntriesDie checks that entries go with the last object using
// them.
func TestTableEntriesDie(t *testing.T) {
	tab := intern.New()
	o := intern.Options{Share: tab, Structs: true}
	pods := []*corev1.Pod{decodeShared(t, o, managedPod("a")), decodeShared(t, o, managedPod("b"))}
	if tab.Len() == 0 {
		t.Fatal("nothing shared")
	}
	runtime.KeepAlive(pods)
	pods = nil
	deadline := time.Now().Add(30 * time.Second)
	for tab.Len() > 0 {
		if time.Now().After(deadline) {
			t.Fatalf("%d entries left after their objects were collected", tab.Len())
		}
		runtime.GC()
		time.Sleep(10 * time.Millisecond)
	}
}

// TestMostlyUniqueFieldsStopSharing checks that a field whose values never
// repeat stops being looked up.
func TestMostlyUniqueFieldsStopSharing(t *testing.T) {
	o := intern.Options{Share: intern.New(), Structs: true, Stats: &intern.Stats{}}
	var keep []*corev1.Pod
	for i := range 8192 { // twice the table's warmup
		p := managedPod("p")
		p.Spec.Containers[0].Image = "img:" + string(rune('a'+i%26)) + time.Duration(i).String()
		keep = append(keep, decodeShared(t, o, p))
	}
	f := planFor(reflect.TypeFor[corev1.PodSpec]()).byNum[2] // containers
	d := decoder{opts: o}
	if d.sharing(f) {
		t.Fatal("containers still shared after 8,192 lookups of unique values")
	}
	if d := (decoder{opts: intern.Options{Share: o.Share, Structs: true, Stats: &intern.Stats{}}}); !d.sharing(f) {
		t.Fatal("a decoder with stats of its own does not share containers")
	}
	runtime.KeepAlive(keep)
}

// TestRepeatedFieldDoesNotChangeASharedValue checks a message whose
// metadata comes twice (protobuf merges the second into the first): the
// labels map taken from the table must not get the second's labels.
func TestRepeatedFieldDoesNotChangeASharedValue(t *testing.T) {
	o := intern.Options{Share: intern.New(), Structs: true}
	first := decodeShared(t, o, managedPod("a"))
	data, _ := managedPod("b").Marshal()
	extra, _ := (&corev1.Pod{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"extra": "x"}},
		Spec: corev1.PodSpec{SecurityContext: &corev1.PodSecurityContext{RunAsGroup: new(int64(7))}}}).Marshal()
	data = append(data, extra...)
	var want, got corev1.Pod
	if err := want.Unmarshal(data); err != nil {
		t.Fatal(err)
	}
	if err := UnmarshalWith(data, &got, o); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(&want, &got) {
		t.Fatalf("decoded %+v\nwant %+v", got, want)
	}
	if first.Labels["extra"] != "" || first.Spec.SecurityContext.RunAsGroup != nil {
		t.Fatalf("the second metadata changed the shared values of another Pod: labels %v, security context %+v", first.Labels, first.Spec.SecurityContext)
	}
}

// TestStringsShared checks that, with Strings, two objects hold one copy
// of their equal strings (fields, map keys and values, list elements), and
// that without it each holds its own.
func TestStringsShared(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts intern.Options
		same bool
	}{
		{"strings", intern.Options{Strings: new(intern.Strings), Stats: &intern.Stats{}}, true},
		{"strings and table", intern.Options{Share: intern.New(), Strings: new(intern.Strings)}, true},
		{"none", intern.Options{}, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			a := decodeShared(t, tc.opts, managedPod("a"))
			b := decodeShared(t, tc.opts, managedPod("b"))
			pairs := map[string][2]string{
				"namespace": {a.Namespace, b.Namespace},
				"image":     {a.Spec.Containers[0].Image, b.Spec.Containers[0].Image},
				"arg":       {a.Spec.Containers[0].Args[0], b.Spec.Containers[0].Args[0]},
				"phase":     {string(a.Status.Phase), string(b.Status.Phase)},
				"manager":   {a.ManagedFields[0].Manager, b.ManagedFields[0].Manager},
			}
			for k, v := range a.Labels {
				for k2, v2 := range b.Labels {
					if k == k2 {
						pairs["label key "+k] = [2]string{k, k2}
						pairs["label value "+k] = [2]string{v, v2}
					}
				}
			}
			for what, p := range pairs {
				if same := unsafe.StringData(p[0]) == unsafe.StringData(p[1]); same != tc.same {
					t.Errorf("%s %q: one copy %v, want %v", what, p[0], same, tc.same)
				}
			}
			if unsafe.StringData(a.Name) == unsafe.StringData(b.Name) {
				t.Error("two names share bytes")
			}
		})
	}
}

// TestPartsRepeatedInOneObject checks that a part an object repeats (a
// Deployment's labels and its template's) is one value
// even when the table has never met it, and costs the table no entry.
func TestPartsRepeatedInOneObject(t *testing.T) {
	labels := map[string]string{"app": "web", "tier": "front"}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "team-a", Labels: labels},
		Spec: appsv1.DeploymentSpec{Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}}},
	}
	data, err := d.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	o := intern.Options{Share: intern.New(), Structs: true}
	var got appsv1.Deployment
	if err := UnmarshalWith(data, &got, o); err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(d, &got) {
		t.Fatalf("decoded %+v", got)
	}
	ptr := func(m map[string]string) unsafe.Pointer { return reflect.ValueOf(m).UnsafePointer() }
	// A part is known by its encoding, field numbers included: the
	// selector's labels (field 1 of a LabelSelector) are not the
	// metadata's (field 11 of an ObjectMeta).
	if ptr(got.Labels) != ptr(got.Spec.Template.Labels) {
		t.Error("the labels an object repeats are not one map")
	}
	if n := o.Share.Len(); n != 0 {
		t.Errorf("the table took %d entries for parts met in one object only", n)
	}
}

// TestChangedInPlace: a part shared by decoded objects and changed in
// place through one of them is found in the other by the table's Changed,
// which a write checks; the parts as decoded are not.
func TestChangedInPlace(t *testing.T) {
	for _, tc := range []struct {
		name   string
		change func(p *corev1.Pod)
		path   string
	}{
		{"none", func(*corev1.Pod) {}, ""},
		{"own name", func(p *corev1.Pod) { p.Name = "c" }, ""},
		{"container image", func(p *corev1.Pod) { p.Spec.Containers[0].Image = "changed" }, ".Spec.Containers"},
		{"label", func(p *corev1.Pod) { p.Labels["app"] = "changed" }, ".ObjectMeta.Labels"},
		{"security context", func(p *corev1.Pod) { p.Spec.SecurityContext.SupplementalGroups[0] = 7 }, ".Spec.SecurityContext"},
		{"managed fields blob", func(p *corev1.Pod) { p.ManagedFields[0].FieldsV1.Raw[2] = 'x' }, ".ObjectMeta.ManagedFields[0].FieldsV1"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := intern.Options{Share: intern.New(), Structs: true}
			decodeShared(t, o, managedPod("first"))
			a, b := decodeShared(t, o, managedPod("a")), decodeShared(t, o, managedPod("b"))
			if path, changed := o.Share.Changed(reflect.ValueOf(b)); changed {
				t.Fatalf("a part of b as decoded counts as changed, at %s", path)
			}
			tc.change(a)
			path, changed := o.Share.Changed(reflect.ValueOf(b))
			if changed != (tc.path != "") || path != tc.path {
				t.Errorf("Changed(b) = %q, %v; want %q, %v", path, changed, tc.path, tc.path != "")
			}
			if path, changed := o.Share.Changed(reflect.ValueOf(b.DeepCopy())); changed {
				t.Errorf("a copy of b counts as changed, at %s", path)
			}
		})
	}
}
