package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"net"
	"net/http"
	"net/http/httptest"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
	"github.com/loom-k8s/loom/webhook"
)

// countingMetrics records Metrics calls.
type countingMetrics struct {
	mu    sync.Mutex
	calls map[string]int // "webhook code" -> count; "register webhook", "start webhook"
}

func (m *countingMetrics) RegisterWebhook(name string) { m.add("register " + name) }
func (m *countingMetrics) StartWebhook(name string)    { m.add("start " + name) }
func (m *countingMetrics) ObservePanic(name string, conversion bool) {
	m.add(fmt.Sprintf("panic %s conversion=%v", name, conversion))
}

func (m *countingMetrics) add(key string) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[key]++
}

func (m *countingMetrics) ObserveWebhook(name string, code int, _ time.Duration) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if m.calls == nil {
		m.calls = map[string]int{}
	}
	m.calls[fmt.Sprintf("%s %d", name, code)]++
}

func (m *countingMetrics) snapshot() map[string]int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return maps.Clone(m.calls)
}

func (m *countingMetrics) count(key string) int {
	m.mu.Lock()
	defer m.mu.Unlock()
	return m.calls[key]
}

type running struct {
	srv     *webhook.Server
	certs   *webhook.Certs
	url     string
	metrics *countingMetrics
	stop    func()
}

// startServer runs a webhook server on 127.0.0.1 with certificates from
// Certs, and the ConfigMap validator and defaulter of admission_test.go,
// counting its requests.
func startServer(t *testing.T) *running {
	t.Helper()
	m := &countingMetrics{}
	srv, certs, stop := serveTLS(t, func(o *webhook.ServerOptions) { o.ReloadInterval, o.Metrics = 5*time.Millisecond, m })
	return &running{srv: srv, certs: certs, url: "https://" + srv.Addr().String(), metrics: m, stop: stop}
}

// serveTLS runs a webhook server on 127.0.0.1 with certificates from Certs,
// the options set changes, and the ConfigMap validator and defaulter of
// admission_test.go at /validate and /default, until the test ends or
// stop is called.
func serveTLS(t *testing.T, set func(*webhook.ServerOptions)) (*webhook.Server, *webhook.Certs, func()) {
	t.Helper()
	dir := t.TempDir()
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: dir, IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(); err != nil {
		t.Fatal(err)
	}
	opts := webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir}
	if set != nil {
		set(&opts)
	}
	srv, err := webhook.NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	srv.Register("/validate", webhook.ValidatorFor[corev1.ConfigMap](cmValidator{}))
	srv.Register("/default", webhook.DefaulterFor[corev1.ConfigMap](cmDefaulter{}))
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- srv.Start(ctx) }()
	var once sync.Once
	stop := func() {
		once.Do(func() {
			cancel()
			if err := <-done; err != nil {
				t.Errorf("server: %v", err)
			}
		})
	}
	t.Cleanup(stop)
	return srv, certs, stop
}

func adminREST(t *testing.T) *rest.Client {
	t.Helper()
	return injectREST(t)
}

