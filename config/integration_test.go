package config_test

import (
	"net/url"
	"os"
	"path/filepath"
	"strings"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{}

func TestMain(m *testing.M) { shared.Main(m) }

func env(t *testing.T) *testenv.Env { return shared.Env(t) }

func ping(t *testing.T, cfg config.Config) error {
	t.Helper()
	c, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil)
}

// TestIntegrationKubeconfigList loads the admin kubeconfig through a
// KUBECONFIG list whose first file overrides the current context and adds
// a token user defined with relative paths.
func TestIntegrationKubeconfigList(t *testing.T) {
	e := env(t)
	dir := t.TempDir()
	sub := filepath.Join(dir, "sub")
	os.MkdirAll(sub, 0o700)
	os.WriteFile(filepath.Join(sub, "ca.crt"), e.CAPEM, 0o600)
	os.WriteFile(filepath.Join(sub, "token"), []byte(e.AdminToken+"\n"), 0o600)
	first := filepath.Join(dir, "first")
	os.WriteFile(first, []byte(`apiVersion: v1
kind: Config
current-context: via-token
clusters:
- name: tok-cluster
  cluster: {server: "`+e.URL+`", certificate-authority: sub/ca.crt}
users:
- name: tok-user
  user: {tokenFile: sub/token}
contexts:
- name: via-token
  context: {cluster: tok-cluster, user: tok-user, namespace: kube-system}
`), 0o600)
	getenv := func(k string) string {
		if k == "KUBECONFIG" {
			return first + string(filepath.ListSeparator) + e.KubeconfigPath
		}
		return ""
	}
	cfg, err := config.Load(config.LoadOptions{Getenv: getenv})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Context != "via-token" || cfg.Namespace != "kube-system" || cfg.Auth.BearerTokenFile != filepath.Join(sub, "token") {
		t.Fatalf("merged config = %v", cfg)
	}
	if err := ping(t, cfg); err != nil {
		t.Fatalf("token from a relative tokenFile: %v", err)
	}
	// The second file's current-context is shadowed, but its context can
	// be chosen by name.
	admin, err := config.Parse(e.Kubeconfig, e.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	cfg, err = config.Load(config.LoadOptions{Getenv: getenv, Overrides: config.Overrides{Context: admin.CurrentContext}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(t, cfg); err != nil {
		t.Fatalf("client certificate context from the second file: %v", err)
	}
	// Server override: the same server by another name for the host.
	u, _ := url.Parse(e.URL)
	cfg, err = config.Load(config.LoadOptions{Getenv: getenv, Overrides: config.Overrides{Server: "https://localhost:" + u.Port()}})
	if err != nil {
		t.Fatal(err)
	}
	if err := ping(t, cfg); err != nil && !strings.Contains(err.Error(), "TLS verification") {
		t.Fatalf("server override: %v", err)
	}
}

// TestIntegrationInCluster builds a fake service-account folder and checks
// that the token is re-read when it rotates (here: after a 401).
func TestIntegrationInCluster(t *testing.T) {
	e := env(t)
	dir := t.TempDir()
	os.WriteFile(filepath.Join(dir, "ca.crt"), e.CAPEM, 0o600)
	os.WriteFile(filepath.Join(dir, "namespace"), []byte("default"), 0o600)
	os.WriteFile(filepath.Join(dir, "token"), []byte("an-old-token"), 0o600)
	u, _ := url.Parse(e.URL)
	vars := map[string]string{"KUBERNETES_SERVICE_HOST": u.Hostname(), "KUBERNETES_SERVICE_PORT": u.Port()}
	cfg, err := config.InCluster(config.InClusterOptions{Dir: dir, Getenv: func(k string) string { return vars[k] }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	get := func() error { return c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil) }
	if err := get(); !apierrors.IsUnauthorized(err) {
		t.Fatalf("old token: %v, want Unauthorized", err)
	}
	os.WriteFile(filepath.Join(dir, "token"), []byte(e.AdminToken), 0o600) // the kubelet rotates it
	if err := get(); err != nil {
		t.Fatalf("rotated token: %v", err)
	}
}
