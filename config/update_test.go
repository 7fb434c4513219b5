package config

import (
	"context"
	"encoding/json"
	"errors"
	"os"
	"path/filepath"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
)

// kubeconfigWithOIDC has comments, a field Loom does not know, a second
// OIDC user and keys in no particular order: all of it must survive an
// update of alice's tokens.
const kubeconfigWithOIDC = `# written by hand
apiVersion: v1
kind: Config
preferences: {colors: true}
current-context: x
clusters:
- name: c
  cluster:
    server: https://s # the API server
    extensions:
    - name: example.com/thing
      extension: {a: 1}
users:
- name: bob
  user:
    auth-provider:
      name: oidc
      config: {id-token: bob-id, refresh-token: bob-refresh, client-id: k, idp-issuer-url: 'https://idp'}
- name: alice
  user:
    auth-provider:
      config:
        # alice's issuer
        idp-issuer-url: https://idp
        id-token: "old-id"
        client-id: k
        refresh-token: old-refresh
      name: oidc
    future-field: kept
contexts:
- name: x
  context: {cluster: c, user: alice}
`

func TestUpdateAuthProviderConfig(t *testing.T) {
	newTokens := map[string]string{OIDCIDToken: "new-id", OIDCRefreshToken: "new-refresh"}
	tests := []struct {
		name    string
		content string
		user    string
		values  map[string]string
		// want maps each user to its auth-provider config after the update.
		want map[string]map[string]string
		// keep are strings of the original file that must still be there.
		keep    []string
		wantErr string
		// yaml is set for flow-style content that must not become JSON.
		yaml bool
	}{
		{
			name: "yaml", content: kubeconfigWithOIDC, user: "alice", values: newTokens,
			want: map[string]map[string]string{
				"alice": {OIDCIssuerURL: "https://idp", OIDCIDToken: "new-id", OIDCClientID: "k", OIDCRefreshToken: "new-refresh"},
				"bob":   {OIDCIDToken: "bob-id", OIDCRefreshToken: "bob-refresh", OIDCClientID: "k", OIDCIssuerURL: "https://idp"},
			},
			keep: []string{"# written by hand", "# the API server", "# alice's issuer", "future-field: kept", "example.com/thing", "colors: true"},
		},
		{
			name:    "json stays json",
			content: `{"apiVersion":"v1","kind":"Config","users":[{"name":"alice","user":{"auth-provider":{"name":"oidc","config":{"client-id":"k","id-token":"old-id","n":"1"}},"x-unknown":[1,2.5,true,null]}}]}`,
			user:    "alice", values: newTokens,
			want: map[string]map[string]string{"alice": {OIDCClientID: "k", OIDCIDToken: "new-id", OIDCRefreshToken: "new-refresh", "n": "1"}},
			keep: []string{`"x-unknown": [`, `2.5`, `null`},
		},
		{
			name:    "flow style with aliases stays YAML",
			content: `{"a": &a [1, 2], "b": *a, "users": [{"name": "alice", "user": {"auth-provider": {"name": "oidc"}}}]}`,
			user:    "alice", values: newTokens, yaml: true,
			want: map[string]map[string]string{"alice": newTokens},
			keep: []string{"&a", "*a"},
		},
		{
			name:    "config missing",
			content: "users:\n- name: alice\n  user:\n    auth-provider: {name: oidc}\n",
			user:    "alice", values: newTokens,
			want: map[string]map[string]string{"alice": newTokens},
		},
		{
			name:    "config null",
			content: "users:\n- name: alice\n  user:\n    auth-provider:\n      name: oidc\n      config:\n",
			user:    "alice", values: newTokens,
			want: map[string]map[string]string{"alice": newTokens},
		},
		{
			name:    "values that look like other types stay strings",
			content: "users:\n- name: alice\n  user:\n    auth-provider: {name: oidc, config: {id-token: x}}\n",
			user:    "alice", values: map[string]string{OIDCIDToken: "true", OIDCRefreshToken: "0123"},
			want: map[string]map[string]string{"alice": {OIDCIDToken: "true", OIDCRefreshToken: "0123"}},
		},
		{name: "missing user", content: kubeconfigWithOIDC, user: "carol", values: newTokens, wantErr: `user "carol" is not in the file`},
		{name: "user without auth-provider", content: "users:\n- name: alice\n  user: {token: t}\n", user: "alice", values: newTokens, wantErr: "has no auth-provider"},
		{name: "not a kubeconfig", content: "- a\n- b\n", user: "alice", values: newTokens, wantErr: "not a kubeconfig"},
		{name: "malformed", content: "users: [\n", user: "alice", values: newTokens, wantErr: "malformed"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			path := filepath.Join(dir, "config")
			if err := os.WriteFile(path, []byte(tt.content), 0o640); err != nil {
				t.Fatal(err)
			}
			err := UpdateAuthProviderConfig(t.Context(), path, tt.user, tt.values)
			after, _ := os.ReadFile(path)
			if tt.wantErr != "" {
				var ce *Error
				if !errors.As(err, &ce) || ce.File != path || ce.Field != `users["`+tt.user+`"].auth-provider.config` || !strings.Contains(err.Error(), tt.wantErr) {
					t.Fatalf("err = %v, want a *config.Error on the user's auth-provider config containing %q", err, tt.wantErr)
				}
				if string(after) != tt.content {
					t.Errorf("the file changed on error:\n%s", after)
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			kc, err := Parse(after, path)
			if err != nil {
				t.Fatalf("the new file does not parse: %v\n%s", err, after)
			}
			for user, want := range tt.want {
				if got := kc.Users[user].AuthProvider.Config; !reflect.DeepEqual(got, want) {
					t.Errorf("users[%q] config = %v, want %v", user, got, want)
				}
			}
			for _, s := range tt.keep {
				if !strings.Contains(string(after), s) {
					t.Errorf("%q was lost:\n%s", s, after)
				}
			}
			if strings.HasPrefix(tt.content, "{") && !tt.yaml && !json.Valid(after) {
				t.Errorf("a JSON kubeconfig became:\n%s", after)
			}
			if fi, err := os.Stat(path); err != nil || fi.Mode().Perm() != 0o640 {
				t.Errorf("mode after update: %v %v, want 0640", fi.Mode(), err)
			}
			if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"config"}) {
				t.Errorf("files left behind: %v", names)
			}
		})
	}
}

