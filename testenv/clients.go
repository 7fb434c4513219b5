package testenv

import (
	"context"
	"fmt"
	"net/http"
	"reflect"

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
// the informer factory. Calls with zero Options return the same client,
// so that the tests sharing a control plane share its connections; Stop
// closes them. A client made with other Options is new: call its
// CloseIdleConnections when done with it, or leave it to Stop's end of
// the control plane.
func (e *Env) REST(opts rest.Options) (*rest.Client, error) {
	zero := reflect.ValueOf(opts).IsZero()
	if zero {
		e.mu.Lock()
		defer e.mu.Unlock()
		if e.rest != nil {
			return e.rest, nil
		}
	}
	cfg, err := e.Config()
	if err != nil {
		return nil, err
	}
	rc, err := rest.New(cfg, opts)
	if err != nil {
		return nil, fmt.Errorf("testenv: %w", err)
	}
	if zero {
		e.rest = rc
	}
	return rc, nil
}

// adminClient returns the HTTP client that testenv's own requests use,
// as the admin, made on first use; Stop closes its connections.
func (e *Env) adminClient() (*http.Client, error) {
	e.mu.Lock()
	defer e.mu.Unlock()
	if e.admin == nil {
		hc, err := e.HTTPClient()
		if err != nil {
			return nil, err
		}
		e.admin = hc
	}
	return e.admin, nil
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
