package rest

import (
	"bytes"
	"context"
	"errors"
	"io"
	"net/http"
	"reflect"
	"slices"
	"testing"
	"time"
	"unsafe"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/watch"
)

func sampleEvents() []testEvent {
	return []testEvent{
		{"ADDED", testPod("a", "1")},
		{"MODIFIED", testPod("a", "2")},
		{"BOOKMARK", &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: "3"}}},
		{"DELETED", testPod("a", "4")},
		{"ERROR", &metav1.Status{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Status"}, Status: metav1.StatusFailure, Code: 410, Reason: metav1.StatusReasonExpired, Message: "too old resource version: 1 (5)"}},
	}
}

const protoWatchType = "application/vnd.kubernetes.protobuf;stream=watch"

func TestWatcherDecodesBothFormats(t *testing.T) {
	events := sampleEvents()
	for _, tc := range []struct {
		name, ctype string
		stream      []byte
	}{
		{"json", "application/json", jsonStream(t, events...)},
		{"protobuf", protoWatchType, protoStream(t, events...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			// A reader that returns one byte at a time exercises every
			// buffer boundary.
			w, err := NewWatcher[corev1.Pod](io.NopCloser(&oneByteReader{r: bytes.NewReader(tc.stream)}), tc.ctype)
			if err != nil {
				t.Fatal(err)
			}
			for i, want := range events {
				ev, err := w.Next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if string(ev.Type) != want.typ {
					t.Fatalf("event %d type %s, want %s", i, ev.Type, want.typ)
				}
				if ev.Type == watch.Error {
					if !apierrors.IsResourceExpired(ev.Err()) || ev.Object != nil {
						t.Errorf("error event: %v, object %v", ev.Err(), ev.Object)
					}
					continue
				}
				if ev.Status != nil || ev.Err() != nil {
					t.Errorf("event %d has a status", i)
				}
				if !equality.Semantic.DeepEqual(ev.Object, want.obj) {
					t.Errorf("event %d object differs:\n got %+v\nwant %+v", i, ev.Object, want.obj)
				}
			}
			if _, err := w.Next(); err != io.EOF {
				t.Fatalf("at end: %v, want io.EOF", err)
			}
			if _, err := w.Next(); err != io.EOF {
				t.Fatalf("after end: %v, want io.EOF again", err)
			}
		})
	}
}

type oneByteReader struct{ r io.Reader }

func (o *oneByteReader) Read(p []byte) (int, error) {
	if len(p) == 0 {
		return 0, nil
	}
	return o.r.Read(p[:1])
}

func TestWatcherUnstructuredJSON(t *testing.T) {
	stream := jsonStream(t, testEvent{"ADDED", testPod("u", "9")})
	w, err := NewWatcher[unstructured.Unstructured](io.NopCloser(bytes.NewReader(stream)), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Object.GetName() != "u" || ev.Object.GetKind() != "Pod" || ev.Object.GetResourceVersion() != "9" {
		t.Errorf("unstructured object = %v", ev.Object.Object)
	}
	if _, err := NewWatcher[unstructured.Unstructured](io.NopCloser(bytes.NewReader(nil)), protoWatchType); err == nil {
		t.Error("protobuf watch into Unstructured should be refused")
	}
}

func TestWatcherBadFrames(t *testing.T) {
	good := protoStream(t, testEvent{"ADDED", testPod("a", "1")})
	goodJSON := jsonStream(t, testEvent{"ADDED", testPod("a", "1")})
	tests := []struct {
		name, ctype string
		stream      []byte
		wantEvents  int
	}{
		{"proto truncated length", protoWatchType, good[:2], 0},
		{"proto truncated body", protoWatchType, good[:len(good)-3], 0},
		{"proto truncated second frame", protoWatchType, append(append([]byte{}, good...), good[:10]...), 1},
		{"proto huge length", protoWatchType, []byte{0xff, 0xff, 0xff, 0xff, 1, 2}, 0},
		{"proto garbage", protoWatchType, []byte{0, 0, 0, 3, 0xff, 0xff, 0xff}, 0},
		{"proto no magic", protoWatchType, protoStreamRaw(t, "ADDED", []byte("not k8s")), 0},
		{"proto unknown type", protoWatchType, protoStreamRaw(t, "EXPLODED", protoObject(t, "v1", "Pod", testPod("a", "1"))), 0},
		{"proto bad object", protoWatchType, protoStreamRaw(t, "ADDED", append([]byte("k8s\x00"), 0x12, 0x03, 0xff, 0xff, 0xff)), 0},
		{"json truncated", "application/json", goodJSON[:len(goodJSON)-5], 0},
		{"json garbage", "application/json", []byte("hello"), 0},
		{"json bad object", "application/json", []byte(`{"type":"ADDED","object":{"metadata":7}}`), 0},
		{"json trailing garbage", "application/json", append(append([]byte{}, goodJSON...), "]]"...), 1},
		{"json unknown type", "application/json", []byte(`{"type":"NOPE","object":{}}`), 0},
		{"json no object", "application/json", []byte(`{"type":"ADDED"}`), 0},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			w, err := NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(tt.stream)), tt.ctype)
			if err != nil {
				t.Fatal(err)
			}
			for i := 0; i < tt.wantEvents; i++ {
				if _, err := w.Next(); err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
			}
			_, err = w.Next()
			var de *DecodeError
			if !errors.As(err, &de) {
				t.Fatalf("Next = %v, want a *DecodeError", err)
			}
			if _, err2 := w.Next(); err2 != err {
				t.Errorf("error not sticky: %v then %v", err, err2)
			}
		})
	}
}

