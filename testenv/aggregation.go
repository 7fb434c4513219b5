package testenv

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"strings"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// The aggregation layer.
//
// kube-apiserver runs with the request-header (front-proxy) flags: it
// proxies requests for an APIService's group and version to the service
// behind it, presenting the client certificate FrontProxyClientCertPEM
// (CN front-proxy-client, signed by FrontProxyCAPEM), and names the user in
// X-Remote-User, X-Remote-Group and X-Remote-Extra-* headers. An aggregated
// server trusts those headers from a client certificate signed by the
// front-proxy CA; k8s.io/apiserver's delegated authentication reads the CA
// and the header names from the ConfigMap kube-system/
// extension-apiserver-authentication, which kube-apiserver publishes.
//
// How a server on 127.0.0.1 is reached: an APIService can only point at a
// Service. With --enable-aggregator-routing=true kube-apiserver would dial
// an endpoint of the Service, but neither Endpoints nor EndpointSlices may
// hold a loopback address (validation refuses 127.0.0.0/8). With routing
// off (the default, kept here), it dials the Service's cluster IP, which
// nothing routes without kube-proxy, or, for a Service of type
// ExternalName, the external name itself. So RegisterLocalAPIService
// creates a Service of type ExternalName whose externalName is "127.0.0.1"
// (a valid DNS subdomain) and an APIService on it with the server's port. The
// availability check skips endpoints for ExternalName Services and calls
// the server's discovery document directly.
//
// kube-apiserver verifies the server's certificate against the
// APIService's caBundle for the host name LocalAPIServiceHost(group)
// (<service>.<namespace>.svc), not for 127.0.0.1: the serving certificate
// must name that host (ServingCert issues one).

// LocalAPIServiceNamespace holds the Services that RegisterLocalAPIService
// creates.
const LocalAPIServiceNamespace = "default"

// LocalAPIServiceName is the name of the Service that RegisterLocalAPIService
// creates for group: "loom-" and the group with dots as dashes, at most 63
// characters.
func LocalAPIServiceName(group string) string {
	n := "loom-" + strings.ReplaceAll(group, ".", "-")
	if len(n) > 63 {
		n = n[:63]
	}
	return strings.TrimRight(n, "-")
}

// LocalAPIServiceHost is the host name that kube-apiserver expects in the
// serving certificate of an aggregated server for group registered with
// RegisterLocalAPIService.
func LocalAPIServiceHost(group string) string {
	return LocalAPIServiceName(group) + "." + LocalAPIServiceNamespace + ".svc"
}

// APIServiceName is the name of the APIService object for a group version:
// "<version>.<group>".
func APIServiceName(group, version string) string { return version + "." + group }

// ServingCert issues a serving certificate for hosts (DNS names or IP
// addresses), signed by the CA in CAPEM. It is meant for servers that
// kube-apiserver calls, such as aggregated API servers and webhooks: pass
// CAPEM as their CA bundle.
func (e *Env) ServingCert(hosts ...string) (certPEM, keyPEM []byte, err error) {
	if len(hosts) == 0 {
		return nil, nil, errors.New("testenv: ServingCert: no host names")
	}
	r := pki.Request{CommonName: hosts[0], Server: true}
	for _, h := range hosts {
		if ip := net.ParseIP(h); ip != nil {
			r.IPs = append(r.IPs, ip)
		} else {
			r.DNSNames = append(r.DNSNames, h)
		}
	}
	return issue(e.ca, r)
}

// RegisterLocalAPIService makes kube-apiserver serve group/version by
// proxying to an HTTPS server on 127.0.0.1:port, whose serving certificate
// is signed by a CA in caBundle and names LocalAPIServiceHost(group). It
// creates or updates an ExternalName Service (see the comment on the
// aggregation layer above) and the APIService, and returns without waiting:
// call WaitAPIServiceAvailable for that. Versions of one group share the
// Service; later versions sort by the usual Kubernetes version order.
func (e *Env) RegisterLocalAPIService(ctx context.Context, group, version string, port int, caBundle []byte) error {
	switch {
	case group == "" || version == "":
		return fmt.Errorf("testenv: RegisterLocalAPIService: group %q and version %q must both be set", group, version)
	case port <= 0 || port > 65535:
		return fmt.Errorf("testenv: RegisterLocalAPIService: port %d is not a TCP port", port)
	case len(bytes.TrimSpace(caBundle)) == 0:
		return errors.New("testenv: RegisterLocalAPIService: empty CA bundle (kube-apiserver would not verify the server)")
	}
	svc := map[string]any{
		"apiVersion": "v1",
		"kind":       "Service",
		"metadata":   map[string]any{"name": LocalAPIServiceName(group), "namespace": LocalAPIServiceNamespace},
		"spec":       map[string]any{"type": "ExternalName", "externalName": "127.0.0.1"},
	}
	apiService := map[string]any{
		"apiVersion": "apiregistration.k8s.io/v1",
		"kind":       "APIService",
		"metadata":   map[string]any{"name": APIServiceName(group, version)},
		"spec": map[string]any{
			"group":   group,
			"version": version,
			"service": map[string]any{
				"namespace": LocalAPIServiceNamespace,
				"name":      LocalAPIServiceName(group),
				"port":      port,
			},
			"caBundle":             caBundle, // []byte: base64 in JSON
			"groupPriorityMinimum": 1000,
			"versionPriority":      15,
		},
	}
	if err := e.apply(ctx, "/api/v1/namespaces/"+LocalAPIServiceNamespace+"/services/"+LocalAPIServiceName(group), svc); err != nil {
		return err
	}
	return e.apply(ctx, "/apis/apiregistration.k8s.io/v1/apiservices/"+APIServiceName(group, version), apiService)
}

