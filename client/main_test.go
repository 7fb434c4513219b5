package client_test

import (
	"context"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// env is one control plane, with kube-controller-manager (the garbage
// collector), the scheduler and a fake node, shared by the package's tests.
var env *testenv.Env

func TestMain(m *testing.M) {
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	e, err := testenv.Start(ctx, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	env = e
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, env.LogTails(20))
	}
	_ = env.Stop()
	os.Exit(code)
}

// newREST returns a REST client for the shared control plane.
func newREST(t testing.TB, ct rest.ContentType) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
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
