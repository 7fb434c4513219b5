package rest

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"strconv"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utiljson "k8s.io/apimachinery/pkg/util/json"

	"github.com/loom-k8s/loom/internal/intern"
)

// testList is a ListStream of T (*corev1.Pod, *unstructured.Unstructured).
type testList[T any] struct {
	metav1.TypeMeta
	metav1.ListMeta
	Items   []T
	newItem func() T
}

func (l *testList[T]) StreamMeta() (*metav1.TypeMeta, *metav1.ListMeta) {
	return &l.TypeMeta, &l.ListMeta
}
func (l *testList[T]) NewItem() any      { return l.newItem() }
func (l *testList[T]) AddItem(item any)  { l.Items = append(l.Items, item.(T)) }
func (l *testList[T]) HasProtobuf() bool { _, ok := l.NewItem().(protoUnmarshaler); return ok }

func podList() *testList[*corev1.Pod] {
	return &testList[*corev1.Pod]{newItem: func() *corev1.Pod { return new(corev1.Pod) }}
}

func unstructuredList() *testList[*unstructured.Unstructured] {
	return &testList[*unstructured.Unstructured]{newItem: func() *unstructured.Unstructured { return new(unstructured.Unstructured) }}
}

// samplePodList returns n distinct Pods: far more bytes than the stream's
// first buffer, so that items are decoded from a buffer that is reused.
func samplePodList(n int) *corev1.PodList {
	l := &corev1.PodList{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "PodList"},
		ListMeta: metav1.ListMeta{ResourceVersion: "4242", Continue: "next-page"}}
	for i := range n {
		p := testPod(fmt.Sprintf("pod-%04d", i), strconv.Itoa(100+i))
		p.TypeMeta = metav1.TypeMeta{}
		p.Labels = map[string]string{"n": strconv.Itoa(i), "app": "web"}
		p.ManagedFields = []metav1.ManagedFieldsEntry{{Manager: fmt.Sprintf("m%d", i%7), Operation: metav1.ManagedFieldsOperationApply, FieldsType: "FieldsV1",
			Time:     &p.CreationTimestamp,
			FieldsV1: &metav1.FieldsV1{Raw: fmt.Appendf(nil, `{"f:metadata":{"f:labels":{"f:n%04d":{}}}}`, i)}}}
		p.Spec.Containers[0].Image = fmt.Sprintf("registry.example/app-%d:v1", i)
		p.Status.Conditions = []corev1.PodCondition{{Type: corev1.PodReady, Status: corev1.ConditionTrue, LastTransitionTime: p.CreationTimestamp}}
		l.Items = append(l.Items, *p)
	}
	return l
}

// always is an intern.Options.Cached that always looks up with lookup.
func always(lookup func(namespace, name, resourceVersion string) any) func() func(namespace, name, resourceVersion string) any {
	return func() func(namespace, name, resourceVersion string) any { return lookup }
}

// streamList decodes the list in src, "protobuf" or "json", into l.
func streamList(format string, src io.Reader, l ListStream, o intern.Options) error {
	f := &frames{src: src, max: DefaultMaxFrameSize}
	if format == "protobuf" {
		return streamProtoList(f, l, o)
	}
	return streamJSONList(f, l, o)
}

func protoListBody(t testing.TB, l *corev1.PodList) []byte {
	return protoObject(t, "v1", "PodList", l)
}

