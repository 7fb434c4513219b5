package testenv

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
)

// frontProxyClientName is the common name of kube-apiserver's proxy client
// certificate, the only one allowed to assert request headers.
const frontProxyClientName = "front-proxy-client"

// tracingConfigFile is kube-apiserver's tracing configuration in the state
// folder, written when Options.Tracing is on.
const tracingConfigFile = "tracing-config.yaml"

// startTracing starts the trace collector that kube-apiserver exports to,
// and writes kube-apiserver's tracing configuration. A sampling rate of 0
// per million makes kube-apiserver sample only requests whose traceparent
// is sampled, so that tests see only the traces they started.
func (e *Env) startTracing() error {
	c, err := NewTraceCollector()
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.Traces = c
	e.mu.Unlock()
	cfg := fmt.Sprintf(`apiVersion: apiserver.config.k8s.io/v1
kind: TracingConfiguration
endpoint: %s
samplingRatePerMillion: 0
`, c.Endpoint())
	if err := os.WriteFile(e.path(tracingConfigFile), []byte(cfg), 0o600); err != nil {
		return fmt.Errorf("testenv: write tracing configuration: %w", err)
	}
	return nil
}

// startAPIServer starts kube-apiserver on a free port, writes the admin
// kubeconfig and waits for /readyz.
func (e *Env) startAPIServer(ctx context.Context, bin string) error {
	// With real nodes it listens on the env's bridge, which Pods reach
	// (as the endpoint of the "kubernetes" Service) and this machine too.
	host := "127.0.0.1"
	if ips := e.bridgeIPs(); len(ips) > 0 {
		host = ips[0].String()
	}
	port, err := freePortAt(host)
	if err != nil {
		return err
	}
	e.URL = "https://" + net.JoinHostPort(host, strconv.Itoa(port))
	e.Kubeconfig = kubeconfig(e.URL, e.CAPEM, "loom-admin", e.AdminCertPEM, e.AdminKeyPEM)
	e.KubeconfigPath = e.path("kubeconfig")
	if err := os.WriteFile(e.KubeconfigPath, e.Kubeconfig, 0o600); err != nil {
		return fmt.Errorf("testenv: write kubeconfig: %w", err)
	}

	// Real kubelets are authorized as nodes (system:node:<name>) by the
	// Node authorizer, and kept to their own Node by NodeRestriction.
	authorizationMode := "RBAC"
	if e.opts.RealNodes > 0 {
		authorizationMode = "Node,RBAC"
	}
	args := []string{
		"--etcd-servers=" + e.EtcdURL,
		"--bind-address=" + host,
		"--advertise-address=" + host,
		"--secure-port=" + strconv.Itoa(port),
		"--tls-cert-file=" + e.path("serving.crt"),
		"--tls-private-key-file=" + e.path("serving.key"),
		"--client-ca-file=" + e.path("ca.crt"),
		"--token-auth-file=" + e.path("tokens.csv"),
		"--anonymous-auth=false", // a request without credentials gets 401, not 403
		"--authorization-mode=" + authorizationMode,
		"--service-account-issuer=https://kubernetes.default.svc.cluster.local",
		"--service-account-key-file=" + e.path("sa.pub"),
		"--service-account-signing-key-file=" + e.path("sa.key"),
		"--service-cluster-ip-range=10.0.0.0/24",
		"--allow-privileged=true",
		"--profiling=false",
		"--shutdown-delay-duration=0s",
		// kwok serves the kubelet API of the fake nodes on 127.0.0.1 with a
		// certificate from our CA.
		"--kubelet-preferred-address-types=InternalIP",
		"--kubelet-certificate-authority=" + e.path("ca.crt"),
		// The aggregation layer (see aggregation.go).
		"--requestheader-client-ca-file=" + e.path("front-proxy-ca.crt"),
		"--requestheader-allowed-names=" + frontProxyClientName,
		"--requestheader-username-headers=X-Remote-User",
		"--requestheader-group-headers=X-Remote-Group",
		"--requestheader-extra-headers-prefix=X-Remote-Extra-",
		"--proxy-client-cert-file=" + e.path("front-proxy-client.crt"),
		"--proxy-client-key-file=" + e.path("front-proxy-client.key"),
		"--enable-aggregator-routing=false", // endpoints may not be loopback addresses
	}
	if !e.opts.Controllers {
		// Without kube-controller-manager nobody creates "default" service
		// accounts, and the ServiceAccount admission plugin would refuse
		// every Pod.
		args = append(args, "--disable-admission-plugins=ServiceAccount")
	}
	if e.opts.Tracing {
		args = append(args, "--tracing-config-file="+e.path(tracingConfigFile))
	}
	if e.opts.RealNodes > 0 {
		// kube-apiserver authenticates to real kubelets (logs, exec) as
		// kubeletClientUser.
		args = append(args,
			"--kubelet-client-certificate="+e.path("kubelet-client.crt"),
			"--kubelet-client-key="+e.path("kubelet-client.key"),
			"--enable-admission-plugins=NodeRestriction",
		)
	}
	args = append(args, e.opts.APIServerArgs...)
	p, err := e.addProc("kube-apiserver", bin, args)
	if err != nil {
		return err
	}
	e.mu.Lock()
	e.apiserver = p
	e.mu.Unlock()
	return e.waitAPIServer(ctx, p)
}

