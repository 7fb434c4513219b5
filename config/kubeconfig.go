package config

import (
	"encoding/json"
	"fmt"
	"path/filepath"
	"strings"

	"sigs.k8s.io/yaml"
)

// Kubeconfig is the content of one kubeconfig file, or the merge of several.
//
// Clusters, Users and Contexts are keyed by name. Each entry records in its
// Origin field the file it came from, so that errors can name that file.
// A Kubeconfig is a plain value: it is not safe for concurrent mutation, and
// [Kubeconfig.Resolve] does not modify it.
type Kubeconfig struct {
	// CurrentContext is the name of the context used when no override names one.
	CurrentContext string
	// CurrentContextOrigin is the file that set CurrentContext.
	CurrentContextOrigin string
	// Clusters maps a cluster name to its entry.
	Clusters map[string]*Cluster
	// Users maps a user (auth info) name to its entry.
	Users map[string]*User
	// Contexts maps a context name to its entry.
	Contexts map[string]*Context
	// Files lists the files that were read, in precedence order.
	Files []string
}

// Cluster is a clusters[].cluster entry.
type Cluster struct {
	// Server is the API server URL (server).
	Server string `json:"server,omitempty"`
	// TLSServerName is the name to verify the server certificate against (tls-server-name).
	TLSServerName string `json:"tls-server-name,omitempty"`
	// InsecureSkipTLSVerify turns off server certificate verification (insecure-skip-tls-verify).
	InsecureSkipTLSVerify bool `json:"insecure-skip-tls-verify,omitempty"`
	// CertificateAuthority is a PEM CA file, made absolute by Parse (certificate-authority).
	CertificateAuthority string `json:"certificate-authority,omitempty"`
	// CertificateAuthorityData is inline PEM CA data (certificate-authority-data).
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	// ProxyURL is the proxy for requests to this cluster (proxy-url).
	ProxyURL string `json:"proxy-url,omitempty"`
	// DisableCompression turns off response compression (disable-compression).
	DisableCompression bool `json:"disable-compression,omitempty"`
	// Origin is the file this entry came from (not part of the file format).
	Origin string `json:"-"`
}

// User is a users[].user entry (an "AuthInfo" in kubectl's terms).
type User struct {
	// ClientCertificate is a PEM client certificate file, made absolute by Parse.
	ClientCertificate string `json:"client-certificate,omitempty"`
	// ClientCertificateData is inline PEM client certificate data.
	ClientCertificateData []byte `json:"client-certificate-data,omitempty"`
	// ClientKey is a PEM private key file, made absolute by Parse.
	ClientKey string `json:"client-key,omitempty"`
	// ClientKeyData is inline PEM private key data. Never logged.
	ClientKeyData []byte `json:"client-key-data,omitempty"`
	// Token is a bearer token. Never logged.
	Token string `json:"token,omitempty"`
	// TokenFile is a file holding a bearer token, made absolute by Parse.
	TokenFile string `json:"tokenFile,omitempty"`
	// Impersonate is the user to act as (as).
	Impersonate string `json:"as,omitempty"`
	// ImpersonateUID is the UID to act as (as-uid).
	ImpersonateUID string `json:"as-uid,omitempty"`
	// ImpersonateGroups are the groups to act as (as-groups).
	ImpersonateGroups []string `json:"as-groups,omitempty"`
	// ImpersonateUserExtra are extra attributes to act with (as-user-extra).
	ImpersonateUserExtra map[string][]string `json:"as-user-extra,omitempty"`
	// Username is for basic authentication.
	Username string `json:"username,omitempty"`
	// Password is for basic authentication. Never logged.
	Password string `json:"password,omitempty"`
	// AuthProvider is an auth-provider stanza; only "oidc" is implemented.
	AuthProvider *AuthProvider `json:"auth-provider,omitempty"`
	// Exec is an exec credential plugin.
	Exec *ExecConfig `json:"exec,omitempty"`
	// Origin is the file this entry came from (not part of the file format).
	Origin string `json:"-"`
}

