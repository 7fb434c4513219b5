package testenv

import (
	"bufio"
	"bytes"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"io"
	"net/http"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
)

// proxyClient is an HTTP client that trusts the Env's CA and presents the
// admin certificate, for requests through a Proxy.
func proxyClient(t *testing.T, env *Env) *http.Client {
	t.Helper()
	cert, err := tls.X509KeyPair(env.AdminCertPEM, env.AdminKeyPEM)
	if err != nil {
		t.Fatal(err)
	}
	roots := x509.NewCertPool()
	roots.AppendCertsFromPEM(env.CAPEM)
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{RootCAs: roots, Certificates: []tls.Certificate{cert}}}}
	t.Cleanup(hc.CloseIdleConnections)
	return hc
}

// watchThrough opens a JSON watch of ConfigMaps in namespace ns through
// the proxy and returns its body.
func watchThrough(t *testing.T, hc *http.Client, p *Proxy, ns string) io.ReadCloser {
	t.Helper()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL+"/api/v1/namespaces/"+ns+"/configmaps?watch=1", nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	if resp.StatusCode != http.StatusOK {
		t.Fatalf("watch through the proxy: %s", resp.Status)
	}
	t.Cleanup(func() { resp.Body.Close() })
	return resp.Body
}

func createNamespace(t *testing.T, env *Env, name string) {
	t.Helper()
	ns := &corev1.Namespace{}
	ns.Name = name
	if code := do(t, env, http.MethodPost, "/api/v1/namespaces", ns, nil); code != http.StatusCreated {
		t.Fatalf("create namespace %s: status %d", name, code)
	}
}

func TestProxyFaults(t *testing.T) {
	p, err := shared.StartProxy()
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	hc := proxyClient(t, shared)

	tests := []struct {
		name  string
		fault func() int
		check func(t *testing.T, got []byte, err error)
	}{{
		name:  "cut",
		fault: p.Cut,
		check: func(t *testing.T, got []byte, err error) {
			if !errors.Is(err, io.ErrUnexpectedEOF) && !errors.Is(err, io.EOF) {
				t.Errorf("after Cut, the watch ended with %v, want an EOF", err)
			}
		},
	}, {
		name:  "reset",
		fault: p.Reset,
		check: func(t *testing.T, got []byte, err error) {
			if !errors.Is(err, syscall.ECONNRESET) {
				t.Errorf("after Reset, the watch ended with %v, want ECONNRESET", err)
			}
		},
	}, {
		name:  "truncate",
		fault: p.Truncate,
		check: func(t *testing.T, got []byte, err error) {
			if err == nil {
				t.Fatal("after Truncate, the watch did not end")
			}
			// The last event arrived in part: its line is not complete.
			if len(got) == 0 || bytes.HasSuffix(got, []byte("\n")) {
				t.Errorf("after Truncate the watch sent %q; want the start of an event, cut short", got)
			}
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			ns := "proxy-" + tt.name
			createNamespace(t, shared, ns)
			body := watchThrough(t, hc, p, ns)
			r := bufio.NewReader(body)
			// One event through the proxy proves the watch is open.
			if code := do(t, shared, http.MethodPost, "/api/v1/namespaces/"+ns+"/configmaps", configMap("first", nil), nil); code != http.StatusCreated {
				t.Fatalf("create: %d", code)
			}
			if _, err := r.ReadBytes('\n'); err != nil {
				t.Fatalf("first event: %v", err)
			}
			if n := tt.fault(); n == 0 {
				t.Fatalf("%s touched no connection", tt.name)
			}
			if tt.name == "truncate" {
				// The cut comes with the server's next write.
				if code := do(t, shared, http.MethodPost, "/api/v1/namespaces/"+ns+"/configmaps", configMap("second", map[string]string{"k": string(make([]byte, 64))}), nil); code != http.StatusCreated {
					t.Fatalf("create: %d", code)
				}
			}
			var got []byte
			var err error
			for err == nil {
				var b []byte
				b, err = r.ReadBytes('\n')
				got = b
			}
			tt.check(t, got, err)
		})
	}

	t.Run("partition", func(t *testing.T) {
		p.Partition()
		done := make(chan int, 1)
		go func() {
			req, _ := http.NewRequestWithContext(t.Context(), http.MethodGet, p.URL+"/api/v1/namespaces/default", nil)
			resp, err := hc.Do(req)
			if err != nil {
				done <- -1
				return
			}
			resp.Body.Close()
			done <- resp.StatusCode
		}()
		select {
		case code := <-done:
			t.Fatalf("a request went through a partition: %d", code)
		case <-time.After(300 * time.Millisecond):
		}
		p.Heal()
		select {
		case code := <-done:
			if code != http.StatusOK {
				t.Fatalf("after Heal: status %d", code)
			}
		case <-time.After(time.Minute):
			t.Fatal("the request held by the partition did not finish within a minute of Heal")
		}
	})
}

func TestEtcdRawAccess(t *testing.T) {
	ctx := t.Context()
	var created corev1.ConfigMap
	if code := do(t, shared, http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap("raw", map[string]string{"k": "v"}), &created); code != http.StatusCreated {
		t.Fatalf("create: %d", code)
	}
	key := "/registry/configmaps/default/raw"
	raw, ok, err := shared.EtcdGet(ctx, key)
	if err != nil || !ok || len(raw) == 0 {
		t.Fatalf("EtcdGet(%s) = %d bytes, %v, %v", key, len(raw), ok, err)
	}
	if err := shared.EtcdDelete(ctx, key); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := shared.EtcdGet(ctx, key); ok || err != nil {
		t.Fatalf("after EtcdDelete: found %v, %v", ok, err)
	}
	if code := do(t, shared, http.MethodGet, "/api/v1/namespaces/default/configmaps/raw", nil, nil); code != http.StatusNotFound {
		t.Fatalf("GET after EtcdDelete: %d, want 404", code)
	}
	if err := shared.EtcdPut(ctx, key, raw); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if code := do(t, shared, http.MethodGet, "/api/v1/namespaces/default/configmaps/raw", nil, &got); code != http.StatusOK {
		t.Fatalf("GET after EtcdPut: %d", code)
	}
	if got.UID != created.UID || got.Data["k"] != "v" || got.ResourceVersion == created.ResourceVersion {
		t.Fatalf("after EtcdPut got uid %s rv %s data %v; want uid %s, data k=v, a new resourceVersion", got.UID, got.ResourceVersion, got.Data, created.UID)
	}
}
