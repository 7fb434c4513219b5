package rest_test

import (
	"context"
	"encoding/base64"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/oidctest"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// TestIntegrationOIDC runs the oidc auth provider against kube-apiserver
// configured to trust a test issuer, so that every id-token is verified by
// the real server: a short-lived id-token is used until it expires and
// then refreshed, the refreshed tokens are written back to the kubeconfig
// file, ten concurrent requests after an expiry make one refresh, and
// kubectl works with the same file.
func TestIntegrationOIDC(t *testing.T) {
	const clientSecret = "loom-test-secret"
	iss := oidctest.New(t, oidctest.Options{ClientSecret: clientSecret})
	dir := t.TempDir()
	caFile := filepath.Join(dir, "idp-ca.crt")
	if err := os.WriteFile(caFile, iss.CAPEM, 0o600); err != nil {
		t.Fatal(err)
	}
	e := testenv.New(t, testenv.Options{APIServerArgs: []string{
		"--oidc-issuer-url=" + iss.URL,
		"--oidc-client-id=loom",
		"--oidc-ca-file=" + caFile,
		"--oidc-username-claim=sub",
		"--oidc-username-prefix=oidc:",
	}})
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	grantNamespaceReader(t, ctx, e, "oidc:alice")

	// kube-apiserver fetches the issuer's discovery document and keys in
	// the background after it starts: wait until it accepts an id-token
	// (one without a refresh-token, so that this wait refreshes nothing).
	waitClient, err := rest.New(config.Config{Host: e.URL, TLS: config.TLS{CAData: e.CAPEM}, Auth: config.Auth{OIDC: &config.OIDC{
		IssuerURL: iss.URL, ClientID: "loom", IDToken: iss.IDToken("alice", time.Now().Add(time.Hour)), CAData: iss.CAPEM,
	}}}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer waitClient.CloseIdleConnections()
	poll(t, ctx, "kube-apiserver accepts the issuer's id-tokens", func() (bool, error) {
		return waitClient.Get().Resource("namespaces").Name("default").Do(ctx, nil) == nil, nil
	})
	if n := iss.Refreshes(); n != 0 {
		t.Fatalf("%d refreshes before the test began", n)
	}

	// The kubeconfig: alice's id-token expires 20s from now, which the
	// client takes as 10s (it refreshes 10s early); bob and the comments
	// must survive the write-backs.
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`# test kubeconfig
apiVersion: v1
kind: Config
current-context: alice
clusters:
- name: test
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: bob # not alice
  user: {token: bobs-token}
- name: alice
  user:
    auth-provider:
      name: oidc
      config:
        idp-issuer-url: %s
        client-id: loom
        client-secret: %s
        idp-certificate-authority: %s
        id-token: %s
        refresh-token: %s
contexts:
- name: alice
  context: {cluster: test, user: alice}
`, e.URL, base64.StdEncoding.EncodeToString(e.CAPEM), iss.URL, clientSecret, caFile,
		iss.IDToken("alice", time.Now().Add(20*time.Second)), iss.RefreshToken("alice"))), 0o640); err != nil {
		t.Fatal(err)
	}
	client := func() *rest.Client {
		cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
		if err != nil {
			t.Fatal(err)
		}
		c, err := rest.New(cfg, rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		t.Cleanup(c.CloseIdleConnections)
		return c
	}
	get := func(c *rest.Client) error {
		var ns corev1.Namespace
		return c.Get().Resource("namespaces").Name("default").Do(ctx, &ns)
	}
	// wantFile checks that the kubeconfig holds the issuer's last tokens,
	// and that the rest of it is still there.
	wantFile := func(t *testing.T, comments bool) {
		t.Helper()
		b, err := os.ReadFile(kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		kc, err := config.Parse(b, kubeconfig)
		if err != nil {
			t.Fatal(err)
		}
		id, refresh, _ := iss.Last()
		got := kc.Users["alice"].AuthProvider.Config
		if got[config.OIDCIDToken] != id || got[config.OIDCRefreshToken] != refresh {
			t.Error("the kubeconfig does not hold the refreshed tokens")
		}
		if got[config.OIDCClientSecret] != clientSecret || got[config.OIDCCAFile] != caFile || kc.Users["bob"].Token != "bobs-token" {
			t.Errorf("other content of the kubeconfig was lost:\n%s", b)
		}
		if comments && (!strings.Contains(string(b), "# test kubeconfig") || !strings.Contains(string(b), "# not alice")) {
			t.Errorf("comments were lost:\n%s", b)
		}
		if fi, err := os.Stat(kubeconfig); err != nil || fi.Mode().Perm() != 0o640 {
			t.Errorf("kubeconfig mode %v (%v), want 0640", fi.Mode(), err)
		}
	}

	t.Run("used until it expires, then refreshed and written back", func(t *testing.T) {
		c := client()
		if err := get(c); err != nil {
			t.Fatal(err)
		}
		if n := iss.Refreshes(); n != 0 {
			t.Fatalf("%d refreshes while the id-token is valid", n)
		}
		// Every request succeeds, before and after the id-token expires.
		poll(t, ctx, "the id-token expires and is refreshed", func() (bool, error) {
			return iss.Refreshes() > 0, get(c)
		})
		if err := get(c); err != nil {
			t.Fatal(err)
		}
		if n := iss.Refreshes(); n != 1 {
			t.Fatalf("%d refreshes, want 1", n)
		}
		wantFile(t, true)
	})

	t.Run("ten concurrent requests after expiry refresh once", func(t *testing.T) {
		_, refresh, _ := iss.Last()
		setTokens(t, kubeconfig, iss.IDToken("alice", time.Now().Add(-time.Minute)), refresh)
		before := iss.Refreshes()
		c := client()
		var wg sync.WaitGroup
		errs := make(chan error, 10)
		for range 10 {
			wg.Go(func() { errs <- get(c) })
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
		if n := iss.Refreshes() - before; n != 1 {
			t.Errorf("%d refreshes for ten concurrent requests, want 1", n)
		}
		wantFile(t, true)
	})

	t.Run("kubectl uses and refreshes the same kubeconfig", func(t *testing.T) {
		kubectl := func() {
			t.Helper()
			out, err := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"), "--kubeconfig", kubeconfig,
				"--cache-dir", filepath.Join(dir, "kubectl-cache"), "get", "namespace", "default", "-o", "name").CombinedOutput()
			if err != nil || strings.TrimSpace(string(out)) != "namespace/default" {
				t.Fatalf("kubectl: %v\n%s", err, out)
			}
		}
		before := iss.Refreshes()
		kubectl() // with the valid id-token Loom wrote
		if n := iss.Refreshes() - before; n != 0 {
			t.Fatalf("kubectl refreshed a valid id-token %d times", n)
		}
		_, refresh, _ := iss.Last()
		setTokens(t, kubeconfig, iss.IDToken("alice", time.Now().Add(-time.Minute)), refresh)
		kubectl()
		if n := iss.Refreshes() - before; n != 1 {
			t.Fatalf("kubectl made %d refreshes, want 1", n)
		}
		wantFile(t, false) // kubectl rewrites the whole file, without comments
		// And Loom reads what kubectl wrote.
		if err := get(client()); err != nil {
			t.Fatal(err)
		}
		if n := iss.Refreshes() - before; n != 1 {
			t.Errorf("%d refreshes, want still 1", n)
		}
	})
}

// setTokens puts alice's tokens in the kubeconfig.
func setTokens(t *testing.T, kubeconfig, idToken, refreshToken string) {
	t.Helper()
	if err := config.UpdateAuthProviderConfig(t.Context(), kubeconfig, "alice", map[string]string{
		config.OIDCIDToken: idToken, config.OIDCRefreshToken: refreshToken,
	}); err != nil {
		t.Fatal(err)
	}
}

// grantNamespaceReader lets user get namespaces.
func grantNamespaceReader(t *testing.T, ctx context.Context, e *testenv.Env, user string) {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: e.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	admin, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	role := &rbacv1.ClusterRole{
		ObjectMeta: metav1.ObjectMeta{Name: "namespace-reader"},
		Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"namespaces"}, Verbs: []string{"get", "list"}}},
	}
	binding := &rbacv1.ClusterRoleBinding{
		ObjectMeta: metav1.ObjectMeta{Name: "namespace-reader"},
		RoleRef:    rbacv1.RoleRef{APIGroup: rbacv1.GroupName, Kind: "ClusterRole", Name: role.Name},
		Subjects:   []rbacv1.Subject{{APIGroup: rbacv1.GroupName, Kind: rbacv1.UserKind, Name: user}},
	}
	rbac := func() *rest.Request { return admin.Post().Group(rbacv1.GroupName).Version("v1") }
	if err := rbac().Resource("clusterroles").Body(role).Do(ctx, nil); err != nil {
		t.Fatal(err)
	}
	if err := rbac().Resource("clusterrolebindings").Body(binding).Do(ctx, nil); err != nil {
		t.Fatal(err)
	}
}

// poll calls cond every 100ms until it returns true, failing the test
// when it returns an error, or when ctx ends or two minutes pass.
func poll(t *testing.T, ctx context.Context, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("%s: %v", what, err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("%s: not within 2m", what)
		case <-tick.C:
		}
	}
}
