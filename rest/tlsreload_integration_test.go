package rest_test

import (
	"context"
	"os"
	"path/filepath"
	"testing"
	"time"

	authnv1 "k8s.io/api/authentication/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// TestIntegrationTLSReloadClientCertificate rotates the client certificate
// file of a client that has a watch open: new requests authenticate with
// the new certificate, and the watch keeps delivering events.
func TestIntegrationTLSReloadClientCertificate(t *testing.T) {
	e := env(t)
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	ns := createNamespace(t, adminClient(t, rest.JSON))

	dir := t.TempDir()
	caFile, certFile, keyFile := filepath.Join(dir, "ca.crt"), filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	writeUser := func(user string) {
		t.Helper()
		cert, key, err := e.UserCert(user, "system:masters")
		if err != nil {
			t.Fatal(err)
		}
		// Key first, then certificate, each renamed into place: between
		// the two the files do not match, and the client must keep the
		// previous pair.
		for _, f := range []struct {
			path string
			b    []byte
		}{{keyFile, key}, {certFile, cert}} {
			if err := os.WriteFile(f.path+".tmp", f.b, 0o600); err != nil {
				t.Fatal(err)
			}
			if err := os.Rename(f.path+".tmp", f.path); err != nil {
				t.Fatal(err)
			}
		}
	}
	if err := os.WriteFile(caFile, e.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	writeUser("rotating-alice")

	// A kubeconfig that names the files, relative to its folder, as
	// certificate-rotating tools write them.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(`apiVersion: v1
kind: Config
clusters:
- name: c
  cluster:
    server: `+e.URL+`
    certificate-authority: ca.crt
users:
- name: u
  user:
    client-certificate: tls.crt
    client-key: tls.key
contexts:
- name: c
  context: {cluster: c, user: u}
current-context: c
`), 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.TLS.CAFile != caFile || cfg.TLS.CertFile != certFile || cfg.TLS.KeyFile != keyFile {
		t.Fatalf("TLS %v", cfg.TLS)
	}
	c, err := rest.New(cfg, rest.Options{TLSReload: rest.TLSReloadOptions{Interval: 10 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	whoami := func() string {
		t.Helper()
		var r authnv1.SelfSubjectReview
		if err := c.Post().AbsPath("/apis/authentication.k8s.io/v1/selfsubjectreviews").Body(&authnv1.SelfSubjectReview{}).Do(ctx, &r); err != nil {
			t.Fatal(err)
		}
		return r.Status.UserInfo.Username
	}
	if u := whoami(); u != "rotating-alice" {
		t.Fatalf("user %q, want rotating-alice", u)
	}

	w, err := rest.Watch[corev1.ConfigMap](ctx, c.Get().Namespace(ns).Resource("configmaps").
		Options(&metav1.ListOptions{AllowWatchBookmarks: true}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	create := func(name string) {
		t.Helper()
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
		if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(ctx, nil); err != nil {
			t.Fatal(err)
		}
	}
	waitAdded := func(name string) {
		t.Helper()
		for {
			ev, err := w.Next()
			if err != nil {
				t.Fatalf("waiting for %s: the watch ended: %v", name, err)
			}
			if ev.Type == watch.Added && ev.Object.Name == name {
				return
			}
		}
	}
	create("before")
	waitAdded("before")

	writeUser("rotating-bob")
	// New connections use the new certificate; close the idle ones so the
	// next request cannot reuse one.
	c.CloseIdleConnections()
	for u := whoami(); u != "rotating-bob"; u = whoami() {
		if u != "rotating-alice" {
			t.Fatalf("user %q", u)
		}
		select {
		case <-ctx.Done():
			t.Fatal("the client never used the new certificate")
		case <-time.After(50 * time.Millisecond):
		}
	}

	// The watch opened with the old certificate is still delivering.
	create("after")
	waitAdded("after")
	if u := whoami(); u != "rotating-bob" {
		t.Errorf("user %q after the watch event, want rotating-bob", u)
	}
}
