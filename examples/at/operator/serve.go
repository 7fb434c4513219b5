package operator

import (
	"context"
	"time"

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
//
// Every replica signs its serving certificate with one CA, kept in the
// Secret at-webhook-service-ca; the first replica creates it (a create
// cannot be limited by name), and the leader rotates it:
//
// +kubebuilder:rbac:groups="",resources=secrets,verbs=get;list;watch;update,resourceNames=at-webhook-service-ca,namespace=at-system
// +kubebuilder:rbac:groups="",resources=secrets,verbs=create,namespace=at-system

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
	// local runs, where the API server reaches this process directly. The
	// CA is then this process's own, in CertDir: run one replica.
	LocalURL bool
	// URL points them at this base URL instead of the Service (such as
	// a proxy in front of several replicas). Default "".
	URL string
	// PropagationDelay is as in manager.WebhookOptions. Default one
	// minute.
	PropagationDelay time.Duration
}

// setupWebhooks serves the At's webhooks through the manager, with
// certificates it makes, renews and injects into the webhook
// configurations and the CRD.
func setupWebhooks(ctx context.Context, mgr *manager.Manager, opts WebhookOptions, o Options) error {
	srv, err := mgr.Webhooks(ctx, manager.WebhookOptions{Addr: opts.Addr, CertDir: opts.CertDir, LocalURL: opts.LocalURL,
		URL: opts.URL, PropagationDelay: opts.PropagationDelay,
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
