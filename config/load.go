package config

import (
	"errors"
	"fmt"
	"io/fs"
	"os"
	"path/filepath"
	"strings"
)

// Overrides replace values from the kubeconfig after merging. Empty fields
// override nothing.
type Overrides struct {
	// Context selects a context instead of current-context.
	Context string
	// Cluster replaces the selected context's cluster name.
	Cluster string
	// User replaces the selected context's user name.
	User string
	// Namespace replaces the context's namespace.
	Namespace string
	// Server replaces the selected cluster's server URL. The cluster's CA
	// and other TLS settings are kept.
	Server string
}

// LoadOptions configure [Load] and [LoadKubeconfig]. The zero value loads the
// kubeconfig the way kubectl does with no flags.
type LoadOptions struct {
	// Path is an explicit kubeconfig file. It must exist. When set, the
	// KUBECONFIG variable and ~/.kube/config are ignored.
	Path string
	// Overrides are applied after merging.
	Overrides Overrides
	// Getenv reads environment variables. Nil means os.Getenv.
	Getenv func(string) string
	// HomeDir is the directory that holds .kube/config. Empty means
	// os.UserHomeDir().
	HomeDir string
	// InClusterFallback makes [Load] fall back to [InCluster] when no
	// kubeconfig is found and no server override is given. Off by default.
	InClusterFallback bool
	// InCluster configures that fallback.
	InCluster InClusterOptions
}

func (o *LoadOptions) getenv(k string) string {
	if o.Getenv != nil {
		return o.Getenv(k)
	}
	return os.Getenv(k)
}

// Files returns the kubeconfig files [LoadKubeconfig] would consider, in
// precedence order, and whether they came from an explicit path (which must
// exist) rather than a search (where missing files are skipped).
func (o LoadOptions) Files() (files []string, explicit bool) {
	if o.Path != "" {
		return []string{o.Path}, true
	}
	if env := o.getenv("KUBECONFIG"); env != "" {
		seen := map[string]bool{}
		for _, p := range filepath.SplitList(env) {
			if p == "" || seen[p] {
				continue
			}
			seen[p] = true
			files = append(files, p)
		}
		if len(files) > 0 {
			return files, false
		}
	}
	home := o.HomeDir
	if home == "" {
		if h, err := os.UserHomeDir(); err == nil {
			home = h
		}
	}
	if home == "" {
		return nil, false
	}
	return []string{filepath.Join(home, ".kube", "config")}, false
}

// LoadKubeconfig reads and merges the kubeconfig files chosen by opts (see
// the package documentation for the rules). Overrides are not applied; use
// [Kubeconfig.Resolve] or [Load] for that.
//
// If no file exists, it returns an empty Kubeconfig and an error wrapping
// [ErrNoConfig]. A file that exists but cannot be read or parsed is an error
// naming that file.
func LoadKubeconfig(opts LoadOptions) (*Kubeconfig, error) {
	files, explicit := opts.Files()
	merged := &Kubeconfig{
		Clusters: map[string]*Cluster{},
		Users:    map[string]*User{},
		Contexts: map[string]*Context{},
	}
	for _, f := range files {
		data, err := os.ReadFile(f)
		if err != nil {
			if !explicit && errors.Is(err, fs.ErrNotExist) {
				continue
			}
			return nil, fieldErr(f, "", err)
		}
		kc, err := Parse(data, f)
		if err != nil {
			return nil, err
		}
		merged.merge(kc)
	}
	if len(merged.Files) == 0 {
		return merged, fmt.Errorf("config: %w (looked in %s)", ErrNoConfig, describeFiles(files))
	}
	return merged, nil
}

func describeFiles(files []string) string {
	if len(files) == 0 {
		return "no location: set KUBECONFIG or HOME"
	}
	return strings.Join(files, ", ")
}

// Load finds, merges and resolves the kubeconfig chosen by opts, applies
// opts.Overrides, and checks that referenced files exist. With
// opts.InClusterFallback it uses [InCluster] when no kubeconfig is found.
//
// When no kubeconfig exists but opts.Overrides.Server is set, Load returns a
// Config for that server with no credentials, as kubectl does.
func Load(opts LoadOptions) (Config, error) {
	kc, err := LoadKubeconfig(opts)
	if err != nil {
		if !errors.Is(err, ErrNoConfig) {
			return Config{}, err
		}
		if opts.Overrides.Server == "" {
			if opts.InClusterFallback {
				cfg, icErr := InCluster(opts.InCluster)
				if icErr == nil {
					if opts.Overrides.Namespace != "" {
						cfg.Namespace = opts.Overrides.Namespace
					}
					return cfg, nil
				}
				return Config{}, errors.Join(err, icErr)
			}
			return Config{}, err
		}
	}
	return kc.Resolve(opts.Overrides)
}

