package rest

import (
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"log"
	"log/slog"
	"net"
	"net/http"
	"net/http/httptest"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"go.uber.org/goleak"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/pki"
)

// rotServer is an HTTPS server whose serving certificate can be replaced,
// and which requires client certificates signed by clientCA, if not nil.
// It answers every request with the client certificate's common name
// (X-CN) and the Authorization header (X-Auth); the
// path /slow sends its headers, then holds the body until release is
// closed.
type rotServer struct {
	*httptest.Server
	serving atomic.Pointer[tls.Certificate]
	release chan struct{}
	started chan struct{}
}

func newRotServer(t *testing.T, serverCA, clientCA *pki.CA) *rotServer {
	t.Helper()
	s := &rotServer{release: make(chan struct{}), started: make(chan struct{}, 10)}
	s.serve(t, serverCA)
	base := &tls.Config{NextProtos: []string{"h2", "http/1.1"}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.Cert)
		base.ClientCAs, base.ClientAuth = pool, tls.RequireAndVerifyClientCert
	}
	s.Server = httptest.NewUnstartedServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if len(r.TLS.PeerCertificates) > 0 {
			w.Header().Set("X-CN", r.TLS.PeerCertificates[0].Subject.CommonName)
		}
		w.Header().Set("X-Auth", r.Header.Get("Authorization"))
		if r.URL.Path == "/slow" {
			w.WriteHeader(200)
			w.(http.Flusher).Flush()
			s.started <- struct{}{}
			select {
			case <-s.release:
			case <-r.Context().Done():
				return
			}
		}
		io.WriteString(w, "done")
	}))
	s.TLS = &tls.Config{
		// Called for every handshake, with or without SNI.
		GetConfigForClient: func(*tls.ClientHelloInfo) (*tls.Config, error) {
			c := base.Clone()
			c.Certificates = []tls.Certificate{*s.serving.Load()}
			return c, nil
		},
	}
	s.EnableHTTP2 = true
	s.Config.ErrorLog = log.New(io.Discard, "", 0)
	s.StartTLS()
	t.Cleanup(s.Close)
	return s
}