func protoStreamRaw(t testing.TB, typ string, obj []byte) []byte {
	we := metav1.WatchEvent{Type: typ}
	we.Object.Raw = obj
	b, err := we.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte{0, 0, byte(len(b) >> 8), byte(len(b))}, b...)
}

// blockingBody is a stream that never ends until closed.
type blockingBody struct {
	data   []byte
	closed chan struct{}
}

func (b *blockingBody) Read(p []byte) (int, error) {
	if len(b.data) > 0 {
		n := copy(p, b.data)
		b.data = b.data[n:]
		return n, nil
	}
	<-b.closed
	return 0, errors.New("read on closed body")
}

func (b *blockingBody) Close() error {
	select {
	case <-b.closed:
	default:
		close(b.closed)
	}
	return nil
}

func TestWatcherStop(t *testing.T) {
	body := &blockingBody{data: jsonStream(t, testEvent{"ADDED", testPod("a", "1")}), closed: make(chan struct{})}
	w, err := NewWatcher[corev1.Pod](body, "application/json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error)
	go func() { _, err := w.Next(); done <- err }()
	w.Stop()
	w.Stop()
	if err := <-done; err != io.EOF {
		t.Fatalf("Next after Stop = %v, want io.EOF", err)
	}
	// Stop also wins over events already buffered.
	w, err = NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(jsonStream(t, sampleEvents()...))), "application/json")
	if err != nil {
		t.Fatal(err)
	}
	if _, err := w.Next(); err != nil {
		t.Fatal(err)
	}
	w.Stop()
	if _, err := w.Next(); err != io.EOF {
		t.Fatalf("Next after Stop with buffered events = %v, want io.EOF", err)
	}
}

func TestWatchOverHTTP(t *testing.T) {
	events := sampleEvents()[:4]
	var gotQuery, gotAccept string
	unblock := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		gotQuery, gotAccept = r.URL.RawQuery, r.Header.Get("Accept")
		if r.Header.Get("Accept") == acceptProtobuf {
			w.Header().Set("Content-Type", protoWatchType)
			w.Write(protoStream(t, events...))
		} else {
			w.Header().Set("Content-Type", "application/json")
			w.Write(jsonStream(t, events...))
		}
		w.(http.Flusher).Flush()
		if r.URL.Query().Get("timeoutSeconds") == "" {
			select {
			case <-r.Context().Done():
			case <-unblock:
			}
		}
	})
	defer close(unblock)
	for _, ct := range []ContentType{JSON, Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			c, _ := newTestClient(t, h, Options{ContentType: ct})
			// Server ends the stream: io.EOF after the events.
			w, err := Watch[corev1.Pod](t.Context(), c.Get().Namespace("default").Resource("pods").
				Options(&metav1.ListOptions{ResourceVersion: "1", AllowWatchBookmarks: true, TimeoutSeconds: ptr(int64(5))}))
			if err != nil {
				t.Fatal(err)
			}
			if want := "allowWatchBookmarks=true&resourceVersion=1&timeoutSeconds=5&watch=true"; gotQuery != want {
				t.Errorf("query %q, want %q", gotQuery, want)
			}
			if (ct == Protobuf) != (gotAccept == acceptProtobuf) {
				t.Errorf("Accept = %q for %v", gotAccept, ct)
			}
			for range events {
				if _, err := w.Next(); err != nil {
					t.Fatal(err)
				}
			}
			if _, err := w.Next(); err != io.EOF {
				t.Fatalf("end = %v, want io.EOF", err)
			}

			// Context cancellation ends a watch the server keeps open.
			ctx, cancel := context.WithCancel(t.Context())
			w, err = Watch[corev1.Pod](ctx, c.Get().Namespace("default").Resource("pods"))
			if err != nil {
				t.Fatal(err)
			}
			for range events {
				if _, err := w.Next(); err != nil {
					t.Fatal(err)
				}
			}
			cancel()
			if _, err := w.Next(); !errors.Is(err, context.Canceled) {
				t.Fatalf("after cancel = %v, want context.Canceled", err)
			}

			// Stop ends it too.
			w, err = Watch[corev1.Pod](t.Context(), c.Get().Namespace("default").Resource("pods"))
			if err != nil {
				t.Fatal(err)
			}
			go func() {
				time.Sleep(10 * time.Millisecond) // not a timed assertion: Next must return whenever Stop happens
				w.Stop()
			}()
			for {
				if _, err := w.Next(); err != nil {
					if err != io.EOF {
						t.Fatalf("after Stop = %v, want io.EOF", err)
					}
					break
				}
			}
		})
	}
}

