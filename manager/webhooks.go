package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"time"

	"github.com/loom-k8s/loom/webhook"
)

// Certificates says who makes the webhook server's certificates.
type Certificates int

const (
	// CertsDefault is CertsLocal with LocalURL, and CertsShared
	// otherwise.
	CertsDefault Certificates = iota
	// CertsShared keeps the CA in a Secret in the operator's namespace
	// (WebhookOptions.CASecret), shared by every replica: each replica
	// signs its own serving certificate with it, so a call that reaches
	// any replica verifies against the one caBundle. Only the leader
	// publishes the bundle into the webhook configurations and CRDs, and
	// rotates the CA ahead of its expiry (see webhook.SharedCA). Safe for
	// any number of replicas.
	CertsShared
	// CertsLocal keeps the CA in CertDir, on this replica's disk, and
	// injects it at once: for one replica only (a test, a local run),
	// since replicas with their own CAs would overwrite each other's
	// bundle.
	CertsLocal
	// CertsProvided serves tls.crt and tls.key from CertDir, written by
	// someone else (cert-manager's Certificate, mounted from its Secret),
	// and reloads them when they change. The manager makes nothing and
	// injects nothing: cert-manager's cainjector fills caBundle.
	CertsProvided
)

// WebhookOptions configure [Manager.Webhooks]. Service, URL or LocalURL
// is required; every other zero value means the documented default.
type WebhookOptions struct {
	// Addr is where the webhook server listens. Default ":9443".
	Addr string
	// Service is "namespace/name" of the Service in front of the webhook
	// server: the name the API server calls it by, which the serving
	// certificate names. Required unless URL or LocalURL is set.
	Service string
	// URL, when set (such as "https://127.0.0.1:8443"), points the webhook
	// configurations and CRDs at this base URL instead of the Service,
	// and names its host in the certificate: for an API server that
	// reaches the replicas through an address of their own, such as a
	// load balancer or a proxy. Default "".
	URL string
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
	// Certificates says who makes the certificates. Default CertsLocal
	// with LocalURL, CertsShared otherwise.
	Certificates Certificates
	// CASecret is "namespace/name" of the Secret that holds the shared CA
	// (CertsShared). Default: "<name>-ca" in the Service's namespace; it
	// is required with URL and no Service. The manager's RBAC must allow
	// get, list, watch and update on it (by resourceNames) and create on
	// Secrets in its namespace.
	CASecret string
	// CertDir is where the serving certificate is kept (and, with
	// CertsLocal, the CA; with CertsProvided, where it is read from).
	// Default: a folder under os.TempDir() named after the Service (or
	// "local").
	CertDir string
	// EnableHTTP2, TLSConfig and ClientCAFile are as in
	// webhook.ServerOptions: HTTP/2 is off unless asked for, TLSConfig
	// has the last word on the TLS config, and ClientCAFile makes the
	// server require client certificates signed by its CAs.
	EnableHTTP2  bool
	TLSConfig    func(*tls.Config)
	ClientCAFile string
	// PropagationDelay is how long a changed CA bundle is given to reach
	// the API server before a new CA signs, and how long a new signer is
	// given to reach every replica before the old CA leaves the bundle.
	// Default one minute.
	PropagationDelay time.Duration
}

// ErrWebhookOptions: WebhookOptions are incomplete or contradictory.
var ErrWebhookOptions = errors.New("manager: webhook options")

