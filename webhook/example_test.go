package webhook_test

import (
	"context"
	"fmt"
	"log"
	"net/http"
	"net/http/httptest"
	"os"
	"os/signal"
	"strings"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/webhook"
)

// A webhook server with a validating and a defaulting webhook for
// ConfigMaps, its certificates made and kept fresh by Certs. It serves on
// the network until interrupted, so it is compiled, not run.
func ExampleNewServer() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: "/tmp/certs", DNSNames: []string{"my-webhook.my-ns.svc"}})
	if err != nil {
		log.Fatal(err)
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{CertDir: "/tmp/certs"})
	if err != nil {
		log.Fatal(err)
	}
	srv.Register("/validate-configmap", webhook.ValidatorFor[corev1.ConfigMap](cmValidator{}))
	srv.Register("/default-configmap", webhook.DefaulterFor[corev1.ConfigMap](cmDefaulter{}))
	go func() { _ = certs.Start(ctx) }() // with a manager: mgr.Add(manager.RunnableFunc(certs.Start))
	if err := srv.Start(ctx); err != nil {
		log.Fatal(err)
	}
}

// ValidatorFor answers AdmissionReviews with a typed Validator.
func ExampleValidatorFor() {
	h := webhook.ValidatorFor[corev1.ConfigMap](cmValidator{})
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",
	  "object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"},"data":{"forbidden":"x"}}}}`
	req := httptest.NewRequest(http.MethodPost, "/validate", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Print(rec.Body.String())
	// Output:
	// {"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"1","allowed":false,"status":{"metadata":{},"status":"Failure","message":"the key \"forbidden\" is not allowed","reason":"Forbidden","code":403}}}
}

// Mutating answers with the JSON patch from the object as sent to the
// object as changed.
func ExampleMutating() {
	h := webhook.Mutating[corev1.ConfigMap](func(_ context.Context, _ *admissionv1.AdmissionRequest, cm *corev1.ConfigMap) error {
		if cm.Labels == nil {
			cm.Labels = map[string]string{}
		}
		cm.Labels["checked"] = "yes"
		return nil
	}, webhook.MutatingOptions{})
	body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"1","operation":"CREATE",
	  "object":{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a"}}}}`
	req := httptest.NewRequest(http.MethodPost, "/mutate", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Print(rec.Body.String())
	// Output:
	// {"kind":"AdmissionReview","apiVersion":"admission.k8s.io/v1","response":{"uid":"1","allowed":true,"patch":"W3sib3AiOiJhZGQiLCJwYXRoIjoiL21ldGFkYXRhL2xhYmVscyIsInZhbHVlIjp7ImNoZWNrZWQiOiJ5ZXMifX1d","patchType":"JSONPatch"}}
}

// Conversion converts between the versions of a kind through its hub:
// here Gizmo v2 to v3, through v1.
func ExampleConversion() {
	h := webhook.Conversion(gizmoScheme())
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"1",
	  "desiredAPIVersion":"gizmos.test.loom.dev/v3",
	  "objects":[{"apiVersion":"gizmos.test.loom.dev/v2","kind":"Gizmo","metadata":{"name":"g"},"sizeCM":"12","name":"Ada Lovelace"}]}}`
	req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	fmt.Print(rec.Body.String())
	// Output:
	// {"kind":"ConversionReview","apiVersion":"apiextensions.k8s.io/v1","response":{"uid":"1","convertedObjects":[{"kind":"Gizmo","apiVersion":"gizmos.test.loom.dev/v3","metadata":{"name":"g"},"sizeMM":120,"First":"Ada","Last":"Lovelace"}],"result":{"metadata":{},"status":"Success"}}}
}