// Resolve selects a context (current-context unless o.Context is set),
// applies the overrides and turns the cluster and user into a [Config].
// It checks that referenced files exist and that the settings are
// consistent, returning a [*Error] that names the file and field otherwise.
func (k *Kubeconfig) Resolve(o Overrides) (Config, error) {
	origin := strings.Join(k.Files, string(filepath.ListSeparator))
	ctxName, ctxField, ctxFile := k.CurrentContext, "current-context", k.CurrentContextOrigin
	if o.Context != "" {
		ctxName, ctxField, ctxFile = o.Context, "context override", ""
	}
	var kctx Context
	if ctxName != "" {
		c, ok := k.Contexts[ctxName]
		if !ok {
			if ctxFile == "" {
				ctxFile = origin
			}
			return Config{}, fieldErrf(ctxFile, ctxField, "context %q not found", ctxName)
		}
		kctx = *c
	}
	clusterName, clusterField := kctx.Cluster, fmt.Sprintf("contexts[%q].cluster", ctxName)
	if o.Cluster != "" {
		clusterName, clusterField = o.Cluster, "cluster override"
	}
	userName, userField := kctx.User, fmt.Sprintf("contexts[%q].user", ctxName)
	if o.User != "" {
		userName, userField = o.User, "user override"
	}

	cfg := Config{Namespace: "default", Origin: origin, Context: ctxName}
	if kctx.Namespace != "" {
		cfg.Namespace = kctx.Namespace
	}
	if o.Namespace != "" {
		cfg.Namespace = o.Namespace
	}

	var cl Cluster
	if clusterName != "" {
		c, ok := k.Clusters[clusterName]
		if !ok {
			return Config{}, fieldErrf(originOr(kctx.Origin, o.Cluster == ""), clusterField, "cluster %q not found", clusterName)
		}
		cl = *c
	}
	if o.Server != "" {
		cl.Server = o.Server
	}
	if cl.Server == "" {
		if clusterName == "" && ctxName == "" {
			return Config{}, fieldErrf(origin, "current-context", "not set, and no context or server given")
		}
		return Config{}, fieldErrf(cl.Origin, fmt.Sprintf("clusters[%q].server", clusterName), "no server set")
	}
	cfg.Host = cl.Server
	cfg.ProxyURL = cl.ProxyURL
	cfg.DisableCompression = cl.DisableCompression
	cfg.TLS = TLS{
		Insecure:   cl.InsecureSkipTLSVerify,
		ServerName: cl.TLSServerName,
		CAFile:     cl.CertificateAuthority,
		CAData:     cl.CertificateAuthorityData,
	}
	cpre := fmt.Sprintf("clusters[%q].", clusterName)
	if cl.CertificateAuthority != "" && len(cl.CertificateAuthorityData) > 0 {
		return Config{}, fieldErrf(cl.Origin, cpre+"certificate-authority", "both certificate-authority and certificate-authority-data are set")
	}
	if cl.InsecureSkipTLSVerify && (cl.CertificateAuthority != "" || len(cl.CertificateAuthorityData) > 0) {
		return Config{}, fieldErrf(cl.Origin, cpre+"insecure-skip-tls-verify", "insecure-skip-tls-verify cannot be combined with a certificate authority")
	}
	if err := checkFile(cl.Origin, cpre+"certificate-authority", cl.CertificateAuthority); err != nil {
		return Config{}, err
	}

	if userName != "" {
		u, ok := k.Users[userName]
		if !ok {
			return Config{}, fieldErrf(originOr(kctx.Origin, o.User == ""), userField, "user %q not found", userName)
		}
		if err := applyUser(&cfg, userName, u); err != nil {
			return Config{}, err
		}
	}
	return cfg, nil
}

func originOr(file string, use bool) string {
	if use {
		return file
	}
	return ""
}