// UnregisterLocalAPIService deletes the APIService for group/version. The
// Service stays, since other versions of the group may use it. A missing
// APIService is not an error.
func (e *Env) UnregisterLocalAPIService(ctx context.Context, group, version string) error {
	code, body, err := e.adminCall(ctx, http.MethodDelete, "/apis/apiregistration.k8s.io/v1/apiservices/"+APIServiceName(group, version), "", nil)
	if err != nil {
		return err
	}
	if code != http.StatusOK && code != http.StatusNotFound {
		return fmt.Errorf("testenv: delete APIService %s: %d: %s", APIServiceName(group, version), code, body)
	}
	return nil
}

// APIServiceNotAvailableError is returned by WaitAPIServiceAvailable when
// the APIService did not become Available in time. Reason and Message are
// from its last Available condition.
type APIServiceNotAvailableError struct {
	Name            string
	Reason, Message string
	Err             error // the context's error
}

func (e *APIServiceNotAvailableError) Error() string {
	return fmt.Sprintf("testenv: APIService %s not Available: %s: %s: %v", e.Name, e.Reason, e.Message, e.Err)
}

func (e *APIServiceNotAvailableError) Unwrap() error { return e.Err }

// WaitAPIServiceAvailable waits until the APIService for group/version has
// the condition Available=True, or ctx ends, or Options.StartTimeout
// passes. kube-apiserver sets the condition once it has called the server's
// discovery document successfully.
func (e *Env) WaitAPIServiceAvailable(ctx context.Context, group, version string) error {
	name := APIServiceName(group, version)
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	last := &APIServiceNotAvailableError{Name: name, Reason: "NotFound", Message: "no Available condition yet"}
	for {
		code, body, err := e.adminCall(ctx, http.MethodGet, "/apis/apiregistration.k8s.io/v1/apiservices/"+name, "", nil)
		if err == nil && code == http.StatusOK {
			var s struct {
				Status struct {
					Conditions []struct{ Type, Status, Reason, Message string }
				}
			}
			if err := json.Unmarshal([]byte(body), &s); err != nil {
				return fmt.Errorf("testenv: decode APIService %s: %w", name, err)
			}
			for _, c := range s.Status.Conditions {
				if c.Type == "Available" {
					if c.Status == "True" {
						return nil
					}
					last.Reason, last.Message = c.Reason, c.Message
				}
			}
		}
		if err := sleepCtx(ctx, pollInterval); err != nil {
			last.Err = err
			return last
		}
	}
}

// apply creates or updates obj at path with server-side apply, as the
// field manager "testenv".
func (e *Env) apply(ctx context.Context, path string, obj any) error {
	b, err := json.Marshal(obj)
	if err != nil {
		return err
	}
	code, body, err := e.adminCall(ctx, http.MethodPatch, path+"?fieldManager=testenv&force=true", "application/apply-patch+yaml", b)
	if err != nil {
		return err
	}
	if code != http.StatusOK && code != http.StatusCreated {
		return fmt.Errorf("testenv: apply %s: %d: %s", path, code, body)
	}
	return nil
}

// adminCall sends one request as the admin and returns the status and body.
func (e *Env) adminCall(ctx context.Context, method, path, contentType string, in []byte) (int, string, error) {
	hc, err := e.adminClient()
	if err != nil {
		return 0, "", err
	}
	req, err := http.NewRequestWithContext(ctx, method, e.URL+path, bytes.NewReader(in))
	if err != nil {
		return 0, "", err
	}
	if contentType != "" {
		req.Header.Set("Content-Type", contentType)
	}
	resp, err := hc.Do(req)
	if err != nil {
		return 0, "", fmt.Errorf("testenv: %s %s: %w", method, path, err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(io.LimitReader(resp.Body, 1<<20))
	return resp.StatusCode, string(b), err
}

// pollInterval is how often waits check again.
const pollInterval = 200 * time.Millisecond

// sleepCtx sleeps for d, or returns ctx's error if it ends first.
func sleepCtx(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return ctx.Err()
	case <-t.C:
		return nil
	}
}
