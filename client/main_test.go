package client_test

import (
	"testing"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{Controllers: true, Scheduler: true, Nodes: 1}}

func TestMain(m *testing.M) { shared.Main(m) }

// newREST returns a REST client for the shared control plane.
func newREST(t testing.TB, ct rest.ContentType) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: ct})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}