// TestUpdateAuthProviderConfigYAMLOrder checks that keys keep their order:
// only values change.
func TestUpdateAuthProviderConfigYAMLOrder(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	os.WriteFile(path, []byte(kubeconfigWithOIDC), 0o600)
	if err := UpdateAuthProviderConfig(t.Context(), path, "alice", map[string]string{OIDCIDToken: "new-id"}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.ReadFile(path)
	order := []string{"apiVersion:", "kind:", "preferences:", "current-context:", "clusters:", "users:", "name: bob", "name: alice",
		"idp-issuer-url: https://idp", "id-token: \"new-id\"", "client-id: k", "refresh-token: old-refresh", "name: oidc", "future-field", "contexts:"}
	at := 0
	for _, s := range order {
		i := strings.Index(string(after[at:]), s)
		if i < 0 {
			t.Fatalf("%q missing or out of order in:\n%s", s, after)
		}
		at += i
	}
}

func TestUpdateAuthProviderConfigFollowsSymlink(t *testing.T) {
	dir := t.TempDir()
	real := filepath.Join(dir, "real")
	link := filepath.Join(dir, "link")
	os.WriteFile(real, []byte(kubeconfigWithOIDC), 0o600)
	if err := os.Symlink(real, link); err != nil {
		t.Fatal(err)
	}
	if err := UpdateAuthProviderConfig(t.Context(), link, "alice", map[string]string{OIDCIDToken: "new-id"}); err != nil {
		t.Fatal(err)
	}
	if fi, err := os.Lstat(link); err != nil || fi.Mode()&os.ModeSymlink == 0 {
		t.Fatalf("the link was replaced by a file: %v %v", fi.Mode(), err)
	}
	kc, err := LoadKubeconfig(LoadOptions{Path: real})
	if err != nil {
		t.Fatal(err)
	}
	if got := kc.Users["alice"].AuthProvider.Config[OIDCIDToken]; got != "new-id" {
		t.Errorf("target holds %q", got)
	}
}

func TestUpdateAuthProviderConfigUnchangedIsNotRewritten(t *testing.T) {
	path := filepath.Join(t.TempDir(), "config")
	os.WriteFile(path, []byte(kubeconfigWithOIDC), 0o600)
	before, _ := os.Stat(path)
	if err := UpdateAuthProviderConfig(t.Context(), path, "alice", map[string]string{OIDCIDToken: "old-id", OIDCClientID: "k"}); err != nil {
		t.Fatal(err)
	}
	after, _ := os.Stat(path)
	if !os.SameFile(before, after) {
		t.Error("the file was replaced although no value changed")
	}
}

func TestUpdateAuthProviderConfigLocked(t *testing.T) {
	dir := t.TempDir()
	path := filepath.Join(dir, "config")
	os.WriteFile(path, []byte(kubeconfigWithOIDC), 0o600)
	os.WriteFile(path+".lock", nil, 0o600) // another writer, as kubectl's lock
	ctx, cancel := context.WithTimeout(t.Context(), 50*time.Millisecond)
	defer cancel()
	err := UpdateAuthProviderConfig(ctx, path, "alice", map[string]string{OIDCIDToken: "new-id"})
	if !errors.Is(err, ErrFileLocked) || !strings.Contains(err.Error(), path+".lock") {
		t.Fatalf("err = %v, want ErrFileLocked naming the lock file", err)
	}
	// Once the lock is gone, the update goes through and releases it.
	os.Remove(path + ".lock")
	if err := UpdateAuthProviderConfig(t.Context(), path, "alice", map[string]string{OIDCIDToken: "new-id"}); err != nil {
		t.Fatal(err)
	}
	if names := dirNames(t, dir); !reflect.DeepEqual(names, []string{"config"}) {
		t.Errorf("files left behind: %v", names)
	}
}

func dirNames(t *testing.T, dir string) []string {
	t.Helper()
	entries, err := os.ReadDir(dir)
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for _, e := range entries {
		names = append(names, e.Name())
	}
	sort.Strings(names)
	return names
}
