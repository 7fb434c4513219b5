// Package e2e holds what an operator's end-to-end tests need beyond a
// control plane (package testenv): kubectl as the independent client that
// applies manifests as a user would; a client configuration for the
// operator's own service account (from a TokenRequest, so that the test
// runs the operator with exactly the RBAC its manifests grant, never as
// admin); a way to run the operator in the background for the length of
// a test; and a recording proxy with which a test checks that role
// against the API calls the operator made: every call was granted, and
// every granted verb was used (least privilege).
//
// Loom's example operators and the projects `loom init` makes use it.
package e2e

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"sort"
	"strings"
	"sync"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Kubectl runs kubectl as admin and returns its output; it fails the test
// when kubectl fails.
func Kubectl(t *testing.T, env *testenv.Env, args ...string) string {
	t.Helper()
	out, err := KubectlErr(env, args...)
	if err != nil {
		t.Fatalf("kubectl %s: %v\n%s", strings.Join(args, " "), err, out)
	}
	return out
}

// KubectlErr runs kubectl as admin and returns its combined output and
// error.
func KubectlErr(env *testenv.Env, args ...string) (string, error) {
	// Not the test's context: cleanups run kubectl after it ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"),
		append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...).CombinedOutput()
	return string(out), err
}

// CanI asks the server (kubectl auth can-i, as admin impersonating the
// service account) whether ns/sa may do verb on resource: for checks that
// an operator's role is not broader than it should be.
func CanI(t *testing.T, env *testenv.Env, ns, sa, verb, resource string, extra ...string) bool {
	t.Helper()
	args := append([]string{"--kubeconfig", env.KubeconfigPath, "auth", "can-i", verb, resource, "--as", "system:serviceaccount:" + ns + ":" + sa}, extra...)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	// Only stdout: kubectl may warn on stderr (such as for a cluster-scoped
	// resource). "no" exits with 1.
	out, _ := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"), args...).Output()
	return strings.TrimSpace(string(out)) == "yes"
}

// Admin returns a client configuration with the admin's credentials.
func Admin(t *testing.T, env *testenv.Env) config.Config {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	return cfg
}

// ServiceAccount returns a client configuration that authenticates as the
// service account ns/name with a one-hour token from the TokenRequest API
// (what the kubelet mounts into a pod): the in-cluster configuration of
// the operator's pod, in effect.
func ServiceAccount(t *testing.T, env *testenv.Env, ns, name string) config.Config {
	t.Helper()
	admin := Admin(t, env)
	rc, err := rest.New(admin, rest.Options{ContentType: rest.JSON})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	hour := int64(3600)
	var tr authenticationv1.TokenRequest
	err = rc.Post().Version("v1").Namespace(ns).Resource("serviceaccounts").Name(name).SubResource("token").
		Body(&authenticationv1.TokenRequest{
			TypeMeta: metav1.TypeMeta{APIVersion: "authentication.k8s.io/v1", Kind: "TokenRequest"},
			Spec:     authenticationv1.TokenRequestSpec{ExpirationSeconds: &hour},
		}).Do(t.Context(), &tr)
	if err != nil {
		t.Fatalf("TokenRequest for %s/%s: %v", ns, name, err)
	}
	return config.Config{
		Host:      admin.Host,
		Namespace: ns,
		TLS:       config.TLS{CAData: env.CAPEM},
		Auth:      config.Auth{BearerToken: tr.Status.Token},
		Origin:    "TokenRequest for " + ns + "/" + name,
	}
}

// Run runs an operator in the background until the test ends, and fails
// the test if it returns an error before that.
func Run(t *testing.T, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- run(ctx) }()
	stopped := make(chan error, 1)
	go func() {
		err := <-done
		if ctx.Err() == nil {
			t.Errorf("operator stopped early: %v", err)
		}
		stopped <- err
	}()
	t.Cleanup(func() {
		cancel()
		if err := <-stopped; err != nil && !errors.Is(err, context.Canceled) {
			t.Errorf("operator: %v", err)
		}
	})
}

