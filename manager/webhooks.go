package manager

import (
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"strings"

	"github.com/loom-k8s/loom/webhook"
)

// WebhookOptions configure [Manager.Webhooks]. Service, or LocalURL, is
// required; every other zero value means the documented default.
type WebhookOptions struct {
	// Addr is where the webhook server listens. Default ":9443".
	Addr string
	// Service is "namespace/name" of the Service in front of the webhook
	// server: the name the API server calls it by, which the serving
	// certificate names. Required unless LocalURL is set.
	Service string
	// LocalURL points the webhook configurations and CRDs at
	// https://<the listening address> instead of the Service, and names
	// that address in the certificate: for an API server that reaches
	// this process directly, as in tests and local runs.
	LocalURL bool
	// ValidatingConfigs, MutatingConfigs and CRDs name the
	// ValidatingWebhookConfigurations, MutatingWebhookConfigurations and
	// CustomResourceDefinitions (their conversion webhook) that get the CA
	// bundle. The objects must exist (installed from manifests); the
	// manager's RBAC must allow get and update on them.
	ValidatingConfigs, MutatingConfigs, CRDs []string
	// CertDir is where the certificates are made and kept (see
	// webhook.CertOptions.Dir). Default: a folder under os.TempDir()
	// named after the Service (or "local").
	CertDir string
}

// ErrWebhookOptions: WebhookOptions are incomplete or contradictory.
var ErrWebhookOptions = errors.New("manager: webhook options")

// Webhooks returns the manager's webhook server: register handlers on it
// (webhook.ValidatorFor, DefaulterFor, Conversion). It serves HTTPS on
// every replica once the manager starts, with a CA and a serving
// certificate the manager makes, renews before they expire, and injects
// into the configurations and CRDs opts names, so that no cert-manager is
// needed. The socket is bound at once (so that LocalURL knows its port).
// Call it once, before Start.
//
// Several replicas that make their own certificates overwrite each
// other's CA bundle: run the injection on one replica (leader election)
// or give them one CA through a webhook.Certs of your own.
func (m *Manager) Webhooks(opts WebhookOptions) (*webhook.Server, error) {
	if opts.Service == "" && !opts.LocalURL {
		return nil, fmt.Errorf("%w: Service or LocalURL is required", ErrWebhookOptions)
	}
	var dns []string
	if opts.Service != "" {
		ns, name, ok := strings.Cut(opts.Service, "/")
		if !ok || ns == "" || name == "" {
			return nil, fmt.Errorf("%w: Service %q is not namespace/name", ErrWebhookOptions, opts.Service)
		}
		svc := name + "." + ns + ".svc"
		dns = []string{svc, svc + ".cluster.local"}
	}
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.CertDir == "" {
		label := "local"
		if opts.Service != "" {
			label = strings.ReplaceAll(opts.Service, "/", "-")
		}
		opts.CertDir = filepath.Join(os.TempDir(), label+"-webhook-certs")
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: opts.Addr, CertDir: opts.CertDir, Metrics: m.metrics, Logger: m.log, Tracing: m.opts.Tracing})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	inj := &webhook.Injector{REST: m.rc, ValidatingConfigs: opts.ValidatingConfigs, MutatingConfigs: opts.MutatingConfigs, CRDs: opts.CRDs}
	var ips []net.IP
	if opts.LocalURL {
		addr := srv.Addr().(*net.TCPAddr)
		ip := addr.IP
		if ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
		}
		ips = append(ips, ip)
		inj.URL = "https://" + net.JoinHostPort(ip.String(), fmt.Sprint(addr.Port))
	}
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: opts.CertDir, DNSNames: dns, IPs: ips, Logger: m.log})
	if err == nil {
		err = certs.Ensure()
	}
	if err == nil {
		certs.OnRotate(inj.Inject)
		err = m.Add(srv)
	}
	if err == nil {
		err = m.Add(RunnableFunc(certs.Start))
	}
	if err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}
