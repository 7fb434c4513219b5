// Package e2e holds what the example operators' end-to-end tests share: a
// control plane with controllers, scheduler and a fake node; kubectl as the
// independent client that applies manifests as a user would; and a client
// configuration for the operator's own service account, from a
// TokenRequest, so that every e2e test runs its operator with exactly the
// RBAC its manifests grant, never as admin.
package e2e

import (
	"context"
	"errors"
	"os/exec"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	authenticationv1 "k8s.io/api/authentication/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Cluster starts etcd, kube-apiserver, kube-controller-manager (garbage
// collector, Deployments, ...), kube-scheduler and one kwok node, stopped
// when the test ends.
func Cluster(t *testing.T) *testenv.Env {
	t.Helper()
	return testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
}

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

// KubectlErr runs kubectl as admin and returns its combined output and error.
func KubectlErr(env *testenv.Env, args ...string) (string, error) {
	// Not the test's context: cleanups run kubectl after it ends.
	ctx, cancel := context.WithTimeout(context.Background(), time.Minute)
	defer cancel()
	out, err := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"),
		append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...).CombinedOutput()
	return string(out), err
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
// service account ns/name, with a one-hour token from the TokenRequest API
// (what the kubelet mounts into a pod), and trusts the server's CA; the
// in-cluster configuration of a pod running as that account, in effect.
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

// CanI asks the server (kubectl auth can-i, as admin impersonating the
// service account) whether ns/sa may do verb on resource; for checks that
// the operator's role is not broader than it should be.
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

// Run runs an operator in the background until the test ends. It fails
// the test if the operator returns before that, or returns an error other
// than context.Canceled when it is stopped.
func Run(t *testing.T, run func(ctx context.Context) error) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	stopped := make(chan struct{})
	var runErr error
	var early atomic.Bool
	go func() {
		runErr = run(ctx)
		early.Store(ctx.Err() == nil)
		close(stopped)
	}()
	go func() {
		select {
		case <-stopped:
			if early.Load() {
				t.Errorf("operator stopped before the test ended: %v", runErr)
			}
		case <-ctx.Done():
		}
	}()
	t.Cleanup(func() {
		cancel()
		<-stopped
		if !early.Load() && runErr != nil && !errors.Is(runErr, context.Canceled) {
			t.Errorf("operator: stopping: %v", runErr)
		}
	})
}

// Eventually calls cond until it returns true, failing the test after two
// minutes with the last error or state cond reported.
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
