package config_test

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"os"
	"path/filepath"

	"github.com/loom-k8s/loom/config"
)

func writeExampleKubeconfig() string {
	dir, _ := os.MkdirTemp("", "example")
	path := filepath.Join(dir, "config")
	os.WriteFile(path, []byte(`apiVersion: v1
kind: Config
current-context: dev
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443"}
users:
- name: dev
  user: {token: not-a-real-token}
contexts:
- name: dev
  context: {cluster: dev, user: dev, namespace: team-a}
`), 0o600)
	return path
}

func ExampleLoad() {
	path := writeExampleKubeconfig()
	defer os.RemoveAll(filepath.Dir(path))

	cfg, err := config.Load(config.LoadOptions{
		Path:      path,
		Overrides: config.Overrides{Namespace: "team-b"},
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Host, cfg.Namespace, cfg.Context)
	fmt.Println(cfg.Auth) // secrets are redacted
	// Output:
	// https://dev.example:6443 team-b dev
	// {BearerToken:[redacted] BearerTokenFile: Username: Password: Exec:<nil> OIDC:<nil>}
}

func ExampleLoad_unknownContext() {
	path := writeExampleKubeconfig()
	defer os.RemoveAll(filepath.Dir(path))

	_, err := config.Load(config.LoadOptions{Path: path, Overrides: config.Overrides{Context: "prod"}})
	var ce *config.Error
	if errors.As(err, &ce) {
		fmt.Println(ce.File == path, ce.Field, "-", ce.Err)
	}
	// Output:
	// true context override - context "prod" not found
}

func ExampleFlags() {
	path := writeExampleKubeconfig()
	defer os.RemoveAll(filepath.Dir(path))

	var flags config.Flags
	fs := flag.NewFlagSet("mytool", flag.ContinueOnError)
	flags.Register(fs)
	_ = fs.Parse([]string{"--kubeconfig", path, "-n", "kube-system"})

	cfg, err := flags.Load()
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Host, cfg.Namespace)
	// Output: https://dev.example:6443 kube-system
}

func ExampleParse() {
	kc, err := config.Parse([]byte("current-context: a\ncontexts:\n- name: a\n  context: {cluster: c, user: u}\n"), "/etc/kube/config")
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(kc.CurrentContext, kc.Contexts["a"].Cluster, kc.Contexts["a"].Origin)
	// Output: a c /etc/kube/config
}

func ExampleLoadKubeconfig() {
	path := writeExampleKubeconfig()
	defer os.RemoveAll(filepath.Dir(path))

	kc, err := config.LoadKubeconfig(config.LoadOptions{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	cfg, err := kc.Resolve(config.Overrides{Server: "https://127.0.0.1:6443"})
	fmt.Println(cfg.Host, err)
	// Output: https://127.0.0.1:6443 <nil>
}

func ExampleInCluster() {
	_, err := config.InCluster(config.InClusterOptions{Getenv: func(string) string { return "" }})
	fmt.Println(err)
	// Output: config: not running in a cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT must be set
}

func ExampleKubeconfig_Marshal() {
	kc, err := config.Parse([]byte(`current-context: a
contexts:
- name: a
  context: {cluster: c, user: u, namespace: ns}
clusters:
- name: c
  cluster: {server: "https://c.example"}
`), "")
	if err != nil {
		fmt.Println(err)
		return
	}
	out, _ := kc.Marshal()
	fmt.Print(string(out))
	// Output:
	// apiVersion: v1
	// clusters:
	// - cluster:
	//     server: https://c.example
	//   name: c
	// contexts:
	// - context:
	//     cluster: c
	//     namespace: ns
	//     user: u
	//   name: a
	// current-context: a
	// kind: Config
}

func ExampleUpdateAuthProviderConfig() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	os.WriteFile(path, []byte(`# my clusters
users:
- name: alice
  user:
    auth-provider:
      name: oidc
      config:
        idp-issuer-url: https://idp.example
        client-id: kubectl
        id-token: old
`), 0o600)

	err := config.UpdateAuthProviderConfig(context.Background(), path, "alice", map[string]string{
		config.OIDCIDToken:      "new",
		config.OIDCRefreshToken: "next",
	})
	if err != nil {
		fmt.Println(err)
		return
	}
	b, _ := os.ReadFile(path)
	fmt.Print(string(b))
	// Output:
	// # my clusters
	// users:
	//   - name: alice
	//     user:
	//       auth-provider:
	//         name: oidc
	//         config:
	//           idp-issuer-url: https://idp.example
	//           client-id: kubectl
	//           id-token: new
	//           refresh-token: next
}

func ExampleLoad_oidc() {
	dir, _ := os.MkdirTemp("", "example")
	defer os.RemoveAll(dir)
	path := filepath.Join(dir, "config")
	os.WriteFile(path, []byte(`current-context: dev
clusters:
- name: dev
  cluster: {server: "https://dev.example:6443"}
users:
- name: alice
  user:
    auth-provider:
      name: oidc
      config: {idp-issuer-url: "https://idp.example", client-id: kubectl, id-token: a.b.c, refresh-token: r}
- name: bob
  user:
    auth-provider: {name: gcp}
contexts:
- name: dev
  context: {cluster: dev, user: alice}
`), 0o600)

	cfg, err := config.Load(config.LoadOptions{Path: path})
	if err != nil {
		fmt.Println(err)
		return
	}
	fmt.Println(cfg.Auth.User, cfg.Auth.OIDC) // tokens are redacted

	_, err = config.Load(config.LoadOptions{Path: path, Overrides: config.Overrides{User: "bob"}})
	var unsupported *config.UnsupportedAuthProviderError
	if errors.As(err, &unsupported) {
		fmt.Println(unsupported.Name, "->", unsupported.Plugin)
	}
	// Output:
	// alice {IssuerURL:https://idp.example ClientID:kubectl ClientSecret: IDToken:[redacted] RefreshToken:[redacted] CAFile: CAData: ExtraScopes:[]}
	// gcp -> gke-gcloud-auth-plugin
}
