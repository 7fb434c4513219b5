package config

import (
	"fmt"
	"log/slog"
	"sort"
	"strings"
	"time"
)

// Config is a resolved client configuration: everything package rest needs
// to reach and authenticate to one API server. It is a plain value; copy it
// freely. A zero Config is not usable (Host is required); build one with
// [Load], [InCluster], [Flags.Load] or [Kubeconfig.Resolve], or fill it in.
//
// Formatting a Config with fmt or slog redacts secrets.
type Config struct {
	// Host is the API server URL, for example https://10.0.0.1:6443. It may
	// carry a path prefix. A bare host:port is treated as https.
	Host string
	// Namespace is the default namespace of the selected context, or
	// "default".
	Namespace string
	// TLS holds the server and client TLS material.
	TLS TLS
	// Auth holds the credentials.
	Auth Auth
	// Impersonate, when its User is set, makes the client act as another user.
	Impersonate Impersonation
	// ProxyURL is the proxy for all requests (http, https or socks5 URL).
	// Empty means: use the HTTP_PROXY, HTTPS_PROXY and NO_PROXY environment
	// variables.
	ProxyURL string
	// DisableCompression turns off transparent gzip response compression.
	DisableCompression bool
	// UserAgent is sent with every request. Empty means rest's default,
	// "loom/<version> (<os>/<arch>)".
	UserAgent string
	// QPS and Burst configure optional client-side rate limiting. QPS <= 0
	// (the default) disables it: the server's API Priority and Fairness is
	// the real limiter. Burst <= 0 means 1 when QPS > 0.
	QPS   float32
	Burst int
	// Timeout bounds each non-streaming request (watch and Stream are not
	// bounded). Zero means no timeout beyond the caller's context.
	Timeout time.Duration
	// Origin says where this Config came from: a kubeconfig path, a list of
	// them, or "in-cluster". Used in error messages only.
	Origin string
	// Context is the name of the kubeconfig context that was selected, if
	// any.
	Context string
}

// TLS is the TLS part of a [Config]. Where both a file and inline data are
// set for the same item, it is an error.
type TLS struct {
	// Insecure disables server certificate verification. Verification is on
	// by default. Insecure together with a CA is an error.
	Insecure bool
	// ServerName overrides the name used to verify the server certificate
	// (and sent as SNI). Empty means the host of Config.Host.
	ServerName string
	// CAFile and CAData hold PEM CA certificates that verify the server.
	// If both are empty, the system roots are used. Package rest reads
	// CAFile again when it changes (rest.TLSReloadOptions).
	CAFile string
	CAData []byte
	// CertFile/CertData and KeyFile/KeyData hold a PEM client certificate
	// and its private key. Package rest reads CertFile and KeyFile again
	// when they change, and uses a new pair once both parse and match.
	CertFile string
	CertData []byte
	KeyFile  string
	KeyData  []byte
}

// Auth holds credentials. At most one of BearerToken/BearerTokenFile,
// Username/Password, Exec and OIDC should be used; client certificates in
// [TLS] may be combined with any of them.
type Auth struct {
	// BearerToken is sent as "Authorization: Bearer <token>".
	BearerToken string
	// BearerTokenFile is a file holding the token. It is re-read
	// periodically, so rotated tokens (service accounts) are picked up.
	// If BearerToken is also set, BearerToken wins.
	BearerTokenFile string
	// Username and Password are sent with HTTP basic authentication.
	Username string
	Password string
	// Exec configures an exec credential plugin.
	Exec *ExecConfig
	// OIDC configures the "oidc" auth provider: an OpenID Connect id-token,
	// refreshed at the issuer when it expires.
	OIDC *OIDC
	// User is the name of the kubeconfig user entry (users[].name) the
	// credentials came from, or empty. Error messages name fields under it.
	User string
	// Origin is the kubeconfig file the credentials came from, or empty.
	// Error messages name it, and when the OIDC provider refreshes its
	// tokens, package rest writes them back to users[User] in this file, as
	// kubectl does. If Origin or User is empty, refreshed tokens are kept
	// in memory only.
	Origin string
}

