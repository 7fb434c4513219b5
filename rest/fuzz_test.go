package rest

import (
	"bytes"
	"errors"
	"io"
	"testing"

	"github.com/loom-k8s/loom/internal/intern"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
)

// FuzzWatchDecode feeds arbitrary bytes to the watch decoder in both
// framings and into typed, unstructured and metadata-only targets. It must
// never panic, must make progress (every call either returns an event or
// ends the watch), and must end with io.EOF or a *DecodeError. Seeds live in
// testdata/fuzz/FuzzWatchDecode.
func FuzzWatchDecode(f *testing.F) {
	events := sampleEvents()
	f.Add(true, protoStream(f, events...))
	f.Add(false, jsonStream(f, events...))
	f.Add(true, protoStreamRaw(f, "ADDED", []byte("k8s\x00\x0a\x00")))
	f.Add(false, []byte(`{"type":"ADDED","object":{"kind":"Pod","metadata":{"name":"x"}}} {"object":{},"type":"DELETED"}`))
	f.Add(false, []byte(`{"type":"ERROR","object":{"kind":"Status","code":410}}`))
	f.Fuzz(func(t *testing.T, proto bool, data []byte) {
		ctype := "application/json"
		if proto {
			ctype = protoWatchType
		}
		check := func(next func() error) {
			for i := 0; ; i++ {
				err := next()
				if err == nil {
					if i > len(data) {
						t.Fatalf("more events (%d) than input bytes (%d)", i, len(data))
					}
					continue
				}
				var de *DecodeError
				if err != io.EOF && !errors.As(err, &de) {
					t.Fatalf("watch ended with %T %v, want io.EOF or *DecodeError", err, err)
				}
				return
			}
		}
		wp, err := NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(data)), ctype)
		if err != nil {
			t.Fatal(err)
		}
		check(func() error { _, err := wp.Next(); return err })
		wm, err := NewWatcher[metav1.PartialObjectMetadata](io.NopCloser(bytes.NewReader(data)), ctype)
		if err != nil {
			t.Fatal(err)
		}
		check(func() error { _, err := wm.Next(); return err })
		if !proto {
			wu, err := NewWatcher[unstructured.Unstructured](io.NopCloser(bytes.NewReader(data)), ctype)
			if err != nil {
				t.Fatal(err)
			}
			check(func() error { _, err := wu.Next(); return err })
		}
	})
}

// FuzzDecodeResponse feeds arbitrary bodies to the response decoder and the
// Status-error builder.
func FuzzDecodeResponse(f *testing.F) {
	f.Add(true, protoObjectRaw("v1", "Pod", []byte{0x0a, 0x03, 0x0a, 0x01, 'x'}))
	f.Add(false, []byte(`{"kind":"Status","code":404,"reason":"NotFound"}`))
	f.Fuzz(func(t *testing.T, proto bool, data []byte) {
		mt := MediaTypeJSON
		if proto {
			mt = MediaTypeProtobuf
		}
		var pod corev1.Pod
		_ = decodeInto(mt, data, &pod, intern.Options{})
		e := newStatusError("GET", "/p", 500, mt, data, 0)
		if e.Error() == "" {
			t.Fatal("empty error string")
		}
	})
}
