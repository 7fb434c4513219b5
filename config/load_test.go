package config

import (
	"errors"
	"flag"
	"io/fs"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"
)

// writeFiles writes name → content under dir and returns dir.
func writeFiles(t *testing.T, files map[string]string) string {
	t.Helper()
	dir := t.TempDir()
	for name, content := range files {
		p := filepath.Join(dir, name)
		if err := os.MkdirAll(filepath.Dir(p), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(p, []byte(content), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

const fileA = `apiVersion: v1
kind: Config
current-context: a
clusters:
- name: shared
  cluster: {server: "https://a.example:6443", certificate-authority: ca.crt}
- name: onlya
  cluster: {server: "https://onlya.example"}
users:
- name: shared
  user: {token: token-from-a}
contexts:
- name: a
  context: {cluster: shared, user: shared, namespace: ns-a}
- name: both
  context: {cluster: shared, user: shared, namespace: from-a}
`

const fileB = `apiVersion: v1
kind: Config
current-context: b
clusters:
- name: shared
  cluster: {server: "https://b.example:6443"}
- name: onlyb
  cluster: {server: "https://onlyb.example", insecure-skip-tls-verify: true}
users:
- name: shared
  user: {token: token-from-b}
- name: certuser
  user: {client-certificate: sub/c.crt, client-key: sub/c.key}
contexts:
- name: b
  context: {cluster: onlyb, user: certuser}
- name: both
  context: {cluster: onlyb, user: shared, namespace: from-b}
`

const fileNoCurrent = `clusters:
- name: c
  cluster: {server: "https://c.example"}
contexts:
- name: c
  context: {cluster: c}
`

// TestLoadMergeRules is the table of kubectl's KUBECONFIG precedence rules.
func TestLoadMergeRules(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"a/config":          fileA,
		"a/ca.crt":          "ca",
		"b/config":          fileB,
		"b/sub/c.crt":       "cert",
		"b/sub/c.key":       "key",
		"c/config":          fileNoCurrent,
		"home/.kube/config": strings.ReplaceAll(fileNoCurrent, "c.example", "home.example") + "current-context: c\n",
	})
	a, b, c := filepath.Join(dir, "a/config"), filepath.Join(dir, "b/config"), filepath.Join(dir, "c/config")
	list := func(p ...string) string { return strings.Join(p, string(filepath.ListSeparator)) }
	tests := []struct {
		name      string
		path      string
		env       string
		over      Overrides
		wantHost  string
		wantNS    string
		wantToken string
		wantCtx   string
		wantCA    string
		wantCert  string
		wantInsec bool
		wantErr   string
	}{
		{name: "explicit path only", path: b, env: list(a), wantHost: "https://onlyb.example", wantNS: "default", wantCtx: "b", wantInsec: true, wantCert: filepath.Join(dir, "b/sub/c.crt")},
		{name: "first current-context wins", env: list(a, b), wantHost: "https://a.example:6443", wantNS: "ns-a", wantToken: "token-from-a", wantCtx: "a", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "first current-context wins reversed", env: list(b, a), wantHost: "https://onlyb.example", wantNS: "default", wantCtx: "b", wantInsec: true, wantCert: filepath.Join(dir, "b/sub/c.crt")},
		{name: "first file to define a context name wins", env: list(a, b), over: Overrides{Context: "both"}, wantHost: "https://a.example:6443", wantNS: "from-a", wantToken: "token-from-a", wantCtx: "both", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "context from later file, cluster and user maps first-wins", env: list(b, a), over: Overrides{Context: "a"}, wantHost: "https://b.example:6443", wantNS: "ns-a", wantToken: "token-from-b", wantCtx: "a"},
		{name: "entries are not merged field by field", env: list(b, a), over: Overrides{Context: "both"}, wantHost: "https://onlyb.example", wantNS: "from-b", wantToken: "token-from-b", wantCtx: "both", wantInsec: true},
		{name: "missing files in list are skipped", env: list(filepath.Join(dir, "nope"), c), wantErr: "current-context"},
		{name: "empty and duplicate list entries", env: list("", a, a, ""), wantHost: "https://a.example:6443", wantNS: "ns-a", wantToken: "token-from-a", wantCtx: "a", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "no current-context in first file, later one sets it", env: list(c, a), wantHost: "https://a.example:6443", wantNS: "ns-a", wantToken: "token-from-a", wantCtx: "a", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "home config when no KUBECONFIG", wantHost: "https://home.example", wantNS: "default", wantCtx: "c"},
		{name: "namespace override", env: list(a), over: Overrides{Namespace: "x"}, wantHost: "https://a.example:6443", wantNS: "x", wantToken: "token-from-a", wantCtx: "a", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "server override keeps CA", env: list(a), over: Overrides{Server: "https://other:1"}, wantHost: "https://other:1", wantNS: "ns-a", wantToken: "token-from-a", wantCtx: "a", wantCA: filepath.Join(dir, "a/ca.crt")},
		{name: "cluster override", env: list(a), over: Overrides{Cluster: "onlya"}, wantHost: "https://onlya.example", wantNS: "ns-a", wantToken: "token-from-a", wantCtx: "a"},
		{name: "user override", env: list(a, b), over: Overrides{User: "certuser", Cluster: "onlyb"}, wantHost: "https://onlyb.example", wantNS: "ns-a", wantCtx: "a", wantInsec: true, wantCert: filepath.Join(dir, "b/sub/c.crt")},
		{name: "unknown context override", env: list(a), over: Overrides{Context: "zzz"}, wantErr: `context override: context "zzz" not found`},
		{name: "unknown cluster override", env: list(a), over: Overrides{Cluster: "zzz"}, wantErr: `cluster override: cluster "zzz" not found`},
		{name: "unknown user override", env: list(a), over: Overrides{User: "zzz"}, wantErr: `user override: user "zzz" not found`},
		{name: "explicit missing file", path: filepath.Join(dir, "missing"), wantErr: "no such file"},
		{name: "nothing anywhere", env: list(filepath.Join(dir, "nope")), wantErr: "no kubeconfig found"},
		{name: "nothing anywhere but server override", env: list(filepath.Join(dir, "nope")), over: Overrides{Server: "https://s"}, wantHost: "https://s", wantNS: "default"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			opts := LoadOptions{
				Path:      tt.path,
				Overrides: tt.over,
				HomeDir:   filepath.Join(dir, "home"),
				Getenv: func(k string) string {
					if k == "KUBECONFIG" {
						return tt.env
					}
					return ""
				},
			}
			cfg, err := Load(opts)
			if tt.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("Load error = %v, want containing %q", err, tt.wantErr)
				}
				return
			}
			if err != nil {
				t.Fatalf("Load: %v", err)
			}
			if cfg.Host != tt.wantHost || cfg.Namespace != tt.wantNS || cfg.Auth.BearerToken != tt.wantToken || cfg.Context != tt.wantCtx ||
				cfg.TLS.CAFile != tt.wantCA || cfg.TLS.CertFile != tt.wantCert || cfg.TLS.Insecure != tt.wantInsec {
				t.Errorf("got host=%q ns=%q token=%q ctx=%q ca=%q cert=%q insecure=%v\nwant host=%q ns=%q token=%q ctx=%q ca=%q cert=%q insecure=%v",
					cfg.Host, cfg.Namespace, cfg.Auth.BearerToken, cfg.Context, cfg.TLS.CAFile, cfg.TLS.CertFile, cfg.TLS.Insecure,
					tt.wantHost, tt.wantNS, tt.wantToken, tt.wantCtx, tt.wantCA, tt.wantCert, tt.wantInsec)
			}
		})
	}
}