// AuthProvider is an auth-provider stanza (users[].user.auth-provider), the
// older way to plug in credentials. Loom implements the "oidc" provider
// (see [OIDC]); [Kubeconfig.Resolve] refuses other names with an
// [*UnsupportedAuthProviderError]. Formatting an AuthProvider redacts its
// secret configuration values.
type AuthProvider struct {
	// Name is the provider name, for example "oidc".
	Name string `json:"name"`
	// Config is the provider configuration. For oidc, Parse makes a
	// relative idp-certificate-authority path absolute.
	Config map[string]string `json:"config,omitempty"`
}

// Context is a contexts[].context entry.
type Context struct {
	// Cluster names the cluster entry.
	Cluster string `json:"cluster"`
	// User names the user entry.
	User string `json:"user"`
	// Namespace is the default namespace; empty means "default".
	Namespace string `json:"namespace,omitempty"`
	// Origin is the file this entry came from (not part of the file format).
	Origin string `json:"-"`
}

// The on-disk (v1) layout: named lists.
type fileV1 struct {
	APIVersion     string         `json:"apiVersion,omitempty"`
	Kind           string         `json:"kind,omitempty"`
	CurrentContext string         `json:"current-context,omitempty"`
	Clusters       []namedCluster `json:"clusters,omitempty"`
	Users          []namedUser    `json:"users,omitempty"`
	Contexts       []namedContext `json:"contexts,omitempty"`
}

type namedCluster struct {
	Name    string   `json:"name"`
	Cluster *Cluster `json:"cluster"`
}

type namedUser struct {
	Name string `json:"name"`
	User *User  `json:"user"`
}

type namedContext struct {
	Name    string   `json:"name"`
	Context *Context `json:"context"`
}

// Parse parses one kubeconfig file's content. filename is recorded as the
// origin of every entry, and relative paths in the file are resolved against
// its directory; if filename is empty, relative paths are left alone.
//
// Malformed input returns a [*Error] naming filename; Parse never panics.
// A duplicate name within one file is an error, as it is for kubectl.
func Parse(data []byte, filename string) (kc *Kubeconfig, err error) {
	defer func() {
		// The YAML library is third-party code; keep a parser panic from
		// escaping to the caller.
		if r := recover(); r != nil {
			kc, err = nil, fieldErrf(filename, "", "malformed kubeconfig (parser panic: %v)", r)
		}
	}()
	var f fileV1
	if err := yaml.Unmarshal(data, &f); err != nil {
		return nil, fieldErr(filename, "", fmt.Errorf("malformed kubeconfig: %w", err))
	}
	if f.Kind != "" && f.Kind != "Config" {
		return nil, fieldErrf(filename, "kind", "unexpected kind %q, want Config", f.Kind)
	}
	if f.APIVersion != "" && f.APIVersion != "v1" {
		return nil, fieldErrf(filename, "apiVersion", "unsupported apiVersion %q, want v1", f.APIVersion)
	}
	dir := ""
	if filename != "" {
		if abs, err := filepath.Abs(filename); err == nil {
			dir = filepath.Dir(abs)
		} else {
			dir = filepath.Dir(filename)
		}
	}
	kc = &Kubeconfig{
		CurrentContext: f.CurrentContext,
		Clusters:       make(map[string]*Cluster, len(f.Clusters)),
		Users:          make(map[string]*User, len(f.Users)),
		Contexts:       make(map[string]*Context, len(f.Contexts)),
	}
	if filename != "" {
		kc.Files = []string{filename}
	}
	if f.CurrentContext != "" {
		kc.CurrentContextOrigin = filename
	}
	for i, nc := range f.Clusters {
		if nc.Name == "" {
			return nil, fieldErrf(filename, fmt.Sprintf("clusters[%d].name", i), "empty name")
		}
		if _, dup := kc.Clusters[nc.Name]; dup {
			return nil, fieldErrf(filename, fmt.Sprintf("clusters[%q]", nc.Name), "duplicate name")
		}
		c := nc.Cluster
		if c == nil {
			c = &Cluster{}
		}
		c.Origin = filename
		c.CertificateAuthority = resolvePath(dir, c.CertificateAuthority)
		kc.Clusters[nc.Name] = c
	}
	for i, nu := range f.Users {
		if nu.Name == "" {
			return nil, fieldErrf(filename, fmt.Sprintf("users[%d].name", i), "empty name")
		}
		if _, dup := kc.Users[nu.Name]; dup {
			return nil, fieldErrf(filename, fmt.Sprintf("users[%q]", nu.Name), "duplicate name")
		}
		u := nu.User
		if u == nil {
			u = &User{}
		}
		u.Origin = filename
		u.ClientCertificate = resolvePath(dir, u.ClientCertificate)
		u.ClientKey = resolvePath(dir, u.ClientKey)
		u.TokenFile = resolvePath(dir, u.TokenFile)
		if u.AuthProvider != nil && u.AuthProvider.Config[OIDCCAFile] != "" {
			// kubectl would read a relative path from the working
			// directory; like the other paths here, Loom reads it from
			// the file's directory.
			u.AuthProvider.Config[OIDCCAFile] = resolvePath(dir, u.AuthProvider.Config[OIDCCAFile])
		}
		if u.Exec != nil && strings.ContainsRune(u.Exec.Command, filepath.Separator) {
			// kubectl resolves an exec command only when it is a path,
			// not a bare name looked up in $PATH.
			u.Exec.Command = resolvePath(dir, u.Exec.Command)
		}
		kc.Users[nu.Name] = u
	}
	for i, nx := range f.Contexts {
		if nx.Name == "" {
			return nil, fieldErrf(filename, fmt.Sprintf("contexts[%d].name", i), "empty name")
		}
		if _, dup := kc.Contexts[nx.Name]; dup {
			return nil, fieldErrf(filename, fmt.Sprintf("contexts[%q]", nx.Name), "duplicate name")
		}
		x := nx.Context
		if x == nil {
			x = &Context{}
		}
		x.Origin = filename
		kc.Contexts[nx.Name] = x
	}
	return kc, nil
}

