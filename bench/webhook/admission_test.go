// Package webhook compares admission handling: Loom's webhook.DefaulterFor
// and webhook.ValidatorFor against controller-runtime's admission
// WithDefaulter and WithValidator, on the same AdmissionReview of a
// realistic Pod, served in-process (ServeHTTP on a recorder; no TLS, no
// network), so that what is measured is each library's decode, call,
// patch and encode.
//
// Run with: cd bench && go test -run '^$' -bench Admission -benchmem -count 5 ./webhook
package webhook

import (
	"bytes"
	"context"
	"encoding/json"
	"net/http"
	"net/http/httptest"
	"testing"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	clientgoscheme "k8s.io/client-go/kubernetes/scheme"
	"sigs.k8s.io/controller-runtime/pkg/webhook/admission"

	"github.com/loom-k8s/loom/webhook"
)

// podDefaults is the same defaulting logic for both libraries: a label,
// an annotation, and a memory request on containers without one.
func podDefaults(p *corev1.Pod) {
	if p.Labels == nil {
		p.Labels = map[string]string{}
	}
	p.Labels["team"] = "platform"
	if p.Annotations == nil {
		p.Annotations = map[string]string{}
	}
	p.Annotations["example.com/defaulted"] = "true"
	for i := range p.Spec.Containers {
		c := &p.Spec.Containers[i]
		if c.Resources.Requests == nil {
			c.Resources.Requests = corev1.ResourceList{}
		}
		if _, ok := c.Resources.Requests[corev1.ResourceMemory]; !ok {
			c.Resources.Requests[corev1.ResourceMemory] = resource.MustParse("64Mi")
		}
	}
}

func podValid(p *corev1.Pod) bool { return len(p.Spec.Containers) > 0 }

type loomDefaulter struct{}

func (loomDefaulter) Default(_ context.Context, p *corev1.Pod) error { podDefaults(p); return nil }

type loomValidator struct{}

func (loomValidator) ValidateCreate(_ context.Context, p *corev1.Pod) (webhook.Warnings, error) {
	podValid(p)
	return nil, nil
}
func (loomValidator) ValidateUpdate(_ context.Context, _, p *corev1.Pod) (webhook.Warnings, error) {
	podValid(p)
	return nil, nil
}
func (loomValidator) ValidateDelete(context.Context, *corev1.Pod) (webhook.Warnings, error) {
	return nil, nil
}

type crDefaulter struct{}

func (crDefaulter) Default(_ context.Context, p *corev1.Pod) error { podDefaults(p); return nil }

type crValidator struct{}

func (crValidator) ValidateCreate(_ context.Context, p *corev1.Pod) (admission.Warnings, error) {
	podValid(p)
	return nil, nil
}
func (crValidator) ValidateUpdate(_ context.Context, _, p *corev1.Pod) (admission.Warnings, error) {
	podValid(p)
	return nil, nil
}
func (crValidator) ValidateDelete(context.Context, *corev1.Pod) (admission.Warnings, error) {
	return nil, nil
}

func pod() *corev1.Pod {
	grace := int64(30)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{Name: "web-7d4b9c8f6d-x2x7q", Namespace: "shop", GenerateName: "web-7d4b9c8f6d-",
			Labels:      map[string]string{"app.kubernetes.io/name": "web", "pod-template-hash": "7d4b9c8f6d", "tier": "frontend"},
			Annotations: map[string]string{"kubectl.kubernetes.io/restartedAt": "2026-11-01T10:00:00Z"},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: "web-7d4b9c8f6d",
				UID: "5f0b5f4e-1111-2222-3333-444455556666"}}},
		Spec: corev1.PodSpec{
			TerminationGracePeriodSeconds: &grace,
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example.com/shop/web:1.42.0", Args: []string{"--port=8080", "--log-level=info"},
				Ports:          []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Env:            []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "CACHE_SIZE", Value: "512"}},
				Resources:      corev1.ResourceRequirements{Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")}},
				ReadinessProbe: &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz"}}},
				VolumeMounts:   []corev1.VolumeMount{{Name: "config", MountPath: "/etc/web"}},
			}, {
				Name: "sidecar", Image: "registry.example.com/proxy:2.3", Args: []string{"--upstream=127.0.0.1:8080"},
			}},
			Volumes: []corev1.Volume{{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{
				LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}}}}},
		},
	}
}

func reviewBody(b *testing.B) []byte {
	raw, err := json.Marshal(pod())
	if err != nil {
		b.Fatal(err)
	}
	body, err := json.Marshal(&admissionv1.AdmissionReview{
		TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"},
		Request: &admissionv1.AdmissionRequest{UID: "0f1e2d3c", Operation: admissionv1.Create,
			Kind:     metav1.GroupVersionKind{Version: "v1", Kind: "Pod"},
			Resource: metav1.GroupVersionResource{Version: "v1", Resource: "pods"},
			Name:     "web-7d4b9c8f6d-x2x7q", Namespace: "shop", Object: runtime.RawExtension{Raw: raw}},
	})
	if err != nil {
		b.Fatal(err)
	}
	return body
}

func serve(b *testing.B, h http.Handler, body []byte, wantPatch bool) {
	b.Helper()
	// Check once that the handler answers as expected.
	rec := httptest.NewRecorder()
	req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	h.ServeHTTP(rec, req)
	var out admissionv1.AdmissionReview
	if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || !out.Response.Allowed || (len(out.Response.Patch) > 0) != wantPatch {
		b.Fatalf("unexpected answer: %v %s", err, rec.Body)
	}
	b.ReportAllocs()
	b.SetBytes(int64(len(body)))
	b.ResetTimer()
	for b.Loop() {
		rec := httptest.NewRecorder()
		req := httptest.NewRequest(http.MethodPost, "/x", bytes.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		h.ServeHTTP(rec, req)
	}
}

func BenchmarkAdmission(b *testing.B) {
	body := reviewBody(b)
	scheme := clientgoscheme.Scheme
	b.Run("Defaulting/Loom", func(b *testing.B) {
		serve(b, webhook.DefaulterFor[corev1.Pod](loomDefaulter{}), body, true)
	})
	b.Run("Defaulting/ControllerRuntime", func(b *testing.B) {
		serve(b, admission.WithDefaulter[*corev1.Pod](scheme, crDefaulter{}), body, true)
	})
	b.Run("Validating/Loom", func(b *testing.B) {
		serve(b, webhook.ValidatorFor[corev1.Pod](loomValidator{}), body, false)
	})
	b.Run("Validating/ControllerRuntime", func(b *testing.B) {
		serve(b, admission.WithValidator[*corev1.Pod](scheme, crValidator{}), body, false)
	})
}