// serve makes the server present a new certificate signed by ca.
func (s *rotServer) serve(t *testing.T, ca *pki.CA) {
	t.Helper()
	p, err := ca.Issue(pki.Request{CommonName: "server", Server: true, IPs: []net.IP{net.ParseIP("127.0.0.1")}, DNSNames: []string{"localhost"}}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	cert, err := tls.X509KeyPair(p.CertPEM, p.KeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	s.serving.Store(&cert)
}

func newCA(t *testing.T, name string) *pki.CA {
	t.Helper()
	ca, err := pki.NewCA(name, time.Now(), time.Now().Add(24*time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func issueClient(t *testing.T, ca *pki.CA, user string) *pki.Pair {
	t.Helper()
	p, err := ca.Issue(pki.Request{CommonName: user}, time.Now())
	if err != nil {
		t.Fatal(err)
	}
	return p
}

// replaceFile writes b to a temporary file and renames it over path, as
// tools that rotate certificates do.
func replaceFile(t *testing.T, path string, b []byte) {
	t.Helper()
	tmp := path + ".tmp"
	if err := os.WriteFile(tmp, b, 0o600); err != nil {
		t.Fatal(err)
	}
	if err := os.Rename(tmp, path); err != nil {
		t.Fatal(err)
	}
}

// overwriteFile writes b into path in place (same inode).
func overwriteFile(t *testing.T, path string, b []byte) {
	t.Helper()
	if err := os.WriteFile(path, b, 0o600); err != nil {
		t.Fatal(err)
	}
}

type tlsFilesFixture struct {
	dir, caFile, certFile, keyFile string
}

func writeTLSFiles(t *testing.T, caPEM []byte, pair *pki.Pair) tlsFilesFixture {
	t.Helper()
	dir := t.TempDir()
	f := tlsFilesFixture{dir: dir, caFile: filepath.Join(dir, "ca.crt"), certFile: filepath.Join(dir, "tls.crt"), keyFile: filepath.Join(dir, "tls.key")}
	overwriteFile(t, f.caFile, caPEM)
	overwriteFile(t, f.certFile, pair.CertPEM)
	overwriteFile(t, f.keyFile, pair.KeyPEM)
	return f
}

func (f tlsFilesFixture) config(host string) config.Config {
	return config.Config{Host: host, TLS: config.TLS{CAFile: f.caFile, CertFile: f.certFile, KeyFile: f.keyFile}}
}

// get sends a GET and returns the response with its body read.
func get(t *testing.T, c *Client, path string) (*http.Response, error) {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base.String()+path, nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		return nil, err
	}
	defer resp.Body.Close()
	if _, err := io.ReadAll(resp.Body); err != nil {
		return nil, err
	}
	return resp, nil
}

func cnOf(t *testing.T, c *Client) string {
	t.Helper()
	resp, err := get(t, c, "/x")
	if err != nil {
		t.Fatal(err)
	}
	return resp.Header.Get("X-CN")
}

// startSlow starts a request to /slow and returns once its headers have
// arrived; the body is still on its way.
func startSlow(t *testing.T, c *Client, s *rotServer) *http.Response {
	t.Helper()
	req, _ := http.NewRequestWithContext(t.Context(), "GET", c.base.String()+"/slow", nil)
	resp, err := c.hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	<-s.started
	t.Cleanup(func() { resp.Body.Close() })
	return resp
}

// finishSlow lets the server end /slow and checks that the body arrives
// whole.
func finishSlow(t *testing.T, s *rotServer, resp *http.Response) {
	t.Helper()
	close(s.release)
	b, err := io.ReadAll(resp.Body)
	if err != nil || string(b) != "done" {
		t.Fatalf("the request in flight across the rotation: body %q, err %v", b, err)
	}
}

func TestTLSReloadClientCertificate(t *testing.T) {
	serverCA, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, serverCA, clientCA)
	f := writeTLSFiles(t, serverCA.CertPEM, issueClient(t, clientCA, "alice"))
	var logs syncBuffer
	c, err := New(f.config(s.URL), Options{
		Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
		TLSReload: TLSReloadOptions{Interval: time.Nanosecond}, // check before every request
	})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	if cn := cnOf(t, c); cn != "alice" {
		t.Fatalf("CN %q, want alice", cn)
	}
	slow := startSlow(t, c, s)
	if got := slow.Header.Get("X-CN"); got != "alice" {
		t.Fatalf("slow request CN %q", got)
	}

	// Half written: the new certificate is there, its key is not yet.
	bob := issueClient(t, clientCA, "bob")
	overwriteFile(t, f.certFile, bob.CertPEM)
	if cn := cnOf(t, c); cn != "alice" {
		t.Fatalf("with a certificate that does not match the key: CN %q, want the last good pair (alice)", cn)
	}
	if l := logs.String(); !strings.Contains(l, "level=ERROR") || !strings.Contains(l, f.certFile) || !strings.Contains(l, f.keyFile) || !strings.Contains(l, "do not go together") {
		t.Errorf("want an error naming the files, logs:\n%s", l)
	}
	overwriteFile(t, f.keyFile, bob.KeyPEM)

	// The connection that carries /slow is busy, so it is not idle, yet
	// the next request must not go over it: it was made with alice's
	// certificate.
	if cn := cnOf(t, c); cn != "bob" {
		t.Fatalf("after the rotation: CN %q, want bob", cn)
	}
	if !strings.Contains(logs.String(), "reloaded the client certificate") {
		t.Errorf("no log of the reload:\n%s", logs.String())
	}
	finishSlow(t, s, slow)

	// Files replaced by a rename are seen too.
	carol := issueClient(t, clientCA, "carol")
	replaceFile(t, f.keyFile, carol.KeyPEM)
	replaceFile(t, f.certFile, carol.CertPEM)
	if cn := cnOf(t, c); cn != "carol" {
		t.Fatalf("after renames: CN %q, want carol", cn)
	}
}

func TestTLSReloadCA(t *testing.T) {
	oldCA, newCA_, clientCA := newCA(t, "old-server-ca"), newCA(t, "new-server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, oldCA, clientCA)
	f := writeTLSFiles(t, oldCA.CertPEM, issueClient(t, clientCA, "alice"))
	c, err := New(f.config(s.URL), Options{TLSReload: TLSReloadOptions{Interval: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	if _, err := get(t, c, "/x"); err != nil {
		t.Fatal(err)
	}
	slow := startSlow(t, c, s)

	// The CA file now trusts only the new CA while the server still
	// presents a certificate of the old one: new connections must fail
	// verification, which shows that they use the new file, and that
	// verification is still on.
	replaceFile(t, f.caFile, newCA_.CertPEM)
	_, err = get(t, c, "/x")
	if !isTLSVerification(err) {
		t.Fatalf("old server certificate against the new CA: err = %v, want a verification failure", err)
	}
	err = c.Get().AbsPath("x").Do(t.Context(), nil)
	var tv *TLSVerificationError
	if !errors.As(err, &tv) {
		t.Fatalf("err = %v, want a *TLSVerificationError", err)
	}

	s.serve(t, newCA_)
	resp, err := get(t, c, "/x")
	if err != nil {
		t.Fatalf("after the server's rotation: %v", err)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "new-server-ca" {
		t.Errorf("server certificate issued by %q", issuer)
	}
	if issuer := slow.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "old-server-ca" {
		t.Errorf("slow request: server certificate issued by %q", issuer)
	}
	finishSlow(t, s, slow)

	// A bundle with both CAs (the usual way to rotate) verifies either.
	replaceFile(t, f.caFile, append(append([]byte{}, oldCA.CertPEM...), newCA_.CertPEM...))
	s.serve(t, oldCA)
	if _, err := get(t, c, "/x"); err != nil {
		t.Fatalf("with a bundle: %v", err)
	}
}

// TestTLSReloadCAServerName checks that a reloaded CA still verifies the
// server's name.
func TestTLSReloadCAServerName(t *testing.T) {
	oldCA, newCA_, clientCA := newCA(t, "old-server-ca"), newCA(t, "new-server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, newCA_, clientCA)
	f := writeTLSFiles(t, oldCA.CertPEM, issueClient(t, clientCA, "alice"))
	cfg := f.config(s.URL)
	cfg.TLS.ServerName = "kubernetes.example" // not in the server's certificate
	c, err := New(cfg, Options{TLSReload: TLSReloadOptions{Interval: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	replaceFile(t, f.caFile, newCA_.CertPEM)
	var he x509.HostnameError
	if _, err := get(t, c, "/x"); !errors.As(err, &he) {
		t.Fatalf("err = %v, want a host name error", err)
	}
}

func TestTLSReloadBadFiles(t *testing.T) {
	serverCA, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, serverCA, clientCA)
	alice := issueClient(t, clientCA, "alice")
	other := issueClient(t, clientCA, "other")

	for _, tc := range []struct {
		name   string
		break_ func(f tlsFilesFixture)
		file   func(f tlsFilesFixture) string
		msg    string
	}{
		{"garbage certificate", func(f tlsFilesFixture) { overwriteFile(t, f.certFile, []byte("garbage")) }, func(f tlsFilesFixture) string { return f.certFile }, "no PEM certificate"},
		{"bad certificate block", func(f tlsFilesFixture) {
			overwriteFile(t, f.certFile, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
		}, func(f tlsFilesFixture) string { return f.certFile }, "x509"},
		{"empty key", func(f tlsFilesFixture) { overwriteFile(t, f.keyFile, nil) }, func(f tlsFilesFixture) string { return f.keyFile }, "no PEM private key"},
		{"bad key block", func(f tlsFilesFixture) {
			overwriteFile(t, f.keyFile, []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n"))
		}, func(f tlsFilesFixture) string { return f.keyFile }, "PRIVATE KEY block"},
		{"missing key", func(f tlsFilesFixture) { os.Remove(f.keyFile) }, func(f tlsFilesFixture) string { return f.keyFile }, "no such file"},
		{"key of another certificate", func(f tlsFilesFixture) { replaceFile(t, f.keyFile, other.KeyPEM) }, func(f tlsFilesFixture) string { return f.keyFile }, "do not go together"},
		{"garbage CA", func(f tlsFilesFixture) { overwriteFile(t, f.caFile, []byte("garbage")) }, func(f tlsFilesFixture) string { return f.caFile }, "no PEM certificates"},
		{"missing CA", func(f tlsFilesFixture) { os.Remove(f.caFile) }, func(f tlsFilesFixture) string { return f.caFile }, "no such file"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			f := writeTLSFiles(t, serverCA.CertPEM, alice)
			var logs syncBuffer
			c, err := New(f.config(s.URL), Options{
				Logger:    slog.New(slog.NewTextHandler(&logs, nil)),
				TLSReload: TLSReloadOptions{Interval: time.Nanosecond},
			})
			if err != nil {
				t.Fatal(err)
			}
			defer c.CloseIdleConnections()
			tc.break_(f)
			for range 2 {
				c.CloseIdleConnections() // make every request handshake
				if cn := cnOf(t, c); cn != "alice" {
					t.Fatalf("CN %q, want the last good pair (alice)", cn)
				}
			}
			l := logs.String()
			if !strings.Contains(l, "level=ERROR") || !strings.Contains(l, tc.file(f)) || !strings.Contains(l, tc.msg) {
				t.Errorf("want an error naming %s and saying %q; logs:\n%s", tc.file(f), tc.msg, l)
			}
			if strings.Contains(l, string(alice.KeyPEM[40:80])) || strings.Contains(l, string(other.KeyPEM[40:80])) {
				t.Error("key material in the logs")
			}

			// Repaired files are picked up.
			bob := issueClient(t, clientCA, "bob")
			replaceFile(t, f.caFile, serverCA.CertPEM)
			replaceFile(t, f.certFile, bob.CertPEM)
			replaceFile(t, f.keyFile, bob.KeyPEM)
			if cn := cnOf(t, c); cn != "bob" {
				t.Fatalf("after repair: CN %q, want bob", cn)
			}
		})
	}
}

func TestTLSReloadNewErrors(t *testing.T) {
	clientCA := newCA(t, "client-ca")
	alice, other := issueClient(t, clientCA, "alice"), issueClient(t, clientCA, "other")
	dir := t.TempDir()
	garbage, certFile, otherKey := filepath.Join(dir, "garbage"), filepath.Join(dir, "c.crt"), filepath.Join(dir, "other.key")
	overwriteFile(t, garbage, []byte("garbage"))
	overwriteFile(t, certFile, alice.CertPEM)
	overwriteFile(t, otherKey, other.KeyPEM)
	for _, tc := range []struct {
		tls   config.TLS
		field string
		text  string
	}{
		{config.TLS{CAFile: garbage}, "certificate-authority", "no PEM certificates"},
		{config.TLS{CertFile: garbage, KeyData: alice.KeyPEM}, "client-certificate", garbage + ": no PEM certificate"},
		{config.TLS{CertFile: certFile, KeyFile: garbage}, "client-certificate", garbage + ": no PEM private key"},
		{config.TLS{CertFile: certFile, KeyFile: otherKey}, "client-certificate", "the certificate of " + certFile + " and the key of " + otherKey + " do not go together"},
	} {
		_, err := New(config.Config{Host: "https://127.0.0.1:1", Origin: "/my/kubeconfig", TLS: tc.tls}, Options{})
		var ce *config.Error
		if !errors.As(err, &ce) || ce.Field != tc.field || !strings.Contains(err.Error(), tc.text) {
			t.Errorf("%+v: err = %v, want field %s and %q", tc.tls, err, tc.field, tc.text)
		}
	}
}

// TestTLSReloadInterval checks that files are looked at once per interval
// only, and never when reloading is off.
func TestTLSReloadInterval(t *testing.T) {
	serverCA, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, serverCA, clientCA)
	for _, disabled := range []bool{false, true} {
		f := writeTLSFiles(t, serverCA.CertPEM, issueClient(t, clientCA, "alice"))
		clk := clock.NewFake(time.Now())
		c, err := New(f.config(s.URL), Options{clock: clk, TLSReload: TLSReloadOptions{Disabled: disabled, Interval: time.Hour}})
		if err != nil {
			t.Fatal(err)
		}
		bob := issueClient(t, clientCA, "bob")
		replaceFile(t, f.keyFile, bob.KeyPEM)
		replaceFile(t, f.certFile, bob.CertPEM)
		c.CloseIdleConnections()
		if cn := cnOf(t, c); cn != "alice" {
			t.Fatalf("disabled=%v: before the interval: CN %q, want alice", disabled, cn)
		}
		clk.Step(time.Hour)
		want := "bob"
		if disabled {
			want = "alice"
		}
		if cn := cnOf(t, c); cn != want {
			t.Fatalf("disabled=%v: after the interval: CN %q, want %s", disabled, cn, want)
		}
		c.CloseIdleConnections()
	}
}

// TestTLSReloadInlineData checks that a Config with inline data has nothing
// to reload and keeps a single connection pool.
func TestTLSReloadInlineData(t *testing.T) {
	serverCA, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
	s := newRotServer(t, serverCA, clientCA)
	alice := issueClient(t, clientCA, "alice")
	c, err := New(config.Config{Host: s.URL, TLS: config.TLS{CAData: serverCA.CertPEM, CertData: alice.CertPEM, KeyData: alice.KeyPEM}},
		Options{TLSReload: TLSReloadOptions{Interval: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()
	if c.transport.files.reload {
		t.Error("reloading inline data")
	}
	first := c.transport.cur.Load()
	for range 3 {
		if cn := cnOf(t, c); cn != "alice" {
			t.Fatalf("CN %q", cn)
		}
	}
	if c.transport.cur.Load() != first {
		t.Error("the connection pool was replaced")
	}
}

// TestTLSReloadInClusterCA rotates the CA of an in-cluster configuration
// the way the kubelet updates a projected volume: ca.crt is a link through
// the ..data link, which is swapped to a new folder.
func TestTLSReloadInClusterCA(t *testing.T) {
	oldCA, newCA_ := newCA(t, "old-server-ca"), newCA(t, "new-server-ca")
	s := newRotServer(t, oldCA, nil)
	dir := t.TempDir()
	project := func(version string, ca *pki.CA) {
		t.Helper()
		d := filepath.Join(dir, "..v"+version)
		if err := os.Mkdir(d, 0o755); err != nil {
			t.Fatal(err)
		}
		overwriteFile(t, filepath.Join(d, "ca.crt"), ca.CertPEM)
		overwriteFile(t, filepath.Join(d, "token"), []byte("token-"+version))
		if err := os.Symlink(filepath.Base(d), filepath.Join(dir, "..data.tmp")); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(filepath.Join(dir, "..data.tmp"), filepath.Join(dir, "..data")); err != nil {
			t.Fatal(err)
		}
	}
	project("1", oldCA)
	for _, name := range []string{"ca.crt", "token"} {
		if err := os.Symlink(filepath.Join("..data", name), filepath.Join(dir, name)); err != nil {
			t.Fatal(err)
		}
	}
	host, port, _ := net.SplitHostPort(strings.TrimPrefix(s.URL, "https://"))
	env := map[string]string{"KUBERNETES_SERVICE_HOST": host, "KUBERNETES_SERVICE_PORT": port}
	cfg, err := config.InCluster(config.InClusterOptions{Dir: dir, Getenv: func(k string) string { return env[k] }})
	if err != nil {
		t.Fatal(err)
	}
	c, err := New(cfg, Options{TLSReload: TLSReloadOptions{Interval: time.Nanosecond}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(c.CloseIdleConnections)
	resp, err := get(t, c, "/x")
	if err != nil {
		t.Fatal(err)
	}
	if a := resp.Header.Get("X-Auth"); a != "Bearer token-1" {
		t.Errorf("Authorization %q", a)
	}

	project("2", newCA_)
	s.serve(t, newCA_)
	c.CloseIdleConnections()
	resp, err = get(t, c, "/x")
	if err != nil {
		t.Fatalf("after the CA rotation: %v", err)
	}
	if issuer := resp.TLS.PeerCertificates[0].Issuer.CommonName; issuer != "new-server-ca" {
		t.Errorf("server certificate issued by %q", issuer)
	}
}

// TestTLSReloadNoGoroutineLeaks rotates the client certificate while a
// request is in flight, and checks that once it has finished and the idle
// connections are closed, no goroutine is left: the replaced pool's
// connections close too.
func TestTLSReloadNoGoroutineLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	func() {
		serverCA, clientCA := newCA(t, "server-ca"), newCA(t, "client-ca")
		s := newRotServer(t, serverCA, clientCA)
		defer s.Close()
		f := writeTLSFiles(t, serverCA.CertPEM, issueClient(t, clientCA, "alice"))
		c, err := New(f.config(s.URL), Options{TLSReload: TLSReloadOptions{Interval: time.Nanosecond}})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		slow := startSlow(t, c, s)
		bob := issueClient(t, clientCA, "bob")
		replaceFile(t, f.keyFile, bob.KeyPEM)
		replaceFile(t, f.certFile, bob.CertPEM)
		if cn := cnOf(t, c); cn != "bob" {
			t.Fatalf("CN %q, want bob", cn)
		}
		finishSlow(t, s, slow)
		slow.Body.Close()
	}()
	goleak.VerifyNone(t, opt)
}