func jsonListBody(t testing.TB, l *corev1.PodList) []byte {
	b, err := json.Marshal(l)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestListStreamDecodes decodes lists of both formats item by item,
// whole and one byte per read, with and without sharing, and compares
// them with the reference decoders.
func TestListStreamDecodes(t *testing.T) {
	want := samplePodList(300)
	bodies := map[string][]byte{"protobuf": protoListBody(t, want), "json": jsonListBody(t, want)}
	for format, body := range bodies {
		for _, oneByte := range []bool{false, true} {
			for _, o := range []intern.Options{{}, {Share: intern.New(), Structs: true}} {
				t.Run(fmt.Sprintf("%s/oneByte=%v/share=%v", format, oneByte, o.Share != nil), func(t *testing.T) {
					var src io.Reader = bytes.NewReader(body)
					if oneByte {
						src = &oneByteReader{r: src}
					}
					got := podList()
					if err := streamList(format, src, got, o); err != nil {
						t.Fatal(err)
					}
					if got.TypeMeta != want.TypeMeta || got.ResourceVersion != "4242" || got.Continue != "next-page" || len(got.Items) != len(want.Items) {
						t.Fatalf("list %+v %+v with %d items", got.TypeMeta, got.ListMeta, len(got.Items))
					}
					for i := range want.Items {
						if !equality.Semantic.DeepEqual(got.Items[i], &want.Items[i]) {
							t.Fatalf("item %d:\n got %+v\nwant %+v", i, got.Items[i], &want.Items[i])
						}
					}
				})
			}
		}
	}
	// Unstructured items, from JSON: as encoding/json reads them.
	var ref struct {
		Items []map[string]any `json:"items"`
	}
	if err := utiljson.Unmarshal(bodies["json"], &ref); err != nil {
		t.Fatal(err)
	}
	got := unstructuredList()
	if err := streamJSONList(&frames{src: &oneByteReader{r: bytes.NewReader(bodies["json"])}, max: DefaultMaxFrameSize}, got, intern.Options{}); err != nil {
		t.Fatal(err)
	}
	if got.Kind != "PodList" || len(got.Items) != len(ref.Items) {
		t.Fatalf("kind %q, %d items", got.Kind, len(got.Items))
	}
	for i := range ref.Items {
		if !equality.Semantic.DeepEqual(got.Items[i].Object, ref.Items[i]) {
			t.Fatalf("unstructured item %d:\n got %v\nwant %v", i, got.Items[i].Object, ref.Items[i])
		}
	}
}

// TestListStreamBadInput checks that malformed or cut-off lists are
// errors, never a panic or a partial success.
func TestListStreamBadInput(t *testing.T) {
	good := samplePodList(3)
	for format, body := range map[string][]byte{"protobuf": protoListBody(t, good), "json": jsonListBody(t, good)} {
		for n := range len(body) {
			f := &frames{src: bytes.NewReader(body[:n]), max: DefaultMaxFrameSize}
			l := podList()
			if format == "json" {
				if err := streamJSONList(f, l, intern.Options{}); err == nil {
					t.Fatalf("json cut to %d of %d bytes: no error", n, len(body))
				}
				continue
			}
			// Protobuf has no end marker: a cut between the envelope's
			// fields leaves a valid message (the HTTP layer sees the
			// body end short). A cut inside the list is an error.
			if err := streamProtoList(f, l, intern.Options{}); err == nil && len(l.Items) != 0 && len(l.Items) != len(good.Items) {
				t.Fatalf("protobuf cut to %d of %d bytes: no error, %d items", n, len(body), len(l.Items))
			}
		}
	}
	for _, tc := range []struct{ in, want string }{
		{``, "empty response body"},
		{`[]`, "expected '{'"},
		{`{"items":{}}`, "expected '['"},
		{`{"items":[1]}`, "list item 0 is not an object"},
		{`{"items":[,]}`, "list item 0 is not an object"},
		{`{"items":[{"metadata":{"name":5}}]}`, "list item 0"},
		{`{"items":[{}] x}`, "expected ',' or '}'"},
		{`{"items":[{}]} x`, "after the list"},
		{`{"items":[{}} `, "expected ',' or ']'"},
		{`{"items":[],"items":[]}`, `two "items"`},
		{`{"items":nul}`, "invalid value"},
		{`{"kind":5}`, "list kind"},
		{`{"metadata":[]}`, "list metadata"},
		{`{"other":tru}`, "list other"},
		{`{"kind":"PodList",}`, "list object key"},
		{`{"kind" "PodList"}`, "expected ':'"},
	} {
		err := streamJSONList(&frames{src: strings.NewReader(tc.in), max: DefaultMaxFrameSize}, podList(), intern.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one that says %q", tc.in, err, tc.want)
		}
	}
	list := protoListBody(t, good)
	for _, tc := range []struct {
		name string
		in   []byte
		want string
	}{
		{"empty", nil, "empty response body"},
		{"no magic", []byte("k9s\x00\x0a\x00"), "prefix"},
		{"field 0", []byte("k8s\x00\x00"), "field number 0"},
		{"group wire type", []byte("k8s\x00\x0b"), "wire type 3"},
		{"item too long", protoObjectRaw("v1", "PodList", []byte{0x12, 0x7f}), "truncated"},
		{"encoded", append(bytes.Clone(list), 0x1a, 4, 'g', 'z', 'i', 'p'), "content encoding"},
		{"item not a pod", protoObjectRaw("v1", "PodList", []byte{0x12, 2, 0x0a, 0x7f}), "list item 0"},
	} {
		err := streamProtoList(&frames{src: bytes.NewReader(tc.in), max: DefaultMaxFrameSize}, podList(), intern.Options{})
		if err == nil || !strings.Contains(err.Error(), tc.want) {
			t.Errorf("%s: error %v, want one that says %q", tc.name, err, tc.want)
		}
	}
}

// TestDoStreamsLists lists through a client: both formats, and the
// errors of a failed request.
func TestDoStreamsLists(t *testing.T) {
	want := samplePodList(50)
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch {
		case r.URL.Query().Get("fail") != "":
			w.WriteHeader(http.StatusNotFound)
			writeJSON(w, &metav1.Status{Status: metav1.StatusFailure, Reason: metav1.StatusReasonNotFound, Code: 404})
		case r.URL.Query().Get("odd") != "":
			w.Header().Set("Content-Type", "text/plain")
			w.Write([]byte("hello"))
		case strings.HasPrefix(r.Header.Get("Accept"), MediaTypeProtobuf):
			w.Header().Set("Content-Type", MediaTypeProtobuf)
			w.Write(protoListBody(t, want))
		default:
			w.Header().Set("Content-Type", MediaTypeJSON)
			w.Write(jsonListBody(t, want))
		}
	})
	for _, ct := range []ContentType{JSON, Protobuf} {
		c, _ := newTestClient(t, h, Options{ContentType: ct})
		got := podList()
		if err := c.Get().Resource("pods").Do(t.Context(), got); err != nil {
			t.Fatal(err)
		}
		if len(got.Items) != 50 || got.Items[49].Name != "pod-0049" || got.Kind != "PodList" {
			t.Errorf("%s: %d items, kind %q", ct, len(got.Items), got.Kind)
		}
		err := c.Get().Resource("pods").Param("fail", "1").Do(t.Context(), podList())
		var se *StatusError
		if !errors.As(err, &se) || se.Code != http.StatusNotFound {
			t.Errorf("%s: failed list: %v", ct, err)
		}
		if err := c.Get().Resource("pods").Param("odd", "1").Do(t.Context(), podList()); err == nil || !strings.Contains(err.Error(), "text/plain") {
			t.Errorf("%s: list served as text: %v", ct, err)
		}
	}
}

