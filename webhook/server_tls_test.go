package webhook_test

import (
	"crypto/tls"
	"encoding/base64"
	"errors"
	"fmt"
	"net/http"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/webhook"
)

// startTLSServer runs a webhook server on 127.0.0.1 with the options
// set changes (see serveTLS), and returns its address and the CA bundle to
// trust.
func startTLSServer(t *testing.T, set func(*webhook.ServerOptions)) (addr string, bundle []byte) {
	t.Helper()
	srv, certs, _ := serveTLS(t, set)
	return srv.Addr().String(), certs.CABundle()
}

// negotiate dials addr offering only protos, and returns the protocol the
// server chose, or the handshake's error.
func negotiate(t *testing.T, addr string, bundle []byte, protos ...string) (string, error) {
	t.Helper()
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool(t, bundle), NextProtos: protos})
	if err != nil {
		return "", err
	}
	defer c.Close()
	return c.ConnectionState().NegotiatedProtocol, nil
}

// TestHTTP2 : a client offering only h2 gets no HTTP/2 by default; with
// EnableHTTP2, or a TLSConfig hook that offers h2, it does. A client that
// offers both gets HTTP/1.1 by default.
func TestHTTP2(t *testing.T) {
	addr, bundle := startTLSServer(t, nil)
	if p, err := negotiate(t, addr, bundle, "h2"); err == nil && p == "h2" {
		t.Fatal("default server negotiated h2")
	}
	if p, err := negotiate(t, addr, bundle, "h2", "http/1.1"); err != nil || p != "http/1.1" {
		t.Fatalf("default server with h2 and http/1.1 offered: %q, %v; want http/1.1", p, err)
	}
	// A real request offering both is served over HTTP/1.1.
	tr := &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, bundle)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 1 {
		t.Fatalf("default server answered over %s", resp.Proto)
	}

	on, bundle := startTLSServer(t, func(o *webhook.ServerOptions) { o.EnableHTTP2 = true })
	if p, err := negotiate(t, on, bundle, "h2"); err != nil || p != "h2" {
		t.Fatalf("EnableHTTP2: %q, %v; want h2", p, err)
	}
	hooked, bundle := startTLSServer(t, func(o *webhook.ServerOptions) {
		o.TLSConfig = func(c *tls.Config) { c.NextProtos = slices.Insert(c.NextProtos, 0, "h2") }
	})
	if p, err := negotiate(t, hooked, bundle, "h2"); err != nil || p != "h2" {
		t.Fatalf("TLSConfig hook offering h2: %q, %v; want h2", p, err)
	}
	tr = &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool(t, bundle)}, ForceAttemptHTTP2: true}
	defer tr.CloseIdleConnections()
	resp, err = (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + hooked + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.ProtoMajor != 2 {
		t.Fatalf("server with h2 hooked on answered over %s", resp.Proto)
	}
}

// TestTLSConfigHookHasTheLastWord: the hook can raise the minimum version.
func TestTLSConfigHookHasTheLastWord(t *testing.T) {
	addr, bundle := startTLSServer(t, func(o *webhook.ServerOptions) {
		o.TLSConfig = func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }
	})
	c, err := tls.Dial("tcp", addr, &tls.Config{RootCAs: pool(t, bundle), MaxVersion: tls.VersionTLS12})
	if err == nil {
		c.Close()
		t.Fatal("a TLS 1.2 handshake succeeded with MinVersion 1.3 set by the hook")
	}
}

