package operator

import (
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/manager"
)

// The webhook objects, as config/ names them (kustomize prefixes the
// generated names with "at-" and puts them in at-system).
const (
	ValidatingConfig = "at-validating-webhook-configuration"
	MutatingConfig   = "at-mutating-webhook-configuration"
	CRDName          = "ats.cnat.programming-kubernetes.info"
	WebhookService   = "at-webhook-service"
	WebhookNamespace = "at-system"
)

// The operator keeps its webhook certificates current itself, so it may
// write the CA bundle into its own webhook configurations and CRD, and
// nothing else:
//
// +kubebuilder:rbac:groups=admissionregistration.k8s.io,resources=validatingwebhookconfigurations;mutatingwebhookconfigurations,verbs=get;update,resourceNames=at-validating-webhook-configuration;at-mutating-webhook-configuration
// +kubebuilder:rbac:groups=apiextensions.k8s.io,resources=customresourcedefinitions,verbs=get;update,resourceNames=ats.cnat.programming-kubernetes.info

// WebhookOptions configure the webhook server Run starts when
// Options.Webhooks is set. The zero value is valid for a cluster.
type WebhookOptions struct {
	// Addr is where the server listens. Default ":9443".
	Addr string
	// CertDir is where the certificates are made and kept. Default
	// $TMPDIR/at-system-at-webhook-service-webhook-certs.
	CertDir string
	// LocalURL points the webhook configurations and the CRD's conversion
	// at https://<listening address> instead of the Service: for tests and
	// local runs, where the API server reaches this process directly.
	LocalURL bool
}

// setupWebhooks serves the At's webhooks through the manager, with
// certificates it makes, renews and injects into the webhook
// configurations and the CRD.
func setupWebhooks(mgr *manager.Manager, opts WebhookOptions, o Options) error {
	srv, err := mgr.Webhooks(manager.WebhookOptions{Addr: opts.Addr, CertDir: opts.CertDir, LocalURL: opts.LocalURL,
		Service: WebhookNamespace + "/" + WebhookService, ValidatingConfigs: []string{ValidatingConfig},
		MutatingConfigs: []string{MutatingConfig}, CRDs: []string{CRDName}})
	if err != nil {
		return err
	}
	RegisterWebhooks(srv, o.Now)
	return nil
}

// WithConversionWebhook returns a copy of the At CRD whose conversion goes
// through the operator's conversion webhook (behind the Service; the
// Injector switches it to a URL for local runs). config/ does the same with
// a kustomize patch.
func WithConversionWebhook(crd *unstructured.Unstructured) *unstructured.Unstructured {
	out := crd.DeepCopy()
	_ = unstructured.SetNestedMap(out.Object, map[string]any{
		"strategy": "Webhook",
		"webhook": map[string]any{
			"conversionReviewVersions": []any{"v1"},
			"clientConfig": map[string]any{"service": map[string]any{
				"namespace": WebhookNamespace, "name": WebhookService, "path": "/convert",
			}},
		},
	}, "spec", "conversion")
	return out
}