// OIDC is the "oidc" auth provider of a kubeconfig user
// (users[].user.auth-provider with name oidc), resolved. Package rest sends
// IDToken as a bearer token; when it has expired, or the server refused it,
// rest exchanges RefreshToken for a new one at the issuer's token endpoint
// (found in the issuer's discovery document).
//
// Formatting an OIDC with fmt or slog redacts the tokens and the client
// secret.
type OIDC struct {
	// IssuerURL is the issuer, an https URL (idp-issuer-url). Its discovery
	// document is IssuerURL + "/.well-known/openid-configuration".
	// Required.
	IssuerURL string
	// ClientID is the OAuth 2.0 client the tokens were issued to
	// (client-id). Required.
	ClientID string
	// ClientSecret is the client's secret (client-secret), or empty for a
	// public client. Never logged.
	ClientSecret string
	// IDToken is the current id-token, a JWT (id-token). Empty means: get
	// one with RefreshToken before the first request. Never logged.
	IDToken string
	// RefreshToken gets new id-tokens (refresh-token). Empty means the
	// id-token is used until it expires; after that, requests fail. Never
	// logged.
	RefreshToken string
	// CAFile and CAData hold PEM CA certificates that verify the issuer
	// (idp-certificate-authority, and idp-certificate-authority-data, which
	// is base64 in the file). If both are empty, the system roots are used.
	CAFile string
	CAData []byte
	// ExtraScopes are the scopes of extra-scopes (comma-separated in the
	// file). They are kept for reference only: like kubectl, Loom sends no
	// scope when it refreshes a token, so the refreshed token has the
	// scopes of the original grant.
	ExtraScopes []string
}

// Impersonation makes requests act as another user. The authenticated user
// needs the "impersonate" permission.
type Impersonation struct {
	// User is the user name to act as; the other fields need it.
	User string
	// UID is the user's UID.
	UID string
	// Groups are the groups to act as.
	Groups []string
	// Extra holds extra user attributes.
	Extra map[string][]string
}

// ExecConfig is an exec credential plugin (users[].user.exec).
type ExecConfig struct {
	// Command is the program to run; a bare name is looked up in PATH.
	Command string `json:"command"`
	// Args are its arguments.
	Args []string `json:"args,omitempty"`
	// Env adds variables to the plugin's environment.
	Env []ExecEnvVar `json:"env,omitempty"`
	// APIVersion is client.authentication.k8s.io/v1 or .../v1beta1.
	APIVersion string `json:"apiVersion,omitempty"`
	// InstallHint is shown when the command cannot be found.
	InstallHint string `json:"installHint,omitempty"`
	// ProvideClusterInfo passes the cluster's details to the plugin through
	// the KUBERNETES_EXEC_INFO variable.
	ProvideClusterInfo bool `json:"provideClusterInfo,omitempty"`
	// InteractiveMode says whether the plugin may talk to the user through
	// a terminal: Never, IfAvailable or Always. With IfAvailable or Always,
	// and a terminal offered through package rest's ExecOptions, the
	// plugin gets the terminal as standard input; Always fails without one.
	// Empty means Never. [Kubeconfig.Resolve] fills in IfAvailable for
	// client.authentication.k8s.io/v1beta1 plugins and requires a value for
	// v1 ones, as kubectl does.
	InteractiveMode string `json:"interactiveMode,omitempty"`
}

// ExecEnvVar is one environment variable for an exec plugin.
type ExecEnvVar struct {
	// Name is the variable's name.
	Name string `json:"name"`
	// Value is its value. Never logged.
	Value string `json:"value"`
}

const redacted = "[redacted]"

func redact(s string) string {
	if s == "" {
		return ""
	}
	return redacted
}

func redactBytes(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("[%d bytes redacted]", len(b))
}

// String returns a description with secrets redacted.
func (c Config) String() string {
	return fmt.Sprintf("{Host:%s Namespace:%s Context:%s Origin:%s TLS:%s Auth:%s Impersonate:%+v ProxyURL:%s UserAgent:%q QPS:%v Burst:%d Timeout:%v}",
		c.Host, c.Namespace, c.Context, c.Origin, c.TLS, c.Auth, c.Impersonate, redactURL(c.ProxyURL), c.UserAgent, c.QPS, c.Burst, c.Timeout)
}

// GoString is like String, for %#v.
func (c Config) GoString() string { return "config.Config" + c.String() }

// LogValue implements slog.LogValuer with secrets redacted.
func (c Config) LogValue() slog.Value {
	return slog.GroupValue(
		slog.String("host", c.Host),
		slog.String("namespace", c.Namespace),
		slog.String("context", c.Context),
		slog.String("origin", c.Origin),
		slog.Any("tls", c.TLS),
		slog.Any("auth", c.Auth),
		slog.String("impersonate", c.Impersonate.User),
		slog.String("proxyURL", redactURL(c.ProxyURL)),
	)
}

// String returns a description with key material redacted.
func (t TLS) String() string {
	return fmt.Sprintf("{Insecure:%v ServerName:%s CAFile:%s CAData:%s CertFile:%s CertData:%s KeyFile:%s KeyData:%s}",
		t.Insecure, t.ServerName, t.CAFile, sizeOnly(t.CAData), t.CertFile, sizeOnly(t.CertData), t.KeyFile, redactBytes(t.KeyData))
}