// withUser is a kubeconfig whose current context uses the user u given as
// a YAML flow mapping.
func withUser(user string) string {
	return "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: " + user + "\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n"
}

// TestErrorsNameFileAndField checks that each kind of mistake is reported as
// a *Error naming the file that holds it and the field.
func TestErrorsNameFileAndField(t *testing.T) {
	tests := []struct {
		name      string
		content   string
		over      Overrides
		wantField string
		wantIs    error
	}{
		{name: "malformed yaml", content: "clusters: [\n  - {", wantField: ""},
		{name: "wrong type", content: "clusters: 7\n", wantField: ""},
		{name: "wrong kind", content: "kind: Pod\n", wantField: "kind"},
		{name: "unknown current-context", content: "current-context: nope\n", wantField: "current-context"},
		{name: "context names missing cluster", content: "current-context: x\ncontexts:\n- name: x\n  context: {cluster: gone, user: u}\n", wantField: `contexts["x"].cluster`},
		{name: "context names missing user", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\ncontexts:\n- name: x\n  context: {cluster: c, user: gone}\n", wantField: `contexts["x"].user`},
		{name: "missing cert file", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: {client-certificate: nope.crt, client-key: nope.key}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", wantField: `users["u"].client-certificate`, wantIs: fs.ErrNotExist},
		{name: "missing CA file", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s, certificate-authority: /nonexistent/ca}\ncontexts:\n- name: x\n  context: {cluster: c}\n", wantField: `clusters["c"].certificate-authority`, wantIs: fs.ErrNotExist},
		{name: "missing token file", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: {tokenFile: tok}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", wantField: `users["u"].tokenFile`, wantIs: fs.ErrNotExist},
		{name: "cert without key", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: {client-certificate-data: Y2VydA==}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", wantField: `users["u"].client-key`},
		{name: "bad base64", content: "users:\n- name: u\n  user: {client-key-data: '!!!'}\n", wantField: ""},
		{name: "no server", content: "current-context: x\nclusters:\n- name: c\n  cluster: {}\ncontexts:\n- name: x\n  context: {cluster: c}\n", wantField: `clusters["c"].server`},
		{name: "insecure with CA", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s, insecure-skip-tls-verify: true, certificate-authority-data: Y2E=}\ncontexts:\n- name: x\n  context: {cluster: c}\n", wantField: `clusters["c"].insecure-skip-tls-verify`},
		{name: "two auth methods", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: {token: t, username: a, password: b}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", wantField: `users["u"]`},
		{name: "exec without apiVersion", content: "current-context: x\nclusters:\n- name: c\n  cluster: {server: https://s}\nusers:\n- name: u\n  user: {exec: {command: foo}}\ncontexts:\n- name: x\n  context: {cluster: c, user: u}\n", wantField: `users["u"].exec.apiVersion`},
		{name: "removed auth provider", content: withUser("{auth-provider: {name: gcp}}"), wantField: `users["u"].auth-provider.name`},
		{name: "oidc without issuer", content: withUser("{auth-provider: {name: oidc, config: {client-id: k}}}"), wantField: `users["u"].auth-provider.config.idp-issuer-url`},
		{name: "oidc with an http issuer", content: withUser("{auth-provider: {name: oidc, config: {client-id: k, idp-issuer-url: 'http://idp'}}}"), wantField: `users["u"].auth-provider.config.idp-issuer-url`},
		{name: "oidc without client-id", content: withUser("{auth-provider: {name: oidc, config: {idp-issuer-url: 'https://idp'}}}"), wantField: `users["u"].auth-provider.config.client-id`},
		{name: "oidc CA file and data", content: withUser("{auth-provider: {name: oidc, config: {client-id: k, idp-issuer-url: 'https://idp', idp-certificate-authority: ca, idp-certificate-authority-data: Y2E=}}}"), wantField: `users["u"].auth-provider.config.idp-certificate-authority`},
		{name: "oidc CA data not base64", content: withUser("{auth-provider: {name: oidc, config: {client-id: k, idp-issuer-url: 'https://idp', idp-certificate-authority-data: '!!'}}}"), wantField: `users["u"].auth-provider.config.idp-certificate-authority-data`},
		{name: "oidc missing CA file", content: withUser("{auth-provider: {name: oidc, config: {client-id: k, idp-issuer-url: 'https://idp', idp-certificate-authority: nope.crt}}}"), wantField: `users["u"].auth-provider.config.idp-certificate-authority`, wantIs: fs.ErrNotExist},
		{name: "oidc and a token", content: withUser("{token: t, auth-provider: {name: oidc, config: {client-id: k, idp-issuer-url: 'https://idp'}}}"), wantField: `users["u"]`},
		{name: "exec v1 without interactiveMode", content: withUser("{exec: {command: foo, apiVersion: client.authentication.k8s.io/v1}}"), wantField: `users["u"].exec.interactiveMode`},
		{name: "exec unknown interactiveMode", content: withUser("{exec: {command: foo, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Sometimes}}"), wantField: `users["u"].exec.interactiveMode`},
		{name: "exec env without name", content: withUser("{exec: {command: foo, apiVersion: client.authentication.k8s.io/v1, interactiveMode: Never, env: [{name: A, value: b}, {value: c}]}}"), wantField: `users["u"].exec.env[1].name`},
		{name: "duplicate name", content: "clusters:\n- name: c\n  cluster: {server: https://s}\n- name: c\n  cluster: {server: https://t}\n", wantField: `clusters["c"]`},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"kc": tt.content})
			path := filepath.Join(dir, "kc")
			_, err := Load(LoadOptions{Path: path, Overrides: tt.over})
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Load error = %v (%T), want *config.Error", err, err)
			}
			if ce.File != path || ce.Field != tt.wantField {
				t.Errorf("error file=%q field=%q, want file=%q field=%q (%v)", ce.File, ce.Field, path, tt.wantField, err)
			}
			if !strings.Contains(err.Error(), path) {
				t.Errorf("error %q does not name the file", err)
			}
			if tt.wantIs != nil && !errors.Is(err, tt.wantIs) {
				t.Errorf("error %v is not %v", err, tt.wantIs)
			}
		})
	}
}

