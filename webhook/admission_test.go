package webhook_test

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loom-k8s/loom/webhook"
)

// cmValidator denies ConfigMaps without data, or with the key
// "forbidden", on create, warns on updates
// that drop keys, and refuses the deletion of ConfigMaps labelled keep.
type cmValidator struct{}

func (cmValidator) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	if _, ok := cm.Data["forbidden"]; ok {
		return nil, errors.New("the key \"forbidden\" is not allowed")
	}
	if len(cm.Data) == 0 {
		return webhook.Warnings{"empty"}, apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, cm.Name,
			field.ErrorList{field.Required(field.NewPath("data"), "a ConfigMap needs data")})
	}
	return nil, nil
}

func (cmValidator) ValidateUpdate(_ context.Context, old, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	if len(cm.Data) < len(old.Data) {
		return webhook.Warnings{"keys dropped"}, nil
	}
	return nil, nil
}

func (cmValidator) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (webhook.Warnings, error) {
	if cm.Labels["keep"] == "true" {
		return nil, errors.New("this ConfigMap is kept")
	}
	return nil, nil
}

type cmDefaulter struct{}

func (cmDefaulter) Default(_ context.Context, cm *corev1.ConfigMap) error {
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if _, ok := cm.Data["color"]; !ok {
		cm.Data["color"] = "blue"
	}
	if cm.Labels["panic"] == "yes" {
		panic("asked to")
	}
	return nil
}

func review(t *testing.T, op admissionv1.Operation, obj, old *corev1.ConfigMap) []byte {
	t.Helper()
	req := &admissionv1.AdmissionRequest{UID: "u-1", Operation: op,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}}
	if obj != nil {
		req.Object = runtime.RawExtension{Raw: mustJSON(t, obj)}
	}
	if old != nil {
		req.OldObject = runtime.RawExtension{Raw: mustJSON(t, old)}
	}
	return mustJSON(t, &admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
}

func mustJSON(t *testing.T, v any) []byte {
	t.Helper()
	b, err := json.Marshal(v)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func post(t *testing.T, h http.Handler, contentType string, body []byte) (int, string, *admissionv1.AdmissionResponse) {
	t.Helper()
	req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	req.Header.Set("Content-Type", contentType)
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	if rec.Code != http.StatusOK {
		return rec.Code, rec.Body.String(), nil
	}
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
		t.Fatalf("answer is not a review: %v: %s", err, rec.Body)
	}
	if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Response == nil || out.Response.UID != "u-1" {
		t.Fatalf("answer %s lacks the type, response or uid", rec.Body)
	}
	return rec.Code, rec.Body.String(), out.Response
}

func cm(name string, data map[string]string, labels map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Labels: labels}, Data: data}
}

func TestValidatorFor(t *testing.T) {
	h := webhook.ValidatorFor[corev1.ConfigMap](cmValidator{})
	full := cm("a", map[string]string{"k": "v", "l": "w"}, nil)
	cases := []struct {
		name     string
		body     []byte
		allowed  bool
		code     int32
		reason   metav1.StatusReason
		message  string
		warnings []string
	}{
		{name: "create allowed", body: review(t, admissionv1.Create, full, nil), allowed: true},
		{name: "create invalid keeps 422 and details", body: review(t, admissionv1.Create, cm("e", nil, nil), nil),
			code: 422, reason: metav1.StatusReasonInvalid, message: "a ConfigMap needs data", warnings: []string{"empty"}},
		{name: "update warns", body: review(t, admissionv1.Update, cm("a", map[string]string{"k": "v"}, nil), full),
			allowed: true, warnings: []string{"keys dropped"}},
		{name: "delete denied is Forbidden", body: review(t, admissionv1.Delete, nil, cm("a", nil, map[string]string{"keep": "true"})),
			code: 403, reason: metav1.StatusReasonForbidden, message: "this ConfigMap is kept"},
		{name: "delete allowed", body: review(t, admissionv1.Delete, nil, full), allowed: true},
		{name: "connect allowed", body: review(t, admissionv1.Connect, nil, nil), allowed: true},
		{name: "update without old object", body: review(t, admissionv1.Update, full, nil),
			code: 400, reason: metav1.StatusReasonBadRequest, message: "oldObject"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, resp := post(t, h, "application/json", tc.body)
			if code != 200 {
				t.Fatalf("HTTP %d: %s", code, body)
			}
			if resp.Allowed != tc.allowed {
				t.Fatalf("allowed %v, want %v: %s", resp.Allowed, tc.allowed, body)
			}
			if !tc.allowed && (resp.Result == nil || resp.Result.Code != tc.code || resp.Result.Reason != tc.reason || !strings.Contains(resp.Result.Message, tc.message)) {
				t.Fatalf("result %+v, want code %d reason %s message with %q", resp.Result, tc.code, tc.reason, tc.message)
			}
			if strings.Join(resp.Warnings, ",") != strings.Join(tc.warnings, ",") {
				t.Fatalf("warnings %v, want %v", resp.Warnings, tc.warnings)
			}
		})
	}
}