// Webhooks returns the manager's webhook server: register handlers on it
// (webhook.ValidatorFor, DefaulterFor, Conversion). It serves HTTPS on
// every replica once the manager starts. By default (CertsShared) every
// replica signs its serving certificate with one CA kept in a Secret, and
// the leader injects that CA into the configurations and CRDs opts names
// and rotates it, so that any number of replicas serve calls and no
// cert-manager is needed; see [Certificates] for the other modes. The
// socket is bound at once (so that LocalURL knows its port). With
// CertsShared it reads or creates the Secret, so ctx bounds that request.
// Call it once, before Start.
func (m *Manager) Webhooks(ctx context.Context, opts WebhookOptions) (*webhook.Server, error) {
	if opts.Service == "" && opts.URL == "" && !opts.LocalURL {
		return nil, fmt.Errorf("%w: Service, URL or LocalURL is required", ErrWebhookOptions)
	}
	var dns []string
	var ips []net.IP
	var svcNS, svcName string
	if opts.Service != "" {
		var ok bool
		svcNS, svcName, ok = strings.Cut(opts.Service, "/")
		if !ok || svcNS == "" || svcName == "" {
			return nil, fmt.Errorf("%w: Service %q is not namespace/name", ErrWebhookOptions, opts.Service)
		}
		svc := svcName + "." + svcNS + ".svc"
		dns = []string{svc, svc + ".cluster.local"}
	}
	if opts.URL != "" {
		if opts.LocalURL {
			return nil, fmt.Errorf("%w: URL and LocalURL are exclusive", ErrWebhookOptions)
		}
		u, err := url.Parse(opts.URL)
		if err != nil || u.Scheme != "https" || u.Hostname() == "" {
			return nil, fmt.Errorf("%w: URL %q is not https://host[:port]", ErrWebhookOptions, opts.URL)
		}
		if ip := net.ParseIP(u.Hostname()); ip != nil {
			ips = append(ips, ip)
		} else {
			dns = append(dns, u.Hostname())
		}
	}
	mode := opts.Certificates
	if mode == CertsDefault {
		mode = CertsShared
		if opts.LocalURL {
			mode = CertsLocal
		}
	}
	var secretNS, secretName string
	if mode == CertsShared {
		switch {
		case opts.CASecret != "":
			var ok bool
			secretNS, secretName, ok = strings.Cut(opts.CASecret, "/")
			if !ok || secretNS == "" || secretName == "" {
				return nil, fmt.Errorf("%w: CASecret %q is not namespace/name", ErrWebhookOptions, opts.CASecret)
			}
		case opts.Service != "":
			secretNS, secretName = svcNS, svcName+"-ca"
		default:
			return nil, fmt.Errorf("%w: CertsShared needs CASecret (or a Service to name it after)", ErrWebhookOptions)
		}
	}
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.CertDir == "" {
		if mode == CertsProvided {
			return nil, fmt.Errorf("%w: CertsProvided needs CertDir", ErrWebhookOptions)
		}
		label := "local"
		if opts.Service != "" {
			label = strings.ReplaceAll(opts.Service, "/", "-")
		}
		opts.CertDir = filepath.Join(os.TempDir(), label+"-webhook-certs")
	}
	srv, err := webhook.NewServer(webhook.ServerOptions{
		Addr: opts.Addr, CertDir: opts.CertDir, Metrics: m.metrics, Logger: m.log, Tracing: m.opts.Tracing,
		EnableHTTP2: opts.EnableHTTP2, TLSConfig: opts.TLSConfig, ClientCAFile: opts.ClientCAFile,
	})
	if err != nil {
		return nil, err
	}
	if err := srv.Listen(); err != nil {
		return nil, err
	}
	inj := &webhook.Injector{REST: m.rc, ValidatingConfigs: opts.ValidatingConfigs, MutatingConfigs: opts.MutatingConfigs, CRDs: opts.CRDs}
	if opts.URL != "" {
		inj.URL = strings.TrimSuffix(opts.URL, "/")
	}
	if opts.LocalURL {
		addr := srv.Addr().(*net.TCPAddr)
		ip := addr.IP
		if ip.IsUnspecified() {
			ip = net.IPv4(127, 0, 0, 1)
		}
		ips = append(ips, ip)
		inj.URL = "https://" + net.JoinHostPort(ip.String(), fmt.Sprint(addr.Port))
	}
	if err := m.webhookCerts(ctx, mode, opts, inj, dns, ips, secretNS, secretName); err != nil {
		srv.Close()
		return nil, err
	}
	if err := m.Add(srv); err != nil {
		srv.Close()
		return nil, err
	}
	return srv, nil
}

// webhookCerts sets up the certificates of mode and adds what keeps them
// fresh to the manager.
func (m *Manager) webhookCerts(ctx context.Context, mode Certificates, opts WebhookOptions, inj *webhook.Injector, dns []string, ips []net.IP, secretNS, secretName string) error {
	switch mode {
	case CertsProvided:
		return nil
	case CertsLocal:
		certs, err := webhook.NewCerts(webhook.CertOptions{Dir: opts.CertDir, DNSNames: dns, IPs: ips, Logger: m.log, PropagationDelay: opts.PropagationDelay})
		if err == nil {
			err = certs.Ensure()
		}
		if err != nil {
			return err
		}
		certs.OnRotate(inj.Inject)
		return m.Add(RunnableFunc(certs.Start))
	case CertsShared:
		shared, err := webhook.NewSharedCA(webhook.SharedCAOptions{
			REST: m.rc, Namespace: secretNS, Name: secretName, PropagationDelay: opts.PropagationDelay, Logger: m.log,
		})
		if err != nil {
			return err
		}
		ca, err := shared.Load(ctx)
		if err != nil {
			return err
		}
		certs, err := webhook.NewCerts(webhook.CertOptions{Dir: opts.CertDir, DNSNames: dns, IPs: ips, CA: ca, Logger: m.log})
		if err == nil {
			err = certs.Ensure()
		}
		if err != nil {
			return err
		}
		shared.Follow(certs)
		if len(opts.ValidatingConfigs)+len(opts.MutatingConfigs)+len(opts.CRDs) > 0 {
			shared.OnRotate(inj.Inject)
		}
		if err := m.Add(RunnableFunc(certs.Start)); err != nil {
			return err
		}
		if err := m.Add(RunnableFunc(shared.Start)); err != nil {
			return err
		}
		return m.Add(leaderFunc(shared.Lead))
	default:
		return fmt.Errorf("%w: unknown Certificates %d", ErrWebhookOptions, mode)
	}
}

// leaderFunc is a Runnable that runs on the leader only.
type leaderFunc func(ctx context.Context) error

func (f leaderFunc) Start(ctx context.Context) error { return f(ctx) }

func (leaderFunc) NeedLeaderElection() bool { return true }
