package main

import (
	"log/slog"
	"testing"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/examples/at/api/v1beta1"
	"github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// testLogger sends the operator's log to the test's log (shown on failure
// or with -v).
func testLogger(t *testing.T) *slog.Logger {
	return slog.New(slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelInfo}))
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}

// install applies config/ (the CRD, the webhook configurations, the
// namespace and RBAC) to env, waits until the CRD is served, and returns
// the admin config and a REST client, closed when the test ends.
func install(t *testing.T, env *testenv.Env) (config.Config, *rest.Client) {
	t.Helper()
	e2e.Kubectl(t, env, "apply", "-k", "config")
	admin := e2e.Admin(t, env)
	rc, err := rest.New(admin, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	if err := crd.WaitEstablished(t.Context(), rc, crd.Options{}, operator.CRDName); err != nil {
		t.Fatal(err)
	}
	return admin, rc
}

// clients returns clients of the At in both versions, in namespace ns.
func clients(t *testing.T, rc *rest.Client, ns string) (*client.Client[*v1alpha1.At], *client.Client[*v1beta1.At]) {
	t.Helper()
	opts := client.Options{Scheme: operator.Scheme(), Mapper: discovery.MapperFor(rc)}
	alpha, err := client.For[v1alpha1.At](rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	beta, err := client.For[v1beta1.At](rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	return alpha.Namespace(ns), beta.Namespace(ns)
}
