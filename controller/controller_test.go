package controller_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// testManager is the least a controller needs to run: an informer
// factory. The test starts the factory and the controller itself.
type testManager struct {
	f    *cache.Factory
	opts controller.Options
}

// restForEnv starts a control plane for t and returns a REST client to it.
func restForEnv(t *testing.T, opts testenv.Options) *rest.Client {
	t.Helper()
	env := testenv.New(t, opts)
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

func newTestManager(rc *rest.Client) *testManager {
	return &testManager{f: cache.NewFactory(rc, cache.FactoryOptions{})}
}

func (m *testManager) Factory() *cache.Factory               { return m.f }
func (m *testManager) ControllerOptions() controller.Options { return m.opts }
func (m *testManager) Add(r interface {
	Start(ctx context.Context) error
}) error {
	return nil
}

// TestStartFailsFastWhenASourceIsForbidden: a controller whose informer
// is refused by RBAC returns a typed error naming the informer, at once,
// rather than waiting for a sync that never comes.
func TestStartFailsFastWhenASourceIsForbidden(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	kc, err := env.UserKubeconfig("nobody")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: path})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()
	m := newTestManager(rc)
	c := controller.New(m, func(context.Context, *corev1.Pod) (controller.Result, error) {
		return controller.Result{}, nil
	}, controller.Options{Name: "forbidden"})
	go func() { _ = m.f.Start(ctx) }()
	err = c.Start(ctx) // returns long before the five-minute context ends
	var se *cache.SyncError
	if !errors.As(err, &se) || !apierrors.IsForbidden(err) {
		t.Fatalf("Start: %v; want a cache.SyncError that is Forbidden", err)
	}
	if ctx.Err() != nil {
		t.Fatal("Start waited for the context instead of failing fast")
	}
}
