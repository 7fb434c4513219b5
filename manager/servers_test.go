package manager_test

import (
	"bufio"
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv/e2e"
)

// startManager starts mgr until the test ends.
func startManager(t *testing.T, mgr *manager.Manager) {
	t.Helper()
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	})
}

// addr waits for the manager's server to listen, and returns its address.
func addr(t *testing.T, mgr *manager.Manager, server string) string {
	t.Helper()
	eventually(t, "the "+server+" server to listen", func() bool { return mgr.Addr(server) != nil })
	return mgr.Addr(server).String()
}

// serviceAccountToken creates the service account ns/name unless it exists,
// and returns a new token for it (TokenRequest).
func serviceAccountToken(t *testing.T, rc *rest.Client, ns, name string) string {
	t.Helper()
	sas, _ := client.For[corev1.ServiceAccount](rc, client.Options{})
	_, err := sas.Namespace(ns).Create(t.Context(), &corev1.ServiceAccount{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	return e2e.ServiceAccount(t, shared.Env(t), ns, name).Auth.BearerToken
}

// reviewCalls reads the API server's own count of the TokenReviews and
// SubjectAccessReviews it has answered (apiserver_request_total).
func reviewCalls(t *testing.T, rc *rest.Client) (tokenReviews, accessReviews float64) {
	t.Helper()
	res, err := rc.Get().AbsPath("/metrics").Header("Accept", "text/plain").DoRaw(t.Context())
	if err != nil {
		t.Fatalf("the API server's /metrics: %v", err)
	}
	sc := bufio.NewScanner(bytes.NewReader(res.Body))
	sc.Buffer(nil, 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") {
			continue
		}
		i := strings.LastIndexByte(line, ' ')
		v, err := strconv.ParseFloat(line[i+1:], 64)
		if err != nil {
			t.Fatalf("the API server's /metrics: %q: %v", line, err)
		}
		switch {
		case strings.Contains(line, `resource="tokenreviews"`):
			tokenReviews += v
		case strings.Contains(line, `resource="subjectaccessreviews"`):
			accessReviews += v
		}
	}
	return tokenReviews, accessReviews
}

// TestMetricsAuth: /metrics is served over HTTPS by default, and only to
// callers the API server authenticates (else 401) and authorizes (else
// 403). The API server's decisions are cached: 100 scrapes from one caller
// cost it two reviews, as it counts them itself.
func TestMetricsAuth(t *testing.T) {
	const ns = "metrics-auth"
	admin, err := rest.New(cfg(t), rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer admin.CloseIdleConnections()
	ensureNamespace(t, admin, ns)
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	url := "https://" + addr(t, mgr, "metrics") + "/metrics"
	// The certificate is self-signed, as a scraper in the cluster meets it.
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	scrape := func(token string) (int, string) {
		t.Helper()
		req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, url, nil)
		if token != "" {
			req.Header.Set("Authorization", "Bearer "+token)
		}
		resp, err := hc.Do(req)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}

	if resp, err := http.Get("http://" + addr(t, mgr, "metrics") + "/metrics"); err == nil {
		resp.Body.Close()
		if resp.StatusCode != http.StatusBadRequest {
			t.Errorf("plain HTTP to the metrics server: %s", resp.Status)
		}
	}
	if code, body := scrape(""); code != http.StatusUnauthorized {
		t.Errorf("without a token: %d %s", code, body)
	}
	if code, body := scrape("not-a-token"); code != http.StatusUnauthorized {
		t.Errorf("with a made-up token: %d %s", code, body)
	}
	stranger := serviceAccountToken(t, admin, ns, "stranger")
	if code, body := scrape(stranger); code != http.StatusForbidden {
		t.Errorf("as a service account without the reader role: %d %s", code, body)
	}

	// The reader role, as kubebuilder's config/rbac/metrics_reader_role.yaml.
	roles, _ := client.For[rbacv1.ClusterRole](admin, client.Options{})
	bindings, _ := client.For[rbacv1.ClusterRoleBinding](admin, client.Options{})
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "loom-test-metrics-reader"},
		Rules: []rbacv1.PolicyRule{{NonResourceURLs: []string{"/metrics"}, Verbs: []string{"get"}}}}
	if _, err := roles.Create(t.Context(), role, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	binding := &rbacv1.ClusterRoleBinding{ObjectMeta: metav1.ObjectMeta{Name: "loom-test-metrics-reader"},
		RoleRef:  rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "ClusterRole", Name: role.Name},
		Subjects: []rbacv1.Subject{{Kind: "ServiceAccount", Namespace: ns, Name: "scraper"}}}
	if _, err := bindings.Create(t.Context(), binding, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		ctx := context.WithoutCancel(t.Context())
		_ = bindings.Delete(ctx, binding.Name, metav1.DeleteOptions{})
		_ = roles.Delete(ctx, role.Name, metav1.DeleteOptions{})
	})
	// The API server's authorizer learns of new bindings from its watch.
	eventually(t, "the reader role to let the scraper in", func() bool {
		code, _ := scrape(serviceAccountToken(t, admin, ns, "scraper"))
		return code == http.StatusOK
	})

	// A new token is a new caller for the cache: its first scrape asks
	// the API server, the 99 others do not.
	token := serviceAccountToken(t, admin, ns, "scraper")
	tr0, sar0 := reviewCalls(t, admin)
	for i := range 100 {
		code, body := scrape(token)
		if code != http.StatusOK {
			t.Fatalf("scrape %d: %d %s", i, code, body)
		}
		if i == 0 && !strings.Contains(body, "rest_client_requests_total") {
			t.Errorf("/metrics does not serve the manager's registry:\n%s", body)
		}
	}
	// The API server counts a request once it has answered it; wait for
	// the first scrape's two reviews to show.
	var tr, sar float64
	eventually(t, "the API server to count the first scrape's reviews", func() bool {
		tr, sar = reviewCalls(t, admin)
		return tr-tr0 >= 1 && sar-sar0 >= 1
	})
	t.Logf("100 scrapes: %v TokenReviews, %v SubjectAccessReviews at the API server", tr-tr0, sar-sar0)
	if tr-tr0 > 2 || sar-sar0 > 2 {
		t.Errorf("100 scrapes by one caller cost %v TokenReviews and %v SubjectAccessReviews; want about one each", tr-tr0, sar-sar0)
	}
}