// waitAPIServer waits until /readyz answers 200 to the admin.
func (e *Env) waitAPIServer(ctx context.Context, p *proc) error {
	hc, err := e.HTTPClient()
	if err != nil {
		return err
	}
	defer hc.CloseIdleConnections()
	return e.waitFor(ctx, "kube-apiserver /readyz", p, func(ctx context.Context) (bool, error) {
		code, body, err := e.get(ctx, hc, "/readyz")
		if err != nil {
			return false, err
		}
		if code != http.StatusOK {
			return false, fmt.Errorf("/readyz: %d: %s", code, body)
		}
		return true, nil
	})
}

// RestartAPIServer kills kube-apiserver with SIGKILL and starts it again on
// the same port, with the same flags and the same etcd, then waits until it
// is ready. Clients see their connections reset.
func (e *Env) RestartAPIServer(ctx context.Context) error {
	if err := e.StopAPIServer(ctx); err != nil {
		return err
	}
	return e.StartAPIServer(ctx)
}

// StopAPIServer kills kube-apiserver with SIGKILL, as a crash would; etcd
// keeps running. Clients see their connections reset and new ones refused
// until StartAPIServer.
func (e *Env) StopAPIServer(ctx context.Context) error {
	if e.sharedDir != "" {
		return ErrShared
	}
	e.mu.Lock()
	p, admin := e.apiserver, e.admin
	e.mu.Unlock()
	p.stop(0)
	if admin != nil {
		admin.CloseIdleConnections() // testenv's next request dials anew
	}
	return nil
}

// StartAPIServer starts kube-apiserver again after StopAPIServer, on the
// same port, with the same flags and etcd, and waits until it is ready.
func (e *Env) StartAPIServer(ctx context.Context) error {
	if e.sharedDir != "" {
		return ErrShared
	}
	e.mu.Lock()
	p := e.apiserver
	e.mu.Unlock()
	select {
	case <-p.exited():
	default:
		return fmt.Errorf("testenv: kube-apiserver is running")
	}
	if err := p.start(); err != nil {
		return err
	}
	return e.waitAPIServer(ctx, p)
}

// get sends an admin GET to kube-apiserver and returns the status and body.
// getJSON reads path, which must answer 200, into out.
func (e *Env) getJSON(ctx context.Context, hc *http.Client, path string, out any) error {
	code, body, err := e.get(ctx, hc, path)
	if err != nil {
		return err
	}
	if code != http.StatusOK {
		return fmt.Errorf("get %s: %d: %s", path, code, body)
	}
	return json.Unmarshal([]byte(body), out)
}

// nodeReady reports whether node's Ready condition is True, and else why.
func nodeReady(node corev1.Node) (bool, error) {
	for _, c := range node.Status.Conditions {
		if c.Type == corev1.NodeReady {
			if c.Status == corev1.ConditionTrue {
				return true, nil
			}
			return false, fmt.Errorf("%s: Ready is %s: %s", node.Name, c.Status, c.Message)
		}
	}
	return false, fmt.Errorf("%s: no Ready condition yet", node.Name)
}

func (e *Env) get(ctx context.Context, hc *http.Client, path string) (int, string, error) {
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, e.URL+path, nil)
	if err != nil {
		return 0, "", err
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", err
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}