func TestDefaulterFor(t *testing.T) {
	h := webhook.DefaulterFor[corev1.ConfigMap](cmDefaulter{})
	// Adds the default; a field unknown to the Go type is not removed.
	raw := []byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"k":"v"},"futureField":1}`)
	body := mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u-1", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: raw}}})
	_, out, resp := post(t, h, "application/json", body)
	if !resp.Allowed || resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch {
		t.Fatalf("answer %s, want allowed with a JSON patch", out)
	}
	if got, want := string(resp.Patch), `[{"op":"add","path":"/data/color","value":"blue"}]`; got != want {
		t.Fatalf("patch %s, want %s", got, want)
	}
	// Nothing to do: no patch.
	_, out, resp = post(t, h, "application/json", review(t, admissionv1.Create, cm("b", map[string]string{"color": "red"}, nil), nil))
	if !resp.Allowed || resp.Patch != nil {
		t.Fatalf("answer %s, want allowed without patch", out)
	}
	// A panic in the defaulter is a denial, and the server lives on.
	_, out, resp = post(t, h, "application/json", review(t, admissionv1.Create, cm("c", nil, map[string]string{"panic": "yes"}), nil))
	if resp.Allowed || resp.Result.Code != 500 || !strings.Contains(resp.Result.Message, "asked to") {
		t.Fatalf("answer %s, want a 500 denial naming the panic", out)
	}
}

func TestMalformedReviews(t *testing.T) {
	h := webhook.ValidatorFor[corev1.ConfigMap](cmValidator{})
	good := review(t, admissionv1.Create, cm("a", map[string]string{"k": "v"}, nil), nil)
	cases := []struct {
		name, contentType string
		body              []byte
		code              int
		message           string
	}{
		{"wrong content type", "text/plain", good, 415, "want application/json"},
		{"not JSON", "application/json", []byte("{nope"), 400, "not an AdmissionReview"},
		{"wrong kind", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1beta1","kind":"AdmissionReview","request":{"uid":"x"}}`), 400, "want admission.k8s.io/v1 AdmissionReview"},
		{"no request", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview"}`), 400, "has no request"},
		{"no uid", "application/json", []byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`), 400, "no uid"},
		{"too large", "application/json", bytes.Repeat([]byte(" "), 8<<20), 413, "larger than"},
		{"empty", "application/json", nil, 400, "not an AdmissionReview"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, body, _ := post(t, h, tc.contentType, tc.body)
			if code != tc.code || !strings.Contains(body, tc.message) {
				t.Fatalf("HTTP %d %q, want %d with %q", code, body, tc.code, tc.message)
			}
		})
	}
	// An object that does not decode into the type: a 400 denial, not a panic.
	bad := mustJSON(t, &admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "u-1", Operation: admissionv1.Create, Object: runtime.RawExtension{Raw: []byte(`{"data":7}`)}}})
	_, out, resp := post(t, h, "application/json", bad)
	if resp.Allowed || resp.Result.Code != 400 || !strings.Contains(resp.Result.Message, "ConfigMap") {
		t.Fatalf("answer %s, want a 400 denial naming the type", out)
	}
}
