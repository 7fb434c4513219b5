package testenv

import (
	"context"
	"fmt"
	"net/http"
)

// startControllerManager starts kube-controller-manager with the admin
// kubeconfig, no leader election and no serving port, then waits until the
// "default" service account exists, so Pods in the default namespace pass
// ServiceAccount admission.
func (e *Env) startControllerManager(ctx context.Context, bin string) error {
	args := []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
		"--service-account-private-key-file=" + e.path("sa.key"),
		"--root-ca-file=" + e.path("ca.crt"),
		"--cluster-signing-cert-file=" + e.path("ca.crt"),
		"--cluster-signing-key-file=" + e.path("ca.key"),
	}
	p, err := e.addProc("kube-controller-manager", bin, args)
	if err != nil {
		return err
	}
	hc, err := e.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	return e.waitFor(ctx, "the default service account", p, func(ctx context.Context) (bool, error) {
		code, body, err := e.get(ctx, hc, "/api/v1/namespaces/default/serviceaccounts/default")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("%d: %s", code, body)
		}
		return true, nil
	})
}

// startScheduler starts kube-scheduler with the admin kubeconfig, no leader
// election and no serving port.
func (e *Env) startScheduler(bin string) error {
	_, err := e.addProc("kube-scheduler", bin, []string{
		"--kubeconfig=" + e.KubeconfigPath,
		"--leader-elect=false",
		"--secure-port=0",
	})
	return err
}