// Eventually calls cond until it returns true, failing the test after two
// minutes with the last state cond reported.
func Eventually(t *testing.T, what string, cond func() (bool, string)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		ok, state := cond()
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s; last seen: %s", what, state)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// Call is one kind of API request, as RBAC sees it: a verb on a resource
// (with its subresource, as "widgets/status") of an API group, in a
// namespace ("" for cluster-scoped and all-namespace requests).
type Call struct {
	Verb, Group, Resource, Namespace string
}

func (c Call) String() string {
	g := c.Group
	if g == "" {
		g = "core"
	}
	s := c.Verb + " " + g + "/" + c.Resource
	if c.Namespace != "" {
		s += " in " + c.Namespace
	}
	return s
}

// Recorder is a proxy in front of the API server that authenticates as a
// given configuration and records every request that passes through it.
type Recorder struct {
	mu          sync.Mutex
	calls       map[Call]int
	nonResource map[string]int
}

// Record starts a recording proxy that forwards to cfg's server with cfg's
// bearer token, and returns a configuration that goes through it (plain
// HTTP on 127.0.0.1), for the operator under test. It stops when the test
// ends, after anything registered later (such as Run).
func Record(t *testing.T, cfg config.Config) (config.Config, *Recorder) {
	t.Helper()
	target, err := url.Parse(cfg.Host)
	if err != nil {
		t.Fatal(err)
	}
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(cfg.TLS.CAData) {
		t.Fatal("e2e.Record: the configuration has no CA certificate")
	}
	rec := &Recorder{calls: map[Call]int{}, nonResource: map[string]int{}}
	proxy := &httputil.ReverseProxy{
		Rewrite: func(r *httputil.ProxyRequest) {
			r.SetURL(target)
			r.Out.Header.Set("Authorization", "Bearer "+cfg.Auth.BearerToken)
		},
		Transport:     &http.Transport{TLSClientConfig: &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}, ForceAttemptHTTP2: true},
		FlushInterval: -1, // watches stream
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		rec.observe(r)
		proxy.ServeHTTP(w, r)
	}))
	t.Cleanup(func() {
		srv.CloseClientConnections()
		srv.Close()
	})
	return config.Config{Host: srv.URL, Namespace: cfg.Namespace, Origin: "recording proxy for " + cfg.Origin}, rec
}

func (rec *Recorder) observe(r *http.Request) {
	call, ok := parseCall(r)
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !ok {
		rec.nonResource[r.Method+" "+r.URL.Path]++
		return
	}
	rec.calls[call]++
	if call.Verb == "watch" && r.URL.Query().Get("sendInitialEvents") == "true" {
		// A streaming list is the informer's list: Loom's reflector falls
		// back to a paginated list (verb list) when a server refuses it,
		// so an informer needs both list and watch.
		list := call
		list.Verb = "list"
		rec.calls[list]++
	}
}

// Calls returns the resource calls seen so far, sorted.
func (rec *Recorder) Calls() []Call {
	rec.mu.Lock()
	defer rec.mu.Unlock()
	out := make([]Call, 0, len(rec.calls))
	for c := range rec.calls {
		out = append(out, c)
	}
	sort.Slice(out, func(i, j int) bool { return out[i].String() < out[j].String() })
	return out
}

// parseCall maps a request to its RBAC verb and resource, as the API
// server's request-info resolver does; ok is false for non-resource
// requests (discovery, /version).
func parseCall(r *http.Request) (Call, bool) {
	parts := strings.Split(strings.Trim(r.URL.Path, "/"), "/")
	var c Call
	switch {
	case len(parts) >= 3 && parts[0] == "api":
		parts = parts[2:]
	case len(parts) >= 4 && parts[0] == "apis":
		c.Group, parts = parts[1], parts[3:]
	default:
		return c, false
	}
	if len(parts) >= 3 && parts[0] == "namespaces" {
		c.Namespace, parts = parts[1], parts[2:]
	}
	c.Resource = parts[0]
	named := len(parts) >= 2
	if len(parts) >= 3 {
		c.Resource += "/" + parts[2]
	}
	watch := r.URL.Query().Get("watch")
	switch r.Method {
	case http.MethodGet, http.MethodHead:
		switch {
		case watch == "true" || watch == "1":
			c.Verb = "watch"
		case named:
			c.Verb = "get"
		default:
			c.Verb = "list"
		}
	case http.MethodPost:
		c.Verb = "create"
	case http.MethodPut:
		c.Verb = "update"
	case http.MethodPatch:
		c.Verb = "patch"
	case http.MethodDelete:
		c.Verb = "delete"
		if !named {
			c.Verb = "deletecollection"
		}
	default:
		c.Verb = strings.ToLower(r.Method)
	}
	return c, true
}