func ptr[T any](v T) *T { return &v }

// TestWatcherCached checks that an ADDED event whose object the decoder
// options already hold, at the same resourceVersion, is not decoded: the
// held object is the event's. A MODIFIED event's object is asked about
// too, but decoded in any case (TestWatcherModifiedPrior checks what it
// takes from the held object); DELETED events are not asked about.
func TestWatcherCached(t *testing.T) {
	held := testPod("a", "1")
	events := []testEvent{
		{"ADDED", testPod("a", "1")},    // held: not decoded
		{"ADDED", testPod("b", "1")},    // not held
		{"MODIFIED", testPod("a", "1")}, // not an ADDED: decoded
		{"DELETED", testPod("a", "1")},  // not asked about
		{"ADDED", testPod("a", "2")},    // held at another version
	}
	for _, tc := range []struct {
		name, ctype string
		stream      []byte
	}{
		{"json", "application/json", jsonStream(t, events...)},
		{"protobuf", protoWatchType, protoStream(t, events...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			var asked []string
			o := intern.Options{Cached: always(func(namespace, name, resourceVersion string) any {
				asked = append(asked, namespace+"/"+name+"@"+resourceVersion)
				if namespace == held.Namespace && name == held.Name && resourceVersion == held.ResourceVersion {
					return held
				}
				return nil
			})}
			w, err := NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(tc.stream)), tc.ctype)
			if err != nil {
				t.Fatal(err)
			}
			w.ctx = intern.WithOptions(t.Context(), o)
			for i, want := range events {
				ev, err := w.Next()
				if err != nil {
					t.Fatalf("event %d: %v", i, err)
				}
				if (ev.Object == held) != (i == 0) {
					t.Errorf("event %d: the held object is the event's: %v", i, ev.Object == held)
				}
				if !equality.Semantic.DeepEqual(ev.Object, want.obj) {
					t.Errorf("event %d object differs:\n got %+v\nwant %+v", i, ev.Object, want.obj)
				}
			}
			if want := []string{"default/a@1", "default/b@1", "default/a@1", "default/a@2"}; !slices.Equal(asked, want) {
				t.Errorf("asked about %q, want %q", asked, want)
			}
		})
	}
}

// TestWatcherModifiedPrior checks that a MODIFIED event's object is
// decoded with the object the decoder options hold under its key as its
// previous version: with sharing on, the parts the event did not change
// are the held object's.
func TestWatcherModifiedPrior(t *testing.T) {
	decode := func(o intern.Options, ev testEvent) *corev1.Pod {
		t.Helper()
		w, err := NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(jsonStream(t, ev))), "application/json")
		if err != nil {
			t.Fatal(err)
		}
		w.ctx = intern.WithOptions(t.Context(), o)
		got, err := w.Next()
		if err != nil {
			t.Fatal(err)
		}
		return got.Object
	}
	held := decode(intern.Options{Share: intern.New(), Structs: true}, testEvent{"ADDED", testPod("a", "1")})
	next := testPod("a", "2")
	next.Status.PodIP = "10.0.0.8"
	for _, tc := range []struct {
		name   string
		cached bool
	}{
		{"held", true},
		{"not held", false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			o := intern.Options{Share: intern.New(), Structs: true}
			if tc.cached {
				o.Cached = always(func(namespace, name, resourceVersion string) any { return held })
			}
			got := decode(o, testEvent{"MODIFIED", next})
			if !equality.Semantic.DeepEqual(got, next) {
				t.Fatalf("decoded:\n got %+v\nwant %+v", got, next)
			}
			for part, same := range map[string]bool{
				"containers": unsafe.SliceData(got.Spec.Containers) == unsafe.SliceData(held.Spec.Containers),
				"labels":     reflect.ValueOf(got.Labels).UnsafePointer() == reflect.ValueOf(held.Labels).UnsafePointer(),
			} {
				if same != tc.cached {
					t.Errorf("%s are the held object's: %v, want %v", part, same, tc.cached)
				}
			}
		})
	}
}
