package shard

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/webhook"
)

// BenchmarkAdmission measures a replica's part of an assignment webhook
// call, in process: the review decoded, the handler, the answer encoded.
// "noop" is a handler that allows every object unchanged, served the
// same way, as bench/sharding's no-op webhook is. The review carries a
// new custom resource as kube-apiserver sends it on create (with its
// managed fields). Results: testdata/bench-admission.txt.
func BenchmarkAdmission(b *testing.B) {
	obj := []byte(`{"apiVersion":"bench.loom.dev/v1","kind":"Shelf","metadata":{"creationTimestamp":"2026-11-27T16:00:00Z","generation":1,` +
		`"managedFields":[{"apiVersion":"bench.loom.dev/v1","fieldsType":"FieldsV1","fieldsV1":{"f:spec":{".":{},"f:value":{}}},"manager":"sharding","operation":"Update","time":"2026-11-27T16:00:00Z"}],` +
		`"name":"probe-webhook-0-000","namespace":"bench","uid":"6f1c3f0e-3a57-4a44-9d1c-2f1f4b8f0a11"},"spec":{"value":"probe"}}`)
	review := admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{
			UID:       "0a2b7c9e-1d2f-4e3a-8b5c-6d7e8f901234",
			Kind:      metav1.GroupVersionKind{Group: "bench.loom.dev", Version: "v1", Kind: "Shelf"},
			Resource:  metav1.GroupVersionResource{Group: "bench.loom.dev", Version: "v1", Resource: "shelves"},
			Namespace: "bench", Name: "probe-webhook-0-000", Operation: admissionv1.Create,
			Object: runtime.RawExtension{Raw: obj},
		},
	}
	body, err := json.Marshal(review)
	if err != nil {
		b.Fatal(err)
	}
	assign := Admission(AdmissionOptions{Ring: "bench", Kinds: []schema.GroupKind{{Group: "bench.loom.dev", Kind: "Shelf"}}})
	noop := func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		return webhook.Allowed()
	}
	for _, tc := range []struct {
		name    string
		handler webhook.AdmissionFunc
		patched bool
	}{{"assign", assign, true}, {"noop", noop, false}} {
		b.Run(tc.name, func(b *testing.B) {
			h := webhook.Admission(tc.handler)
			for b.Loop() {
				req := httptest.NewRequest(http.MethodPost, "/shard-bench", bytes.NewReader(body))
				req.Header.Set("Content-Type", "application/json")
				rec := httptest.NewRecorder()
				h.ServeHTTP(rec, req)
				if rec.Code != http.StatusOK || bytes.Contains(rec.Body.Bytes(), []byte(`"patch"`)) != tc.patched {
					b.Fatalf("answer %d: %s", rec.Code, rec.Body)
				}
			}
		})
	}
}
