package config

import (
	"encoding/base64"
	"fmt"
	"net/url"
	"strings"
)

// The configuration keys of the oidc auth provider
// (users[].user.auth-provider.config).
const (
	OIDCIssuerURL    = "idp-issuer-url"
	OIDCClientID     = "client-id"
	OIDCClientSecret = "client-secret"
	OIDCIDToken      = "id-token"
	OIDCRefreshToken = "refresh-token"
	OIDCCAFile       = "idp-certificate-authority"
	OIDCCAData       = "idp-certificate-authority-data"
	OIDCExtraScopes  = "extra-scopes"
)

// publicAuthProviderKeys are the auth-provider configuration keys whose
// values are shown when a User is formatted; all others are redacted.
var publicAuthProviderKeys = map[string]bool{
	OIDCIssuerURL:   true,
	OIDCClientID:    true,
	OIDCCAFile:      true,
	OIDCExtraScopes: true,
}

// removedAuthProviders names the exec credential plugin that replaces each
// auth provider that Kubernetes clients no longer ship.
var removedAuthProviders = map[string]string{
	"gcp":   "gke-gcloud-auth-plugin",
	"azure": "kubelogin",
}

// UnsupportedAuthProviderError reports a users[].user.auth-provider whose
// name Loom does not implement (it implements "oidc"). [Kubeconfig.Resolve]
// returns it wrapped in an [*Error] naming the field; get at it with
// errors.As.
type UnsupportedAuthProviderError struct {
	// Name is the provider's name.
	Name string
	// Plugin is the exec credential plugin that replaces the provider, for
	// the providers that Kubernetes clients have removed:
	// gke-gcloud-auth-plugin for "gcp", kubelogin for "azure". Empty for
	// other names.
	Plugin string
}

// Error implements the error interface.
func (e *UnsupportedAuthProviderError) Error() string {
	if e.Plugin != "" {
		return fmt.Sprintf("auth provider %q was removed from Kubernetes clients; use the exec credential plugin %s instead", e.Name, e.Plugin)
	}
	return fmt.Sprintf("auth provider %q is not supported (Loom implements oidc); use an exec credential plugin", e.Name)
}

// resolveAuthProvider checks an auth-provider stanza and turns an oidc one
// into an [OIDC]. field is the stanza's path, for example
// users["alice"].auth-provider.
func resolveAuthProvider(file, field string, p *AuthProvider) (*OIDC, error) {
	switch p.Name {
	case "oidc":
	case "":
		return nil, fieldErrf(file, field+".name", "empty provider name")
	default:
		return nil, fieldErr(file, field+".name", &UnsupportedAuthProviderError{Name: p.Name, Plugin: removedAuthProviders[p.Name]})
	}
	c := p.Config
	key := func(k string) string { return field + ".config." + k }
	o := &OIDC{
		IssuerURL:    c[OIDCIssuerURL],
		ClientID:     c[OIDCClientID],
		ClientSecret: c[OIDCClientSecret],
		IDToken:      c[OIDCIDToken],
		RefreshToken: c[OIDCRefreshToken],
		CAFile:       c[OIDCCAFile],
	}
	if o.IssuerURL == "" {
		return nil, fieldErrf(file, key(OIDCIssuerURL), "not set")
	}
	if u, err := url.Parse(o.IssuerURL); err != nil || u.Scheme != "https" || u.Host == "" {
		// kube-apiserver accepts https issuers only.
		return nil, fieldErrf(file, key(OIDCIssuerURL), "%q is not an https URL", o.IssuerURL)
	}
	if o.ClientID == "" {
		return nil, fieldErrf(file, key(OIDCClientID), "not set")
	}
	if data := c[OIDCCAData]; data != "" {
		if o.CAFile != "" {
			return nil, fieldErrf(file, key(OIDCCAFile), "both %s and %s are set", OIDCCAFile, OIDCCAData)
		}
		b, err := base64.StdEncoding.DecodeString(data)
		if err != nil {
			return nil, fieldErrf(file, key(OIDCCAData), "not base64: %w", err)
		}
		o.CAData = b
	}
	if err := checkFile(file, key(OIDCCAFile), o.CAFile); err != nil {
		return nil, err
	}
	for _, s := range strings.Split(c[OIDCExtraScopes], ",") {
		if s = strings.TrimSpace(s); s != "" {
			o.ExtraScopes = append(o.ExtraScopes, s)
		}
	}
	return o, nil
}