// namespace makes a namespace for one test (a fresh name, so -count=N
// works on the shared control plane) and returns its name; webhooks are
// scoped to it.
func namespace(t *testing.T, rc *rest.Client, prefix string) string {
	t.Helper()
	nss, err := client.For[corev1.Namespace](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: prefix + "-"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return ns.Name
}

// registerWebhooks creates a validating and a mutating configuration for
// ConfigMaps in ns with the given failure policy, pointing at url.
func registerWebhooks(t *testing.T, rc *rest.Client, ns, url string, bundle []byte, policy admissionregistrationv1.FailurePolicyType, labelSelector map[string]string) {
	t.Helper()
	none := admissionregistrationv1.SideEffectClassNone
	timeout := int32(30) // the most the API allows: a loaded machine must not fail calls
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{""}, APIVersions: []string{"v1"}, Resources: []string{"configmaps"}},
	}}
	nsSel := &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	objSel := &metav1.LabelSelector{MatchLabels: labelSelector}
	name := ns + "-" + strings.ToLower(string(policy))
	vcs, err := client.For[admissionregistrationv1.ValidatingWebhookConfiguration](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	mcs, err := client.For[admissionregistrationv1.MutatingWebhookConfiguration](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	vURL, mURL := url+"/validate", url+"/default"
	if _, err := vcs.Create(t.Context(), &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{{
			Name: "validate.loom.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &vURL, CABundle: bundle},
			Rules: rules, FailurePolicy: &policy, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: nsSel, ObjectSelector: objSel, TimeoutSeconds: &timeout,
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := mcs.Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Webhooks: []admissionregistrationv1.MutatingWebhook{{
			Name: "default.loom.test", ClientConfig: admissionregistrationv1.WebhookClientConfig{URL: &mURL, CABundle: bundle},
			Rules: rules, FailurePolicy: &policy, SideEffects: &none, AdmissionReviewVersions: []string{"v1"},
			NamespaceSelector: nsSel, ObjectSelector: objSel, TimeoutSeconds: &timeout,
		}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = vcs.Delete(context.Background(), name, metav1.DeleteOptions{})
		_ = mcs.Delete(context.Background(), name, metav1.DeleteOptions{})
	})
}

// waitServed creates probe objects until the API server calls the new
// webhooks (configurations take a moment to reach its admission chain).
func waitServed(t *testing.T, cms *client.Client[*corev1.ConfigMap], labels map[string]string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		probe := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{GenerateName: "probe-", Labels: labels}}
		out, err := cms.Create(ctx, probe, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
		if err == nil && out.Data["color"] == "blue" {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("webhooks never called: %v", err)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

func TestServerThroughAPIServer(t *testing.T) {
	env := shared.Env(t)
	rc := adminREST(t)
	ns := namespace(t, rc, "webhook-served")
	r := startServer(t)
	labels := map[string]string{"webhooked": "yes"}
	registerWebhooks(t, rc, ns, r.url, r.certs.CABundle(), admissionregistrationv1.Fail, labels)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	waitServed(t, cms, labels)

	// The defaulting webhook's patch is applied by the API server.
	got, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a", Labels: labels},
		Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got.Data["color"] != "blue" || got.Data["k"] != "v" {
		t.Fatalf("stored data %v, want the default color added", got.Data)
	}
	// The validating webhook's denial reaches the client: through Loom
	// with its code, through kubectl with its message.
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "x", Labels: labels},
		Data: map[string]string{"forbidden": "1"}}, metav1.CreateOptions{})
	if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `the key "forbidden" is not allowed`) {
		t.Fatalf("create with a forbidden key: %v, want Forbidden with the webhook's message", err)
	}
	kubectl := func(stdin string, args ...string) (string, error) {
		cmd := exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", env.KubeconfigPath, "-n", ns}, args...)...)
		cmd.Stdin = strings.NewReader(stdin)
		out, err := cmd.CombinedOutput()
		return string(out), err
	}
	out, err := kubectl(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"y","labels":{"webhooked":"yes"}},"data":{"forbidden":"1"}}`, "create", "-f", "-")
	if err == nil || !strings.Contains(out, `admission webhook "validate.loom.test" denied the request: the key "forbidden" is not allowed`) {
		t.Fatalf("kubectl create: %v\n%s\nwant the webhook's message", err, out)
	}
	// Warnings reach kubectl too: an update that drops keys.
	out, err = kubectl("", "patch", "configmap", "a", "--type=json", `-p=[{"op":"remove","path":"/data/k"}]`)
	if err != nil || !strings.Contains(out, "Warning: keys dropped") {
		t.Fatalf("kubectl patch: %v\n%s\nwant the webhook's warning", err, out)
	}
	// A panic in a webhook is a denial naming it, and the server lives on.
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "p",
		Labels: map[string]string{"webhooked": "yes", "panic": "yes"}}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "asked to") || !strings.Contains(err.Error(), "default.loom.test") {
		t.Fatalf("create with a panicking defaulter: %v, want the webhook's denial naming it", err)
	}
	if n := r.metrics.count("panic /default conversion=false"); n != 1 {
		t.Errorf("ObservePanic(/default, false) called %d times, want 1: %v", n, r.metrics.snapshot())
	}
	if r.metrics.count("/default 200") == 0 || r.metrics.count("/validate 200") == 0 {
		t.Fatalf("metrics: %v", r.metrics.calls)
	}
	// Every path was announced once, and every answered request was
	// announced when it arrived.
	for _, p := range []string{"/default", "/validate"} {
		if n := r.metrics.count("register " + p); n != 1 {
			t.Errorf("RegisterWebhook(%s) called %d times, want 1", p, n)
		}
		answered := 0
		for k, n := range r.metrics.snapshot() {
			if strings.HasPrefix(k, p+" ") {
				answered += n
			}
		}
		if started := r.metrics.count("start " + p); started != answered {
			t.Errorf("StartWebhook(%s) called %d times, ObserveWebhook %d", p, started, answered)
		}
	}

	// /healthz answers over TLS, verified with the CA bundle.
	hc := httpsClient(t, r.certs.CABundle(), true)
	resp, err := hc.Get(r.url + "/healthz")
	if err != nil {
		t.Fatal(err)
	}
	body, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || string(body) != "ok" {
		t.Fatalf("/healthz: %d %q", resp.StatusCode, body)
	}
	// TLS older than 1.2 is refused.
	old := &tls.Config{RootCAs: pool(t, r.certs.CABundle()), MaxVersion: tls.VersionTLS11}
	if c, err := tls.Dial("tcp", r.srv.Addr().String(), old); err == nil {
		c.Close()
		t.Fatal("a TLS 1.1 handshake succeeded")
	}
}

func pool(t *testing.T, bundle []byte) *x509.CertPool {
	t.Helper()
	p := x509.NewCertPool()
	if !p.AppendCertsFromPEM(bundle) {
		t.Fatal("bad CA bundle")
	}
	return p
}

// httpsClient trusts bundle; fresh makes every request a new connection
// (and so a new handshake).
func httpsClient(t *testing.T, bundle []byte, fresh bool) *http.Client {
	t.Helper()
	return &http.Client{Timeout: 10 * time.Second, Transport: &http.Transport{
		TLSClientConfig: &tls.Config{RootCAs: pool(t, bundle)}, DisableKeepAlives: fresh,
	}}
}

// TestRotationDuringAdmissionStream: 1,000 admission calls, through the
// API server and straight to the server on fresh connections, while the
// serving certificate is renewed every few calls. None may fail.
func TestRotationDuringAdmissionStream(t *testing.T) {
	rc := adminREST(t)
	ns := namespace(t, rc, "webhook-rotation")
	r := startServer(t)
	labels := map[string]string{"webhooked": "yes"}
	registerWebhooks(t, rc, ns, r.url, r.certs.CABundle(), admissionregistrationv1.Fail, labels)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	waitServed(t, cms, labels)
	bundle := r.certs.CABundle()
	direct := httpsClient(t, bundle, true)
	review := review(t, admissionv1.Create, cm("direct", map[string]string{"k": "v"}, nil), nil)

	const calls, workers = 1000, 4
	var next, failed, rotations atomic.Int64
	serials := sync.Map{}
	var firstErr atomic.Value
	fail := func(err error) {
		failed.Add(1)
		firstErr.CompareAndSwap(nil, err)
	}
	var wg sync.WaitGroup
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := next.Add(1)
				if i > calls {
					return
				}
				if i%25 == 0 {
					if err := r.certs.Rotate(t.Context()); err != nil {
						fail(fmt.Errorf("rotate: %w", err))
					}
					rotations.Add(1)
				}
				if i%2 == 0 {
					// Through the API server (a dry run: admission only).
					out, err := cms.Create(context.Background(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
						GenerateName: "stream-", Labels: labels}}, metav1.CreateOptions{DryRun: []string{metav1.DryRunAll}})
					if err != nil || out.Data["color"] != "blue" {
						fail(fmt.Errorf("call %d through the API server: %v", i, err))
					}
					continue
				}
				// Straight to the webhook, on a new connection.
				resp, err := direct.Post(r.url+"/validate", "application/json", bytes.NewReader(review))
				if err != nil {
					fail(fmt.Errorf("call %d direct: %w", i, err))
					continue
				}
				var ar admissionv1.AdmissionReview
				derr := json.NewDecoder(resp.Body).Decode(&ar)
				if resp.TLS != nil && len(resp.TLS.PeerCertificates) > 0 {
					serials.Store(resp.TLS.PeerCertificates[0].SerialNumber.String(), true)
				}
				resp.Body.Close()
				if derr != nil || ar.Response == nil || !ar.Response.Allowed {
					fail(fmt.Errorf("call %d direct: %v %+v", i, derr, ar.Response))
				}
			}
		}()
	}
	wg.Wait()
	if n := failed.Load(); n != 0 {
		t.Fatalf("%d of %d calls failed during %d rotations; first: %v", n, calls, rotations.Load(), firstErr.Load())
	}
	seen := 0
	serials.Range(func(any, any) bool { seen++; return true })
	if seen < 2 {
		t.Fatalf("fresh connections saw %d serving certificate(s) over %d rotations; the reload did not happen", seen, rotations.Load())
	}
	t.Logf("%d calls, %d rotations, %d serving certificates seen, 0 failures", calls, rotations.Load(), seen)
}

// TestFailurePolicy: with the webhook server down, a Fail webhook refuses
// the request and an Ignore webhook lets it through.
func TestFailurePolicy(t *testing.T) {
	rc := adminREST(t)
	ns := namespace(t, rc, "webhook-down")
	r := startServer(t)
	failLabels := map[string]string{"policy": "fail"}
	ignoreLabels := map[string]string{"policy": "ignore"}
	registerWebhooks(t, rc, ns, r.url, r.certs.CABundle(), admissionregistrationv1.Fail, failLabels)
	registerWebhooks(t, rc, ns, r.url, r.certs.CABundle(), admissionregistrationv1.Ignore, ignoreLabels)
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	waitServed(t, cms, failLabels)
	waitServed(t, cms, ignoreLabels)

	r.stop() // the webhook is down
	_, err = cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "f", Labels: failLabels}}, metav1.CreateOptions{})
	if err == nil || !strings.Contains(err.Error(), "failed calling webhook") {
		t.Fatalf("create under a Fail webhook that is down: %v, want a refusal naming the failed call", err)
	}
	got, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "i", Labels: ignoreLabels}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatalf("create under an Ignore webhook that is down: %v", err)
	}
	if _, defaulted := got.Data["color"]; defaulted {
		t.Fatal("the object was defaulted by a webhook that is down")
	}
}

// TestCloseReleasesTheSocket: a server bound by Listen but never started
// gives its port back on Close, and cannot be started after.
func TestCloseReleasesTheSocket(t *testing.T) {
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	addr := srv.Addr().String()
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		t.Fatalf("port still bound after Close: %v", err)
	}
	ln.Close()
	if err := srv.Start(t.Context()); err == nil {
		t.Fatal("Start after Close succeeded")
	}
}

// TestServerMetricsPerRequest: each request to a registered path is
// started and observed once with its status code, a panic recovered by an
// admission handler is reported, and a raw handler that panics still ends
// its request (as a 500), so that requests in flight go back to zero.
func TestServerMetricsPerRequest(t *testing.T) {
	tests := []struct {
		name  string
		h     http.Handler
		code  int
		panic string // the ObservePanic key expected, if any
	}{
		{"ok", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}), 200, ""},
		{"bad", http.HandlerFunc(func(w http.ResponseWriter, _ *http.Request) { w.WriteHeader(400) }), 400, ""},
		{"raw-panic", http.HandlerFunc(func(http.ResponseWriter, *http.Request) { panic("boom") }), 500, ""},
		{"admission-panic", webhook.Admission(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			panic("boom")
		}), 200, "panic /admission-panic conversion=false"},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			m := &countingMetrics{}
			srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir(), Metrics: m})
			if err != nil {
				t.Fatal(err)
			}
			path := "/" + tt.name
			srv.Register(path, tt.h)
			body := `{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"u","operation":"CREATE","object":{}}}`
			req := httptest.NewRequest(http.MethodPost, path, strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			func() {
				defer func() { _ = recover() }() // the raw handler's panic goes on to net/http
				srv.Handler().ServeHTTP(httptest.NewRecorder(), req)
			}()
			want := map[string]int{"register " + path: 1, "start " + path: 1, fmt.Sprintf("%s %d", path, tt.code): 1}
			if tt.panic != "" {
				want[tt.panic] = 1
			}
			if got := m.snapshot(); !maps.Equal(got, want) {
				t.Errorf("metrics calls %v, want %v", got, want)
			}
		})
	}
}
