package rest

import (
	"bufio"
	"context"
	"fmt"
	"io"
	"net/http"
	"testing"

	"github.com/loom-k8s/loom/config"
)

// TestUpgradeClient switches protocols through UpgradeClient against a
// server that speaks HTTP/2: the upgrade goes over HTTP/1.1, with the
// Client's client certificate, token, impersonation and user agent, and
// the connection is the caller's after 101.
func TestUpgradeClient(t *testing.T) {
	ca, clientCA := newTestCA(t, "server-ca"), newTestCA(t, "client-ca")
	srv := newTLSServer(t, ca, clientCA, http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Header.Get("Upgrade") == "" {
			w.Header().Set("X-Proto", r.Proto)
			return
		}
		want := map[string]string{"Authorization": "Bearer tok", "Impersonate-User": "bob", "User-Agent": "upgrader", "Upgrade": "SPDY/3.1"}
		for k, v := range want {
			if r.Header.Get(k) != v {
				http.Error(w, fmt.Sprintf("%s: %q, want %q", k, r.Header.Get(k), v), http.StatusBadRequest)
				return
			}
		}
		if r.ProtoMajor != 1 || len(r.TLS.PeerCertificates) == 0 || r.TLS.PeerCertificates[0].Subject.CommonName != "alice" {
			http.Error(w, "want HTTP/1.1 and alice's certificate, got "+r.Proto, http.StatusBadRequest)
			return
		}
		conn, rw, err := http.NewResponseController(w).Hijack()
		if err != nil {
			return
		}
		defer conn.Close()
		fmt.Fprint(rw, "HTTP/1.1 101 Switching Protocols\r\nConnection: Upgrade\r\nUpgrade: SPDY/3.1\r\n\r\n")
		rw.Flush()
		line, _ := rw.ReadString('\n')
		fmt.Fprint(rw, "echo: "+line)
		rw.Flush()
	}))
	certPEM, keyPEM := clientCA.issue(t, "alice", false)
	c, err := New(config.Config{Host: srv.URL, UserAgent: "upgrader",
		TLS:         config.TLS{CAData: ca.certPEM, CertData: certPEM, KeyData: keyPEM},
		Auth:        config.Auth{BearerToken: "tok"},
		Impersonate: config.Impersonation{User: "bob"}}, Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer c.CloseIdleConnections()

	// The Client's own requests use HTTP/2 here.
	resp, err := c.HTTPClient().Get(srv.URL)
	if err != nil {
		t.Fatal(err)
	}
	resp.Body.Close()
	if resp.Header.Get("X-Proto") != "HTTP/2.0" {
		t.Fatalf("a plain request went over %q, want HTTP/2.0", resp.Header.Get("X-Proto"))
	}

	req, _ := http.NewRequestWithContext(context.Background(), http.MethodPost, srv.URL+"/api/v1/namespaces/ns/pods/p/exec", nil)
	req.Header.Set("Connection", "Upgrade")
	req.Header.Set("Upgrade", "SPDY/3.1")
	resp, err = c.UpgradeClient().Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusSwitchingProtocols {
		b, _ := io.ReadAll(resp.Body)
		t.Fatalf("status %d: %s", resp.StatusCode, b)
	}
	rwc, ok := resp.Body.(io.ReadWriteCloser)
	if !ok {
		t.Fatalf("the body after 101 is a %T, not an io.ReadWriteCloser", resp.Body)
	}
	fmt.Fprint(rwc, "ping\n")
	got, err := bufio.NewReader(rwc).ReadString('\n')
	if err != nil || got != "echo: ping\n" {
		t.Fatalf("over the upgraded connection: %q, %v", got, err)
	}
}
