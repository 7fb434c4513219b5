package testenv

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"net"
	"net/http"
	"strings"
	"sync"
	"testing"
	"time"
)

// TestLocalAPIService serves a group from a small HTTPS server on
// 127.0.0.1, registers it, and checks that kube-apiserver proxies to it
// with its front-proxy client certificate and the caller in X-Remote-User.
func TestLocalAPIService(t *testing.T) {
	const group, version = "aggregation.testenv.loom.dev", "v1"
	certPEM, keyPEM, err := shared.ServingCert(LocalAPIServiceHost(group))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	frontProxy := x509.NewCertPool()
	frontProxy.AppendCertsFromPEM(shared.FrontProxyCAPEM)

	var mu sync.Mutex
	var sawUser, sawGroups string
	mux := http.NewServeMux()
	mux.HandleFunc("/apis/"+group+"/"+version, func(w http.ResponseWriter, r *http.Request) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(map[string]any{
			"kind": "APIResourceList", "apiVersion": "v1", "groupVersion": group + "/" + version,
			"resources": []map[string]any{{"name": "things", "namespaced": false, "kind": "Thing", "verbs": []string{"get"}}},
		})
	})
	mux.HandleFunc("/apis/"+group+"/"+version+"/things/one", func(w http.ResponseWriter, r *http.Request) {
		mu.Lock()
		sawUser, sawGroups = r.Header.Get("X-Remote-User"), strings.Join(r.Header.Values("X-Remote-Group"), ",")
		mu.Unlock()
		w.Header().Set("Content-Type", "application/json")
		_, _ = w.Write([]byte(`{"kind":"Thing","apiVersion":"` + group + `/` + version + `","metadata":{"name":"one"}}`))
	})
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	srv := &http.Server{
		Handler: mux,
		TLSConfig: &tls.Config{
			Certificates: []tls.Certificate{pair},
			// Like an aggregated server: only the front proxy may call.
			ClientAuth: tls.RequireAndVerifyClientCert,
			ClientCAs:  frontProxy,
		},
		ReadHeaderTimeout: 10 * time.Second,
	}
	go func() { _ = srv.ServeTLS(l, "", "") }()
	t.Cleanup(func() { _ = srv.Close() })

	ctx := t.Context()
	if err := shared.RegisterLocalAPIService(ctx, group, version, l.Addr().(*net.TCPAddr).Port, shared.CAPEM); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := shared.UnregisterLocalAPIService(context.Background(), group, version); err != nil {
			t.Error(err)
		}
	})
	if err := shared.WaitAPIServiceAvailable(ctx, group, version); err != nil {
		t.Fatal(err)
	}

	var thing struct{ Kind string }
	if code := do(t, shared, http.MethodGet, "/apis/"+group+"/"+version+"/things/one", nil, &thing); code != http.StatusOK || thing.Kind != "Thing" {
		t.Fatalf("GET through the aggregator: status %d, %+v", code, thing)
	}
	mu.Lock()
	defer mu.Unlock()
	if sawUser != "loom-admin" || !strings.Contains(sawGroups, "system:masters") {
		t.Fatalf("server saw X-Remote-User %q, X-Remote-Group %q; want loom-admin in system:masters", sawUser, sawGroups)
	}
}

func TestRegisterLocalAPIServiceBadInput(t *testing.T) {
	ctx := t.Context()
	for name, call := range map[string]func() error{
		"no group":   func() error { return shared.RegisterLocalAPIService(ctx, "", "v1", 8443, shared.CAPEM) },
		"bad port":   func() error { return shared.RegisterLocalAPIService(ctx, "g.example.com", "v1", 70000, shared.CAPEM) },
		"no CA":      func() error { return shared.RegisterLocalAPIService(ctx, "g.example.com", "v1", 8443, nil) },
		"no serving": func() error { _, _, err := shared.ServingCert(); return err },
	} {
		if err := call(); err == nil || !strings.HasPrefix(err.Error(), "testenv: ") {
			t.Errorf("%s: err = %v, want a testenv error", name, err)
		}
	}
}

// TestWaitAPIServiceAvailableTimesOut registers a group that nothing
// serves and checks the typed error that names the last condition.
func TestWaitAPIServiceAvailableTimesOut(t *testing.T) {
	const group, version = "nobody.testenv.loom.dev", "v1"
	l, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	port := l.Addr().(*net.TCPAddr).Port
	l.Close() // nothing listens there
	ctx := t.Context()
	if err := shared.RegisterLocalAPIService(ctx, group, version, port, shared.CAPEM); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = shared.UnregisterLocalAPIService(context.Background(), group, version) })
	wctx, cancel := context.WithTimeout(ctx, 5*time.Second)
	defer cancel()
	err = shared.WaitAPIServiceAvailable(wctx, group, version)
	var na *APIServiceNotAvailableError
	if !errors.As(err, &na) || !errors.Is(err, context.DeadlineExceeded) || na.Name != "v1."+group {
		t.Fatalf("err = %v, want an APIServiceNotAvailableError for v1.%s", err, group)
	}
	t.Logf("as expected: %v", err)
}