// TestMetricsHTTP2: the metrics server speaks HTTP/1.1 only, unless asked
// for HTTP/2.
func TestMetricsHTTP2(t *testing.T) {
	negotiate := func(addr string, protos ...string) (string, error) {
		conn, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true, NextProtos: protos})
		if err != nil {
			return "", err
		}
		defer conn.Close()
		return conn.ConnectionState().NegotiatedProtocol, nil
	}
	for _, h2 := range []bool{false, true} {
		t.Run(fmt.Sprint("EnableHTTP2=", h2), func(t *testing.T) {
			mgr, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0",
				Metrics: manager.MetricsServing{EnableHTTP2: h2}})
			if err != nil {
				t.Fatal(err)
			}
			startManager(t, mgr)
			a := addr(t, mgr, "metrics")
			// A client that offers only h2 does not get it by default:
			// the handshake fails (no protocol in common).
			got, err := negotiate(a, "h2")
			switch {
			case h2 && (err != nil || got != "h2"):
				t.Errorf("a client offering h2 got %q, %v; want h2", got, err)
			case !h2 && err == nil && got == "h2":
				t.Error("a client offering only h2 got it; want HTTP/1.1 only")
			case !h2 && err != nil && !strings.Contains(err.Error(), "no application protocol"):
				t.Errorf("a client offering only h2: %v; want no application protocol", err)
			}
			// A client that offers both gets HTTP/2 only when it is on.
			got, err = negotiate(a, "h2", "http/1.1")
			want := map[bool]string{false: "http/1.1", true: "h2"}[h2]
			if err != nil || got != want {
				t.Errorf("a client offering h2 and http/1.1 got %q, %v; want %s", got, err, want)
			}
			hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}, ForceAttemptHTTP2: true}}
			defer hc.CloseIdleConnections()
			resp, err := hc.Get("https://" + a + "/metrics")
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if wantMajor := map[bool]int{false: 1, true: 2}[h2]; resp.ProtoMajor != wantMajor || resp.StatusCode != http.StatusUnauthorized {
				t.Errorf("GET /metrics: %s %s; want HTTP/%d 401", resp.Proto, resp.Status, wantMajor)
			}
		})
	}
}

// TestMetricsTLSConfigHook: the TLS hook has the last word.
func TestMetricsTLSConfigHook(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0",
		Metrics: manager.MetricsServing{TLSConfig: func(c *tls.Config) { c.MinVersion = tls.VersionTLS13 }}})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	a := addr(t, mgr, "metrics")
	if conn, err := tls.Dial("tcp", a, &tls.Config{InsecureSkipVerify: true, MaxVersion: tls.VersionTLS12}); err == nil {
		conn.Close()
		t.Error("a TLS 1.2 client was accepted; the hook asked for TLS 1.3")
	}
	conn, err := tls.Dial("tcp", a, &tls.Config{InsecureSkipVerify: true})
	if err != nil {
		t.Fatal(err)
	}
	conn.Close()
}

