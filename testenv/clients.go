package testenv

import (
	"context"
	"fmt"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
)

// Config returns the admin's client configuration (the admin kubeconfig,
// loaded), ready for rest.New or manager.Options.Config.
func (e *Env) Config() (config.Config, error) {
	cfg, err := config.Load(config.LoadOptions{Path: e.KubeconfigPath})
	if err != nil {
		return config.Config{}, fmt.Errorf("testenv: %w", err)
	}
	return cfg, nil
}

// REST returns a REST client that acts as the admin, for client.For and
// the informer factory. Call its CloseIdleConnections when done with it,
// or leave it to Stop's end of the control plane.
func (e *Env) REST(opts rest.Options) (*rest.Client, error) {
	cfg, err := e.Config()
	if err != nil {
		return nil, err
	}
	rc, err := rest.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	return rc, nil
}

// installCRDs installs the CustomResourceDefinitions of Options.CRDs and
// waits until each is established and discoverable.
func (e *Env) installCRDs(ctx context.Context) error {
	objs, err := crd.ReadFiles(e.opts.CRDs...)
	if err != nil {
		return fmt.Errorf("testenv: Options.CRDs: %w", err)
	}
	rc, err := e.REST(rest.Options{})
	if err != nil {
		return err
	}
	defer rc.CloseIdleConnections()
	if err := crd.Install(ctx, rc, objs, crd.Options{Logger: e.log}); err != nil {
		return fmt.Errorf("testenv: Options.CRDs: %w", err)
	}
	return nil
}