func TestResolveAuthForms(t *testing.T) {
	dir := writeFiles(t, map[string]string{
		"tok":        "tok",
		"idp/ca.crt": "ca",
		"kc": `current-context: x
clusters:
- name: c
  cluster: {server: https://s, tls-server-name: name.example, proxy-url: "http://u:secretpw@proxy:3128", certificate-authority-data: Y2E=}
users:
- name: u
  user:
    client-certificate-data: Y2VydA==
    client-key-data: a2V5
    tokenFile: tok
    as: bob
    as-uid: "42"
    as-groups: [g1, g2]
    as-user-extra: {scopes: [a, b]}
- name: basic
  user: {username: admin, password: pw}
- name: exec
  user:
    exec:
      apiVersion: client.authentication.k8s.io/v1
      command: ./bin/plugin
      args: [--x]
      env: [{name: SECRET, value: s3cret}]
      provideClusterInfo: true
      interactiveMode: Always
- name: exec-beta
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1beta1, command: plugin}
- name: oidc
  user:
    auth-provider:
      name: oidc
      config:
        idp-issuer-url: https://idp.example/realms/x
        client-id: loom
        client-secret: shh
        id-token: a.b.c
        refresh-token: r1
        idp-certificate-authority: idp/ca.crt
        extra-scopes: "groups, email"
contexts:
- name: x
  context: {cluster: c, user: u}
`,
	})
	path := filepath.Join(dir, "kc")
	cfg, err := Load(LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	if string(cfg.TLS.CertData) != "cert" || string(cfg.TLS.KeyData) != "key" || string(cfg.TLS.CAData) != "ca" {
		t.Errorf("TLS data not decoded: %#v", cfg.TLS)
	}
	if cfg.Auth.BearerTokenFile != filepath.Join(dir, "tok") {
		t.Errorf("token file = %q", cfg.Auth.BearerTokenFile)
	}
	if cfg.TLS.ServerName != "name.example" || cfg.ProxyURL != "http://u:secretpw@proxy:3128" {
		t.Errorf("server name / proxy: %q %q", cfg.TLS.ServerName, cfg.ProxyURL)
	}
	im := cfg.Impersonate
	if im.User != "bob" || im.UID != "42" || strings.Join(im.Groups, ",") != "g1,g2" || strings.Join(im.Extra["scopes"], ",") != "a,b" {
		t.Errorf("impersonation = %+v", im)
	}
	if strings.Contains(cfg.String(), "secretpw") {
		t.Errorf("proxy password not redacted: %s", cfg)
	}

	cfg, err = Load(LoadOptions{Path: path, Overrides: Overrides{User: "basic"}})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Auth.Username != "admin" || cfg.Auth.Password != "pw" {
		t.Errorf("basic auth = %v", cfg.Auth)
	}
	cfg, err = Load(LoadOptions{Path: path, Overrides: Overrides{User: "exec"}})
	if err != nil {
		t.Fatal(err)
	}
	e := cfg.Auth.Exec
	if e == nil || e.Command != filepath.Join(dir, "bin/plugin") || !e.ProvideClusterInfo || e.Env[0].Value != "s3cret" || e.InteractiveMode != "Always" {
		t.Errorf("exec = %#v", e)
	}
	cfg, err = Load(LoadOptions{Path: path, Overrides: Overrides{User: "exec-beta"}})
	if err != nil {
		t.Fatal(err)
	}
	if got := cfg.Auth.Exec.InteractiveMode; got != "IfAvailable" {
		t.Errorf("v1beta1 plugin without interactiveMode: %q, want kubectl's default IfAvailable", got)
	}
	cfg, err = Load(LoadOptions{Path: path, Overrides: Overrides{User: "oidc"}})
	if err != nil {
		t.Fatal(err)
	}
	want := &OIDC{IssuerURL: "https://idp.example/realms/x", ClientID: "loom", ClientSecret: "shh", IDToken: "a.b.c", RefreshToken: "r1",
		CAFile: filepath.Join(dir, "idp/ca.crt"), ExtraScopes: []string{"groups", "email"}}
	if !reflect.DeepEqual(cfg.Auth.OIDC, want) || cfg.Auth.User != "oidc" || cfg.Auth.Origin != path {
		t.Errorf("oidc = %#v user %q origin %q, want %#v", cfg.Auth.OIDC, cfg.Auth.User, cfg.Auth.Origin, want)
	}
}

// TestAuthProviders checks the typed error for each provider Loom does not
// implement, and that it names the exec plugin that replaces a removed one.
func TestAuthProviders(t *testing.T) {
	for _, tt := range []struct{ name, plugin string }{
		{"gcp", "gke-gcloud-auth-plugin"},
		{"azure", "kubelogin"},
		{"openstack", ""},
	} {
		t.Run(tt.name, func(t *testing.T) {
			dir := writeFiles(t, map[string]string{"kc": withUser("{auth-provider: {name: " + tt.name + "}}")})
			_, err := Load(LoadOptions{Path: filepath.Join(dir, "kc")})
			var ue *UnsupportedAuthProviderError
			if !errors.As(err, &ue) || ue.Name != tt.name || ue.Plugin != tt.plugin {
				t.Fatalf("err = %v, want an UnsupportedAuthProviderError for %s naming %q", err, tt.name, tt.plugin)
			}
			if tt.plugin != "" && !strings.Contains(err.Error(), tt.plugin) {
				t.Errorf("error %q does not name the plugin", err)
			}
		})
	}
}

func TestInCluster(t *testing.T) {
	dir := writeFiles(t, map[string]string{"token": "tok", "ca.crt": "ca", "namespace": "kube-system\n"})
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "fd00::1", "KUBERNETES_SERVICE_PORT": "443"}
	cfg, err := InCluster(InClusterOptions{Dir: dir, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://[fd00::1]:443" || cfg.Namespace != "kube-system" || cfg.Auth.BearerTokenFile != filepath.Join(dir, "token") || cfg.TLS.CAFile != filepath.Join(dir, "ca.crt") {
		t.Errorf("InCluster = %v", cfg)
	}
	if _, err := InCluster(InClusterOptions{Dir: dir, Getenv: func(string) string { return "" }}); !errors.Is(err, ErrNotInCluster) {
		t.Errorf("without env: %v, want ErrNotInCluster", err)
	}
	empty := t.TempDir()
	_, err = InCluster(InClusterOptions{Dir: empty, Getenv: func(k string) string { return env[k] }})
	var ce *Error
	if !errors.As(err, &ce) || ce.File != filepath.Join(empty, "token") {
		t.Errorf("missing token: %v", err)
	}
}

func TestFlags(t *testing.T) {
	dir := writeFiles(t, map[string]string{"kc": fileA, "ca.crt": "ca"})
	var f Flags
	fs := flag.NewFlagSet("x", flag.ContinueOnError)
	f.Register(fs)
	if err := fs.Parse([]string{"--kubeconfig", filepath.Join(dir, "kc"), "--context", "both", "-n", "flagns"}); err != nil {
		t.Fatal(err)
	}
	cfg, err := f.Load()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Context != "both" || cfg.Namespace != "flagns" || cfg.Host != "https://a.example:6443" {
		t.Errorf("flags config = %v", cfg)
	}
}

func TestInClusterFallback(t *testing.T) {
	sa := writeFiles(t, map[string]string{"token": "tok", "ca.crt": "ca"})
	env := map[string]string{"KUBERNETES_SERVICE_HOST": "10.0.0.1", "KUBERNETES_SERVICE_PORT": "443"}
	opts := LoadOptions{
		HomeDir:           t.TempDir(),
		Getenv:            func(k string) string { return env[k] },
		InClusterFallback: true,
		InCluster:         InClusterOptions{Dir: sa, Getenv: func(k string) string { return env[k] }},
		Overrides:         Overrides{Namespace: "n1"},
	}
	cfg, err := Load(opts)
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Host != "https://10.0.0.1:443" || cfg.Namespace != "n1" || cfg.Origin != "in-cluster" {
		t.Errorf("fallback = %v", cfg)
	}
	opts.InCluster.Getenv = func(string) string { return "" }
	if _, err := Load(opts); !errors.Is(err, ErrNoConfig) || !errors.Is(err, ErrNotInCluster) {
		t.Errorf("no config anywhere: %v", err)
	}
}

func TestMarshalRoundTrip(t *testing.T) {
	kc, err := Parse([]byte(fileB), "")
	if err != nil {
		t.Fatal(err)
	}
	out, err := kc.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	kc2, err := Parse(out, "")
	if err != nil {
		t.Fatal(err)
	}
	if kc2.CurrentContext != "b" || len(kc2.Clusters) != 2 || kc2.Users["certuser"].ClientKey != "sub/c.key" || kc2.Contexts["both"].Namespace != "from-b" {
		t.Errorf("round trip lost data:\n%s", out)
	}
}