// TestMetricsCertDir: the serving certificate comes from CertDir when set.
func TestMetricsCertDir(t *testing.T) {
	dir := t.TempDir()
	now := time.Now()
	ca, err := pki.NewCA("metrics-test-ca", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(pki.Request{CommonName: "metrics", DNSNames: []string{"localhost"}, Server: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	_ = os.WriteFile(filepath.Join(dir, "tls.crt"), pair.CertPEM, 0o600)
	_ = os.WriteFile(filepath.Join(dir, "tls.key"), pair.KeyPEM, 0o600)
	if _, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0",
		Metrics: manager.MetricsServing{CertDir: dir, Insecure: true}}); err == nil {
		t.Error("New accepted Metrics.CertDir with Metrics.Insecure")
	}
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0", Metrics: manager.MetricsServing{CertDir: dir}})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	pool := x509.NewCertPool()
	pool.AddCert(ca.Cert)
	_, port, _ := net.SplitHostPort(addr(t, mgr, "metrics"))
	conn, err := tls.Dial("tcp", "localhost:"+port, &tls.Config{RootCAs: pool})
	if err != nil {
		t.Fatalf("a client that trusts only the CA of CertDir's certificate: %v", err)
	}
	conn.Close()
}

// TestMetricsInsecure: plain HTTP, for anyone, only when asked for.
func TestMetricsInsecure(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), MetricsAddr: "127.0.0.1:0", Metrics: manager.MetricsServing{Insecure: true}})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	resp, err := http.Get("http://" + addr(t, mgr, "metrics") + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		t.Errorf("GET /metrics: %s", resp.Status)
	}
}

// TestProbeChecks: programs add their own checks to /healthz and /readyz,
// before Start and once per name; a failing check is named, its error is
// not shown.
func TestProbeChecks(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), HealthAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	failing := errors.New(`Get "https://10.0.0.1:5432": secret detail`)
	if err := mgr.AddReadyzCheck("database", func(*http.Request) error { return failing }); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddHealthzCheck("loop", func(*http.Request) error { return nil }); err != nil {
		t.Fatal(err)
	}
	if err := mgr.AddReadyzCheck("database", func(*http.Request) error { return nil }); err == nil {
		t.Error("a second check named database was added")
	}
	if err := mgr.AddReadyzCheck("informers", func(*http.Request) error { return nil }); err == nil {
		t.Error("a check named informers (the manager's own) was added")
	}
	startManager(t, mgr)
	base := "http://" + addr(t, mgr, "health")
	if err := mgr.AddHealthzCheck("late", func(*http.Request) error { return nil }); err == nil {
		t.Error("a check was added after Start")
	}
	get := func(path string) (int, string) {
		resp, err := http.Get(base + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, body := get("/healthz?verbose"); code != 200 || body != "ping: ok\nloop: ok\nok\n" {
		t.Errorf("/healthz?verbose: %d %q", code, body)
	}
	var code int
	var body string
	eventually(t, "/readyz to fail on the database check alone", func() bool {
		code, body = get("/readyz")
		return code == 503 && body == "database: failed\nreadyz check failed\n"
	})
	if code, body = get("/readyz?verbose"); code != 503 || body != "informers: ok\ndatabase: failed\nreadyz check failed\n" {
		t.Errorf("/readyz?verbose: %d %q", code, body)
	}
}

// TestPprof: the profiler is served where asked, and only on loopback
// unless allowed explicitly.
func TestPprof(t *testing.T) {
	if _, err := manager.New(manager.Options{Config: new(cfg(t)), PprofAddr: ":8082"}); err == nil {
		t.Error("New accepted PprofAddr :8082 (every interface)")
	}
	if _, err := manager.New(manager.Options{Config: new(cfg(t)), PprofAddr: ":8082", PprofAllowRemote: true}); err != nil {
		t.Errorf("New refused PprofAddr :8082 with PprofAllowRemote: %v", err)
	}
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), PprofAddr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	startManager(t, mgr)
	resp, err := http.Get("http://" + addr(t, mgr, "pprof") + "/debug/pprof/goroutine?debug=1")
	if err != nil {
		t.Fatal(err)
	}
	b, _ := io.ReadAll(resp.Body)
	resp.Body.Close()
	if resp.StatusCode != 200 || !strings.Contains(string(b), "goroutine profile") {
		t.Errorf("/debug/pprof/goroutine: %s %.200s", resp.Status, b)
	}
}