func resolvePath(dir, p string) string {
	if p == "" || dir == "" || filepath.IsAbs(p) {
		return p
	}
	return filepath.Join(dir, p)
}

// Marshal encodes k as a v1 kubeconfig in YAML, with entries sorted by name.
// Paths are written as they are held (absolute after [Parse] with a
// filename). Secrets are written in full: Marshal is for writing files, not
// for logging.
func (k *Kubeconfig) Marshal() ([]byte, error) {
	f := fileV1{APIVersion: "v1", Kind: "Config", CurrentContext: k.CurrentContext}
	for _, name := range sortedKeys(k.Clusters) {
		f.Clusters = append(f.Clusters, namedCluster{Name: name, Cluster: k.Clusters[name]})
	}
	for _, name := range sortedKeys(k.Users) {
		f.Users = append(f.Users, namedUser{Name: name, User: k.Users[name]})
	}
	for _, name := range sortedKeys(k.Contexts) {
		f.Contexts = append(f.Contexts, namedContext{Name: name, Context: k.Contexts[name]})
	}
	j, err := json.Marshal(f)
	if err != nil {
		return nil, err
	}
	return yaml.JSONToYAML(j)
}

// merge adds the entries of other that k does not have yet: the first file
// to define a name wins, and the first file to set current-context wins.
func (k *Kubeconfig) merge(other *Kubeconfig) {
	if k.CurrentContext == "" && other.CurrentContext != "" {
		k.CurrentContext = other.CurrentContext
		k.CurrentContextOrigin = other.CurrentContextOrigin
	}
	for n, c := range other.Clusters {
		if _, ok := k.Clusters[n]; !ok {
			k.Clusters[n] = c
		}
	}
	for n, u := range other.Users {
		if _, ok := k.Users[n]; !ok {
			k.Users[n] = u
		}
	}
	for n, x := range other.Contexts {
		if _, ok := k.Contexts[n]; !ok {
			k.Contexts[n] = x
		}
	}
	k.Files = append(k.Files, other.Files...)
}