// FuzzListStream decodes arbitrary bytes as a list of Pods item by item.
// It must never panic, and what it accepts the reference decoders accept
// as the same list.
func FuzzListStream(f *testing.F) {
	good := samplePodList(2)
	f.Add(true, protoListBody(f, good))
	f.Add(false, jsonListBody(f, good))
	f.Add(false, []byte(`{"kind":"PodList","other":[1,{"a":"]"}],"items":[{"metadata":{"name":"a\"}"}}],"metadata":{"resourceVersion":"7"}}`))
	f.Fuzz(func(t *testing.T, proto bool, data []byte) {
		got := podList()
		fr := &frames{src: bytes.NewReader(data), max: 1 << 20}
		var err error
		var want corev1.PodList
		if proto {
			if err = streamProtoList(fr, got, intern.Options{}); err != nil {
				return
			}
			env, err := parseUnknown(data)
			if err != nil {
				t.Fatalf("stream accepted what the envelope parser refuses: %v", err)
			}
			if err := want.Unmarshal(env.raw); err != nil {
				t.Fatalf("stream accepted what the generated decoder refuses: %v", err)
			}
		} else {
			if err = streamJSONList(fr, got, intern.Options{}); err != nil {
				return
			}
			if err := utiljson.Unmarshal(data, &want); err != nil {
				t.Fatalf("stream accepted what util/json refuses: %v", err)
			}
		}
		if got.ResourceVersion != want.ResourceVersion || got.Continue != want.Continue || len(got.Items) != len(want.Items) {
			t.Fatalf("list metadata %+v with %d items, reference %+v with %d", got.ListMeta, len(got.Items), want.ListMeta, len(want.Items))
		}
		for i := range want.Items {
			if !equality.Semantic.DeepEqual(got.Items[i], &want.Items[i]) {
				t.Fatalf("item %d:\n got %+v\nwant %+v", i, got.Items[i], &want.Items[i])
			}
		}
	})
}

// TestListStreamCached checks that an item the caller already holds, at
// the same resourceVersion, is not decoded: the caller's object stands for
// it. Other items are decoded as usual.
func TestListStreamCached(t *testing.T) {
	want := samplePodList(20)
	want.Items[3].Namespace = "" // a cluster-scoped key
	held := map[string]*corev1.Pod{}
	for _, i := range []int{0, 3, 7} {
		held[want.Items[i].Namespace+"/"+want.Items[i].Name] = want.Items[i].DeepCopy()
	}
	held["default/pod-0007"].ResourceVersion = "1" // changed since: decoded
	for format, body := range map[string][]byte{"protobuf": protoListBody(t, want), "json": jsonListBody(t, want)} {
		t.Run(format, func(t *testing.T) {
			var asked []string
			o := intern.Options{Cached: always(func(namespace, name, resourceVersion string) any {
				asked = append(asked, strings.Clone(namespace+"/"+name+"@"+resourceVersion))
				if p := held[namespace+"/"+name]; p != nil && p.ResourceVersion == resourceVersion {
					return p
				}
				return nil
			})}
			got := podList()
			if err := streamList(format, &oneByteReader{r: bytes.NewReader(body)}, got, o); err != nil {
				t.Fatal(err)
			}
			if len(asked) != 20 || asked[3] != "/pod-0003@103" || asked[5] != "default/pod-0005@105" {
				t.Errorf("asked about %q", asked)
			}
			for i := range want.Items {
				key := want.Items[i].Namespace + "/" + want.Items[i].Name
				if reused := got.Items[i] == held[key]; reused != (i == 0 || i == 3) {
					t.Errorf("item %d: the held object stands for it: %v", i, reused)
				}
				if !equality.Semantic.DeepEqual(got.Items[i], &want.Items[i]) {
					t.Errorf("item %d:\n got %+v\nwant %+v", i, got.Items[i], &want.Items[i])
				}
			}
		})
	}
}