// GoString is like String, for %#v.
func (t TLS) GoString() string { return "config.TLS" + t.String() }

// LogValue implements slog.LogValuer with key material redacted.
func (t TLS) LogValue() slog.Value { return slog.StringValue(t.String()) }

// String returns a description with secrets redacted.
func (a Auth) String() string {
	exec := "<nil>"
	if a.Exec != nil {
		exec = a.Exec.String()
	}
	return fmt.Sprintf("{BearerToken:%s BearerTokenFile:%s Username:%s Password:%s Exec:%s OIDC:%s}",
		redact(a.BearerToken), a.BearerTokenFile, a.Username, redact(a.Password), exec, a.OIDC)
}

// GoString is like String, for %#v.
func (a Auth) GoString() string { return "config.Auth" + a.String() }

// LogValue implements slog.LogValuer with secrets redacted.
func (a Auth) LogValue() slog.Value { return slog.StringValue(a.String()) }

// String describes the plugin with environment values redacted (they often
// carry secrets). Arguments are shown.
func (e *ExecConfig) String() string {
	if e == nil {
		return "<nil>"
	}
	names := make([]string, len(e.Env))
	for i, v := range e.Env {
		names[i] = v.Name + "=" + redact(v.Value)
	}
	return fmt.Sprintf("{Command:%s Args:%q Env:[%s] APIVersion:%s}", e.Command, e.Args, strings.Join(names, " "), e.APIVersion)
}

// GoString is like String, for %#v.
func (e *ExecConfig) GoString() string { return "&config.ExecConfig" + e.String() }

// LogValue implements slog.LogValuer with environment values redacted.
func (e *ExecConfig) LogValue() slog.Value { return slog.StringValue(e.String()) }

// String describes the provider with the tokens and the client secret
// redacted.
func (o *OIDC) String() string {
	if o == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{IssuerURL:%s ClientID:%s ClientSecret:%s IDToken:%s RefreshToken:%s CAFile:%s CAData:%s ExtraScopes:%q}",
		o.IssuerURL, o.ClientID, redact(o.ClientSecret), redact(o.IDToken), redact(o.RefreshToken), o.CAFile, sizeOnly(o.CAData), o.ExtraScopes)
}

// GoString is like String, for %#v.
func (o *OIDC) GoString() string { return "&config.OIDC" + o.String() }

// LogValue implements slog.LogValuer with secrets redacted.
func (o *OIDC) LogValue() slog.Value { return slog.StringValue(o.String()) }

// String describes the provider with every configuration value redacted
// except those known to hold no secret.
func (p *AuthProvider) String() string {
	if p == nil {
		return "<nil>"
	}
	kv := make([]string, 0, len(p.Config))
	for _, k := range sortedKeys(p.Config) {
		v := p.Config[k]
		if !publicAuthProviderKeys[k] {
			v = redact(v)
		}
		kv = append(kv, k+"="+v)
	}
	return fmt.Sprintf("{Name:%s Config:[%s]}", p.Name, strings.Join(kv, " "))
}

// GoString is like String, for %#v.
func (p *AuthProvider) GoString() string { return "&config.AuthProvider" + p.String() }

// LogValue implements slog.LogValuer with secrets redacted.
func (p *AuthProvider) LogValue() slog.Value { return slog.StringValue(p.String()) }

// String returns a description with secrets redacted.
func (u *User) String() string {
	if u == nil {
		return "<nil>"
	}
	return fmt.Sprintf("{ClientCertificate:%s ClientKey:%s ClientKeyData:%s Token:%s TokenFile:%s Username:%s Password:%s Exec:%s AuthProvider:%s Origin:%s}",
		u.ClientCertificate, u.ClientKey, redactBytes(u.ClientKeyData), redact(u.Token), u.TokenFile, u.Username, redact(u.Password), u.Exec, u.AuthProvider, u.Origin)
}

// GoString is like String, for %#v.
func (u *User) GoString() string { return "&config.User" + u.String() }

// LogValue implements slog.LogValuer with secrets redacted.
func (u *User) LogValue() slog.Value { return slog.StringValue(u.String()) }

func sizeOnly(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return fmt.Sprintf("[%d bytes]", len(b))
}

// redactURL hides a password in user:password@host.
func redactURL(s string) string {
	at := strings.LastIndexByte(s, '@')
	scheme := strings.Index(s, "://")
	if at < 0 || scheme < 0 || at < scheme {
		return s
	}
	userinfo := s[scheme+3 : at]
	if i := strings.IndexByte(userinfo, ':'); i >= 0 {
		return s[:scheme+3] + userinfo[:i] + ":" + redacted + s[at:]
	}
	return s
}

func sortedKeys[V any](m map[string]V) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
