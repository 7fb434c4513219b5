package webhook_test

import (
	"context"
	"encoding/pem"
	"fmt"
	"log"
	"net"
	"os"
	"path/filepath"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/webhook"
)

// Certs makes a CA and a serving certificate for the webhook's Service
// name, and writes them where the server reads them.
func ExampleCerts() {
	dir, _ := os.MkdirTemp("", "webhook-certs")
	defer os.RemoveAll(dir)

	certs, err := webhook.NewCerts(webhook.CertOptions{
		Dir:      dir,
		DNSNames: []string{"at-webhook.at-system.svc"},
		IPs:      []net.IP{net.ParseIP("127.0.0.1")},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := certs.Ensure(); err != nil {
		log.Fatal(err)
	}
	for _, name := range []string{webhook.ServingCertFile, webhook.ServingKeyFile, webhook.CABundleFile, webhook.CAKeyFile} {
		st, _ := os.Stat(filepath.Join(dir, name))
		fmt.Println(name, st.Mode().Perm())
	}
	block, _ := pem.Decode(certs.CABundle())
	fmt.Println("CA bundle:", block.Type)
	// Output:
	// tls.crt -rw-r--r--
	// tls.key -rw-------
	// ca.crt -rw-r--r--
	// ca.key -rw-------
	// CA bundle: CERTIFICATE
}

// An operator keeps its webhook certificates fresh and their CA bundle
// injected into its webhook configurations and CRDs, with no cert-manager:
// Certs renews, and calls the Injector whenever the bundle changes (and once
// at start). Add certs to a manager as a runnable, next to the webhook
// server reading the same folder. It needs a running API server, so it is
// compiled, not run.
func ExampleInjector() {
	ctx := context.Background()
	cfg, err := config.Load(config.LoadOptions{})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	certs, err := webhook.NewCerts(webhook.CertOptions{
		Dir:      "/tmp/at-webhook-certs",
		DNSNames: []string{"at-webhook.at-system.svc"},
	})
	if err != nil {
		log.Fatal(err)
	}
	if err := certs.Ensure(); err != nil {
		log.Fatal(err)
	}
	inj := &webhook.Injector{
		REST:              rc,
		ValidatingConfigs: []string{"at-validating"},
		MutatingConfigs:   []string{"at-mutating"},
		CRDs:              []string{"ats.cnat.programming-kubernetes.info"},
		// For a webhook running on this machine (tests, local runs), point
		// the configurations at it instead of at the in-cluster Service:
		// URL: "https://127.0.0.1:9443",
	}
	certs.OnRotate(inj.Inject)
	if err := certs.Start(ctx); err != nil { // blocks; usually mgr.Add(certs)
		log.Fatal(err)
	}
}

// SharedCA gives every replica of a webhook the same CA, kept in a Secret:
// each replica loads it, signs its own serving certificate with it, and
// follows its changes; the leader alone publishes it and rotates it.
// (manager.Manager.Webhooks does all of this for an operator.) It needs a
// running API server, so it is compiled, not run.
func ExampleSharedCA() {
	cfg, err := config.Load(config.LoadOptions{InClusterFallback: true})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		log.Fatal(err)
	}
	ctx := context.Background()
	shared, err := webhook.NewSharedCA(webhook.SharedCAOptions{REST: rc, Namespace: "at-system", Name: "at-webhook-ca"})
	if err != nil {
		log.Fatal(err)
	}
	ca, err := shared.Load(ctx) // creates the Secret, or reads the CA in it
	if err != nil {
		log.Fatal(err)
	}
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: "/tmp/at-certs", DNSNames: []string{"at-webhook.at-system.svc"}, CA: ca})
	if err != nil {
		log.Fatal(err)
	}
	shared.Follow(certs)
	inj := &webhook.Injector{REST: rc, ValidatingConfigs: []string{"at-validating-webhook-configuration"}}
	shared.OnRotate(inj.Inject)
	go func() { _ = certs.Start(ctx) }()
	go func() { _ = shared.Start(ctx) }() // every replica
	_ = shared.Lead(ctx)                  // the leader only
}