// TestClientCAFile: with ClientCAFile, a caller without a client
// certificate, or with one another CA signed, is refused in the
// handshake; one signed by the CA is served. A missing or empty file is a
// typed error at NewServer.
func TestClientCAFile(t *testing.T) {
	now := time.Now()
	ca, err := pki.NewCA("callers", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	other, err := pki.NewCA("strangers", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	file := filepath.Join(t.TempDir(), "client-ca.crt")
	if err := os.WriteFile(file, ca.CertPEM, 0o644); err != nil {
		t.Fatal(err)
	}
	addr, bundle := startTLSServer(t, func(o *webhook.ServerOptions) { o.ClientCAFile = file })
	get := func(issuer *pki.CA) error {
		cfg := &tls.Config{RootCAs: pool(t, bundle)}
		if issuer != nil {
			pair, err := issuer.Issue(pki.Request{CommonName: "kube-apiserver"}, now)
			if err != nil {
				t.Fatal(err)
			}
			cert, err := tls.X509KeyPair(pair.CertPEM, pair.KeyPEM)
			if err != nil {
				t.Fatal(err)
			}
			cfg.Certificates = []tls.Certificate{cert}
		}
		tr := &http.Transport{TLSClientConfig: cfg}
		defer tr.CloseIdleConnections()
		resp, err := (&http.Client{Transport: tr, Timeout: 10 * time.Second}).Get("https://" + addr + "/healthz")
		if err != nil {
			return err
		}
		resp.Body.Close()
		return nil
	}
	if err := get(nil); err == nil {
		t.Error("a caller without a client certificate was served")
	}
	if err := get(other); err == nil {
		t.Error("a caller with a certificate of another CA was served")
	}
	if err := get(ca); err != nil {
		t.Errorf("a caller with a certificate of the client CA: %v", err)
	}

	for name, content := range map[string][]byte{"missing": nil, "empty": {}} {
		f := filepath.Join(t.TempDir(), "ca.crt")
		if content != nil {
			if err := os.WriteFile(f, content, 0o644); err != nil {
				t.Fatal(err)
			}
		}
		_, err := webhook.NewServer(webhook.ServerOptions{CertDir: t.TempDir(), ClientCAFile: f})
		if !errors.Is(err, webhook.ErrClientCA) {
			t.Errorf("%s client CA file: %v, want ErrClientCA", name, err)
		}
	}
}

// TestClientCAFileWithAPIServer: a kube-apiserver given a client
// certificate for its webhook calls (--admission-control-config-file, a
// kubeconfig whose user "*" matches every webhook) is served by a server
// whose ClientCAFile holds that certificate's CA, and refused by one whose
// ClientCAFile holds another CA.
func TestClientCAFileWithAPIServer(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	callers, err := pki.NewCA("webhook-callers", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	strangers, err := pki.NewCA("strangers", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := callers.Issue(pki.Request{CommonName: "kube-apiserver-webhook-client"}, now)
	if err != nil {
		t.Fatal(err)
	}
	b64 := base64.StdEncoding.EncodeToString
	kubeconfig := filepath.Join(dir, "webhook-kubeconfig")
	write := func(path, content string) {
		if err := os.WriteFile(path, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	write(kubeconfig, fmt.Sprintf("apiVersion: v1\nkind: Config\nusers:\n- name: \"*\"\n  user:\n    client-certificate-data: %s\n    client-key-data: %s\n",
		b64(pair.CertPEM), b64(pair.KeyPEM)))
	admission := filepath.Join(dir, "admission.yaml")
	var plugins strings.Builder
	for _, name := range []string{"ValidatingAdmissionWebhook", "MutatingAdmissionWebhook"} {
		fmt.Fprintf(&plugins, "- name: %s\n  configuration:\n    apiVersion: apiserver.config.k8s.io/v1\n    kind: WebhookAdmissionConfiguration\n    kubeConfigFile: %s\n", name, kubeconfig)
	}
	write(admission, "apiVersion: apiserver.config.k8s.io/v1\nkind: AdmissionConfiguration\nplugins:\n"+plugins.String())
	env := testenv.New(t, testenv.Options{APIServerArgs: []string{"--admission-control-config-file=" + admission}})
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}

	trusting := filepath.Join(dir, "callers.crt")
	write(trusting, string(callers.CertPEM))
	addr, bundle := startTLSServer(t, func(o *webhook.ServerOptions) { o.ClientCAFile = trusting })
	ns := namespace(t, rc, "client-ca")
	labels := map[string]string{"webhooked": "yes"}
	registerWebhooks(t, rc, ns, "https://"+addr, bundle, admissionregistrationv1.Fail, labels)
	waitServed(t, cms.Namespace(ns), labels)

	distrusting := filepath.Join(dir, "strangers.crt")
	write(distrusting, string(strangers.CertPEM))
	addr, bundle = startTLSServer(t, func(o *webhook.ServerOptions) { o.ClientCAFile = distrusting })
	other := namespace(t, rc, "client-ca-refused")
	registerWebhooks(t, rc, other, "https://"+addr, bundle, admissionregistrationv1.Fail, labels)
	deadline := time.Now().Add(time.Minute)
	for {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: labels}}
		_, err := cms.Namespace(other).Create(t.Context(), probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err != nil && strings.Contains(err.Error(), "failed calling webhook") {
			if !strings.Contains(err.Error(), "certificate") {
				t.Fatalf("the refused call failed for another reason: %v", err)
			}
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a server that distrusts the API server's client certificate was never refused (last: %v)", err)
		}
		time.Sleep(50 * time.Millisecond)
	}
}