// Roles are the RBAC roles of a manifest file: its ClusterRoles, and its
// Roles with their namespaces.
type Roles struct {
	Cluster    []rbacv1.PolicyRule
	Namespaced map[string][]rbacv1.PolicyRule
}

// ReadRoles reads the ClusterRoles and Roles of a manifest file, such as
// config/rbac/role.yaml.
func ReadRoles(t *testing.T, path string) Roles {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	roles := Roles{Namespaced: map[string][]rbacv1.PolicyRule{}}
	for _, doc := range strings.Split(string(data), "\n---") {
		var obj struct {
			Kind     string              `json:"kind"`
			Metadata metav1.ObjectMeta   `json:"metadata"`
			Rules    []rbacv1.PolicyRule `json:"rules"`
		}
		if err := yaml.Unmarshal([]byte(doc), &obj); err != nil {
			t.Fatalf("%s: %v", path, err)
		}
		switch obj.Kind {
		case "ClusterRole":
			roles.Cluster = append(roles.Cluster, obj.Rules...)
		case "Role":
			roles.Namespaced[obj.Metadata.Namespace] = append(roles.Namespaced[obj.Metadata.Namespace], obj.Rules...)
		}
	}
	return roles
}

func matches(rules []rbacv1.PolicyRule, c Call) bool {
	has := func(list []string, s string) bool { return slices.Contains(list, s) || slices.Contains(list, "*") }
	for _, r := range rules {
		if has(r.APIGroups, c.Group) && has(r.Resources, c.Resource) && has(r.Verbs, c.Verb) {
			return true
		}
	}
	return false
}

// Allows says whether the roles grant c.
func (r Roles) Allows(c Call) bool {
	return matches(r.Cluster, c) || (c.Namespace != "" && matches(r.Namespaced[c.Namespace], c))
}

// granted lists every call the roles grant on the given resources; ""
// namespace for the ClusterRoles' (used in any namespace).
func (r Roles) granted(resources []string) []Call {
	var out []Call
	add := func(ns string, rules []rbacv1.PolicyRule) {
		for _, rule := range rules {
			for _, g := range rule.APIGroups {
				for _, res := range rule.Resources {
					if !slices.Contains(resources, res) {
						continue
					}
					for _, v := range rule.Verbs {
						out = append(out, Call{Verb: v, Group: g, Resource: res, Namespace: ns})
					}
				}
			}
		}
	}
	add("", r.Cluster)
	for ns, rules := range r.Namespaced {
		add(ns, rules)
	}
	return out
}

// CheckLeastPrivilege checks the roles in rolePath against the calls rec
// saw: every call the operator made must be granted (else the role is too
// narrow, and the operator failed with 403), and every verb granted on the
// given resources must have been used, within two minutes (else the role
// is broader than the operator needs). Resources are named as in the role:
// "widgets", "widgets/status", "leases".
func CheckLeastPrivilege(t *testing.T, rec *Recorder, rolePath string, resources ...string) {
	t.Helper()
	roles := ReadRoles(t, rolePath)
	unused := func() []Call {
		used := rec.Calls()
		var out []Call
		for _, g := range roles.granted(resources) {
			if !slices.ContainsFunc(used, func(u Call) bool {
				return u.Verb == g.Verb && u.Group == g.Group && u.Resource == g.Resource && (g.Namespace == "" || g.Namespace == u.Namespace)
			}) {
				out = append(out, g)
			}
		}
		return out
	}
	Eventually(t, "the operator to use every verb its role grants", func() (bool, string) {
		u := unused()
		return len(u) == 0, fmt.Sprintf("granted in %s and never used: %v", rolePath, u)
	})
	for _, c := range rec.Calls() {
		if !roles.Allows(c) {
			t.Errorf("the operator made a call its role does not grant (add a +kubebuilder:rbac marker): %v", c)
		}
	}
	rec.mu.Lock()
	defer rec.mu.Unlock()
	t.Logf("calls as the operator's service account: %v; non-resource: %v", rec.calls, rec.nonResource)
}