func applyUser(cfg *Config, name string, u *User) error {
	pre := fmt.Sprintf("users[%q].", name)
	f := u.Origin
	if u.ClientCertificate != "" && len(u.ClientCertificateData) > 0 {
		return fieldErrf(f, pre+"client-certificate", "both client-certificate and client-certificate-data are set")
	}
	if u.ClientKey != "" && len(u.ClientKeyData) > 0 {
		return fieldErrf(f, pre+"client-key", "both client-key and client-key-data are set")
	}
	hasCert := u.ClientCertificate != "" || len(u.ClientCertificateData) > 0
	hasKey := u.ClientKey != "" || len(u.ClientKeyData) > 0
	if hasCert != hasKey {
		if hasCert {
			return fieldErrf(f, pre+"client-key", "client certificate given without a client key")
		}
		return fieldErrf(f, pre+"client-certificate", "client key given without a client certificate")
	}
	methods := 0
	if u.Token != "" || u.TokenFile != "" {
		methods++
	}
	if u.Username != "" || u.Password != "" {
		methods++
	}
	if u.Exec != nil {
		methods++
	}
	if u.AuthProvider != nil {
		methods++
	}
	if methods > 1 {
		return fieldErrf(f, pre[:len(pre)-1], "more than one authentication method (token, basic auth, exec, auth-provider) is set")
	}
	var oidc *OIDC
	if u.AuthProvider != nil {
		var err error
		if oidc, err = resolveAuthProvider(f, pre+"auth-provider", u.AuthProvider); err != nil {
			return err
		}
	}
	for _, c := range []struct{ field, path string }{
		{"client-certificate", u.ClientCertificate},
		{"client-key", u.ClientKey},
		{"tokenFile", u.TokenFile},
	} {
		if err := checkFile(f, pre+c.field, c.path); err != nil {
			return err
		}
	}
	interactive := ""
	if u.Exec != nil {
		if u.Exec.Command == "" {
			return fieldErrf(f, pre+"exec.command", "empty command")
		}
		switch u.Exec.APIVersion {
		case "client.authentication.k8s.io/v1", "client.authentication.k8s.io/v1beta1":
		case "":
			return fieldErrf(f, pre+"exec.apiVersion", "not set; want client.authentication.k8s.io/v1 or v1beta1")
		default:
			return fieldErrf(f, pre+"exec.apiVersion", "unsupported %q; want client.authentication.k8s.io/v1 or v1beta1", u.Exec.APIVersion)
		}
		for i, e := range u.Exec.Env {
			if e.Name == "" {
				return fieldErrf(f, fmt.Sprintf("%sexec.env[%d].name", pre, i), "empty name")
			}
		}
		interactive = u.Exec.InteractiveMode
		switch interactive {
		case "Never", "IfAvailable", "Always":
		case "":
			if u.Exec.APIVersion != "client.authentication.k8s.io/v1beta1" {
				return fieldErrf(f, pre+"exec.interactiveMode", "not set; client.authentication.k8s.io/v1 plugins must say Never, IfAvailable or Always")
			}
			interactive = "IfAvailable" // kubectl's default for v1beta1
		default:
			return fieldErrf(f, pre+"exec.interactiveMode", "unknown mode %q; want Never, IfAvailable or Always", interactive)
		}
	}
	cfg.TLS.CertFile = u.ClientCertificate
	cfg.TLS.CertData = u.ClientCertificateData
	cfg.TLS.KeyFile = u.ClientKey
	cfg.TLS.KeyData = u.ClientKeyData
	cfg.Auth = Auth{
		BearerToken:     u.Token,
		BearerTokenFile: u.TokenFile,
		Username:        u.Username,
		Password:        u.Password,
		OIDC:            oidc,
		User:            name,
		Origin:          f,
	}
	if u.Exec != nil {
		e := *u.Exec
		e.InteractiveMode = interactive
		cfg.Auth.Exec = &e
	}
	cfg.Impersonate = Impersonation{
		User:   u.Impersonate,
		UID:    u.ImpersonateUID,
		Groups: u.ImpersonateGroups,
		Extra:  u.ImpersonateUserExtra,
	}
	if cfg.Impersonate.User == "" && (cfg.Impersonate.UID != "" || len(cfg.Impersonate.Groups) > 0 || len(cfg.Impersonate.Extra) > 0) {
		return fieldErrf(f, pre+"as", "as-uid, as-groups and as-user-extra need as (the user to impersonate)")
	}
	return nil
}

// checkFile reports a referenced file that cannot be opened.
func checkFile(origin, field, path string) error {
	if path == "" {
		return nil
	}
	fh, err := os.Open(path)
	if err != nil {
		return fieldErr(origin, field, err)
	}
	fh.Close()
	return nil
}
