package operator

import (
	"context"
	"fmt"
	"net"
	"os"
	"path/filepath"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/webhook"
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
	// $TMPDIR/at-webhook-certs.
	CertDir string
	// DNSNames and IPs name the server in its certificate. Default: the
	// Service's names (at-webhook-service.at-system.svc and its
	// .cluster.local form) and, with LocalURL, the listening IP.
	DNSNames []string
	IPs      []net.IP
	// LocalURL points the webhook configurations and the CRD's conversion
	// at https://<listening address> instead of the Service: for tests and
	// local runs, where the API server reaches this process directly.
	LocalURL bool
}

// setupWebhooks makes the certificates, starts injecting their CA bundle,
// and adds the server and the certificate keeper to mgr. It returns the
// server, whose socket is bound: Close it once the manager has returned.
func setupWebhooks(ctx context.Context, mgr *manager.Manager, opts WebhookOptions, o Options) (srv *webhook.Server, err error) {
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.CertDir == "" {
		opts.CertDir = filepath.Join(os.TempDir(), "at-webhook-certs")
	}
	srv, err = webhook.NewServer(webhook.ServerOptions{Addr: opts.Addr, CertDir: opts.CertDir, Metrics: mgr.WebhookMetrics(), Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	RegisterWebhooks(srv, o.Now)
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	defer func() {
		if err != nil {
			srv.Close()
		}
	}()
	inj := &webhook.Injector{
		REST:              mgr.REST(),
		ValidatingConfigs: []string{ValidatingConfig},
		MutatingConfigs:   []string{MutatingConfig},
		CRDs:              []string{CRDName},
	}
	dns, ips := opts.DNSNames, opts.IPs
	if len(dns) == 0 {
		svc := WebhookService + "." + WebhookNamespace + ".svc"
		dns = []string{svc, svc + ".cluster.local"}
	}
	if opts.LocalURL {
		addr := srv.Addr().(*net.TCPAddr)
		ip := addr.IP
		if ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
		}
		ips = append(ips, ip)
		inj.URL = fmt.Sprintf("https://%s", net.JoinHostPort(ip.String(), fmt.Sprint(addr.Port)))
	}
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: opts.CertDir, DNSNames: dns, IPs: ips, Logger: o.Logger})
	if err != nil {
		return nil, err
	}
	if err := certs.Ensure(); err != nil {
		return nil, err
	}
	// Inject once before anything runs, so the API server can call the
	// webhooks as soon as the server answers; Certs.Start injects again on
	// every change.
	if err := inj.Inject(ctx, certs.CABundle()); err != nil {
		return nil, fmt.Errorf("at: injecting the webhook CA bundle (apply config/ first): %w", err)
	}
	certs.OnRotate(inj.Inject)
	if err := mgr.Add(srv); err != nil {
		return nil, err
	}
	return srv, mgr.Add(manager.RunnableFunc(certs.Start))
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
