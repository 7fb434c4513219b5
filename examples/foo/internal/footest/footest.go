// Package footest starts what the Foo examples' tests share: a control
// plane with the Foo CRD installed, and clients for Foos and Deployments.
package footest

import (
	"context"
	"fmt"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	samplev1 "github.com/loom-k8s/loom/examples/foo/api/v1alpha1"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// Env is a running control plane with the Foo CRD.
type Env struct {
	*testenv.Env
	// Config is the admin's configuration, for the program under test.
	Config config.Config
	// Foos and Deployments write and read live, as the admin.
	Foos        *client.Client[*samplev1.Foo]
	Deployments *client.Client[*appsv1.Deployment]
}

// Start starts the control plane with crdDir's CRDs (the examples' own
// config/crd folder, relative to the test) and makes the clients. Call
// Stop when done.
func Start(ctx context.Context, crdDir string) (*Env, error) {
	env, err := testenv.Start(ctx, testenv.Options{CRDs: []string{crdDir}})
	if err != nil {
		return nil, err
	}
	e := &Env{Env: env}
	if err := e.clients(); err != nil {
		env.Stop()
		return nil, err
	}
	return e, nil
}

func (e *Env) clients() (err error) {
	if e.Config, err = e.Env.Config(); err != nil {
		return err
	}
	rc, err := e.REST(rest.Options{})
	if err != nil {
		return err
	}
	// A manager only for its client options: the Scheme knows Foo, and
	// the mapper finds its resource.
	mgr, err := manager.New(manager.Options{Config: &e.Config, Scheme: samplev1.Scheme()})
	if err != nil {
		return err
	}
	if e.Foos, err = client.For[samplev1.Foo](rc, mgr.ClientOptions()); err != nil {
		return err
	}
	e.Deployments, err = client.For[appsv1.Deployment](rc, client.Options{})
	return err
}

// WaitDeployment polls the Deployment namespace/name until ok says yes,
// and returns it; it fails when ctx ends first.
func (e *Env) WaitDeployment(ctx context.Context, namespace, name string, ok func(*appsv1.Deployment) bool) (*appsv1.Deployment, error) {
	for {
		dep, err := e.Deployments.Namespace(namespace).Get(ctx, name, metav1.GetOptions{})
		if err == nil && ok(dep) {
			return dep, nil
		}
		select {
		case <-ctx.Done():
			return nil, fmt.Errorf("deployment %s/%s never got there (last error %v): %w", namespace, name, err, ctx.Err())
		case <-time.After(100 * time.Millisecond):
		}
	}
}
