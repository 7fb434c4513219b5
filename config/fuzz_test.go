package config

import (
	"errors"
	"testing"
)

// FuzzParse checks that no input makes Parse (or resolving its result)
// panic, and that every failure is a *Error. Seeds live in
// testdata/fuzz/FuzzParse.
func FuzzParse(f *testing.F) {
	for _, s := range []string{fileA, fileB, fileNoCurrent, "", "{}", "clusters: 7", "users:\n- name: u\n  user: {exec: {command: x, apiVersion: client.authentication.k8s.io/v1}}\n",
		withUser("{auth-provider: {name: oidc, config: {idp-issuer-url: 'https://idp', client-id: k, idp-certificate-authority-data: Y2E=, extra-scopes: 'a,b'}}}")} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		kc, err := Parse(data, "/fuzz/kubeconfig")
		if err != nil {
			var ce *Error
			if !errors.As(err, &ce) {
				t.Fatalf("Parse error %v is %T, not *config.Error", err, err)
			}
			return
		}
		for name := range kc.Contexts {
			_, _ = kc.Resolve(Overrides{Context: name})
		}
		_, _ = kc.Resolve(Overrides{})
		if _, err := kc.Marshal(); err != nil {
			t.Fatalf("Marshal of parsed config: %v", err)
		}
	})
}

// FuzzSetAuthProviderConfig checks that no file content makes the
// write-back of refreshed tokens panic, and that what it writes still
// holds the new values.
func FuzzSetAuthProviderConfig(f *testing.F) {
	for _, s := range []string{kubeconfigWithOIDC, withUser("{auth-provider: {name: oidc}}"), `{"users":[{"name":"u","user":{"auth-provider":{"config":null}}}]}`, "users: [{name: u, user: {auth-provider: &a {config: *a}}}]", ""} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, data []byte) {
		for _, user := range []string{"u", "alice"} {
			out, changed, err := setAuthProviderConfig(data, user, map[string]string{OIDCIDToken: "new-id"})
			if err != nil || !changed {
				continue
			}
			kc, err := Parse(out, "")
			if err != nil {
				continue // the input was no kubeconfig Loom can load either
			}
			if u := kc.Users[user]; u != nil && u.AuthProvider != nil && u.AuthProvider.Config[OIDCIDToken] != "new-id" {
				t.Fatalf("the new id-token is not in the output:\n%s", out)
			}
		}
	})
}
