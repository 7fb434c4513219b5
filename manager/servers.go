package manager

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net"
	"net/http"
	"net/http/pprof"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/httpserver"
	"github.com/loom-k8s/loom/internal/pki"
)

// MetricsServing says how the manager serves /metrics at
// Options.MetricsAddr. The zero value is valid: HTTPS with a certificate
// the manager makes, every request authenticated and authorized by the API
// server (see [NewAuthFilter]), HTTP/1.1 only; as kubebuilder's projects
// serve their metrics.
type MetricsServing struct {
	// Insecure serves /metrics over plain HTTP to anyone who can reach
	// the address, as Loom did before: for local runs and tests, or
	// behind a proxy that checks callers itself. CertDir, EnableHTTP2,
	// TLSConfig and Auth are then unused. Default false.
	Insecure bool
	// CertDir holds the serving certificate and its key as tls.crt and
	// tls.key (as a mounted kubernetes.io/tls Secret has them, such as
	// one cert-manager writes); they are read again when they change.
	// Default "": the manager makes a self-signed certificate at Start,
	// kept in memory only, and makes a new one before it expires.
	CertDir string
	// EnableHTTP2 offers HTTP/2 to callers. Default false: HTTP/1.1 only,
	// which keeps the server out of reach of HTTP/2's stream-reset and
	// stream-cancellation floods (CVE-2023-44487, CVE-2023-39325).
	EnableHTTP2 bool
	// TLSConfig, when set, is called with the server's TLS config once it
	// is built, and has the last word: it may change any field (such as
	// MinVersion, or NextProtos: adding "h2" turns HTTP/2 on). Default
	// nil.
	TLSConfig func(*tls.Config)
	// Auth tunes the cache of the API server's decisions about callers.
	// Its Logger is unused: the manager's is used.
	Auth AuthOptions
}

// selfSignedLife is how long the self-signed metrics certificate is valid;
// a new one is made once less than selfSignedRenew of it is left.
const (
	selfSignedLife  = 365 * 24 * time.Hour
	selfSignedRenew = 30 * 24 * time.Hour
)

// selfSigned hands out a serving certificate signed by a CA of its own,
// both made in memory, and makes new ones before they expire. Nothing is
// written to disk; a scraper cannot verify it against a CA it knows, and
// is expected to skip verification (as Prometheus's ServiceMonitors for
// kubebuilder projects do) or to be given CertDir.
type selfSigned struct {
	now func() time.Time

	mu   sync.Mutex
	cert *tls.Certificate
}

func (s *selfSigned) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	now := s.now()
	if s.cert != nil && now.Before(s.cert.Leaf.NotAfter.Add(-selfSignedRenew)) {
		return s.cert, nil
	}
	ca, err := pki.NewCA("loom-metrics-ca", now, now.Add(selfSignedLife))
	if err != nil {
		return nil, err
	}
	names := []string{"localhost"}
	if host, err := os.Hostname(); err == nil && host != "" && host != "localhost" {
		names = append(names, host)
	}
	pair, err := ca.Issue(pki.Request{CommonName: "loom-metrics", DNSNames: names,
		IPs: []net.IP{net.IPv4(127, 0, 0, 1), net.IPv6loopback}, Server: true}, now)
	if err != nil {
		return nil, err
	}
	s.cert = &tls.Certificate{Certificate: [][]byte{pair.Cert.Raw, ca.Cert.Raw}, PrivateKey: pair.Key, Leaf: pair.Cert}
	return s.cert, nil
}

// metricsHandler is what the metrics server serves: /metrics, behind the
// auth filter unless Insecure; and its TLS config, nil when Insecure.
func (m *Manager) metricsHandler() (http.Handler, *tls.Config, error) {
	ms := m.opts.Metrics
	mux := http.NewServeMux()
	if ms.Insecure {
		mux.Handle("/metrics", m.MetricsHandler())
		return mux, nil, nil
	}
	auth := ms.Auth
	auth.Logger = m.log.With("server", "metrics")
	filter, err := NewAuthFilter(m.rc, auth)
	if err != nil {
		return nil, nil, err
	}
	mux.Handle("/metrics", filter(m.MetricsHandler()))
	var getCert func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	if ms.CertDir != "" {
		files, err := httpserver.NewCertFiles(filepath.Join(ms.CertDir, "tls.crt"), filepath.Join(ms.CertDir, "tls.key"), m.log.With("server", "metrics"))
		if err != nil {
			return nil, nil, err
		}
		getCert = files.GetCertificate
	} else {
		ss := &selfSigned{now: time.Now}
		if _, err := ss.GetCertificate(nil); err != nil {
			return nil, nil, err
		}
		getCert = ss.GetCertificate
	}
	return mux, httpserver.TLSConfig(httpserver.TLSOptions{
		HTTP2: ms.EnableHTTP2, GetCertificate: getCert, Hook: ms.TLSConfig,
	}), nil
}

// checkServers checks the server options, for New.
func checkServers(opts Options) error {
	if opts.Metrics.Insecure && opts.Metrics.CertDir != "" {
		return errors.New("manager: Metrics.CertDir is set, and Metrics.Insecure: choose one")
	}
	if opts.PprofAddr != "" && !opts.PprofAllowRemote && !loopback(opts.PprofAddr) {
		return fmt.Errorf("manager: PprofAddr %q is not a loopback address, such as 127.0.0.1:8082 (set PprofAllowRemote to serve the profiler to the network)", opts.PprofAddr)
	}
	return nil
}

// loopback reports whether addr (host:port) listens on loopback only.
func loopback(addr string) bool {
	host, _, err := net.SplitHostPort(addr)
	if err != nil {
		return false
	}
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// serve opens the health, metrics and profiler servers that the options
// ask for.
func (m *Manager) serve(ctx context.Context, wg *sync.WaitGroup) error {
	type server struct {
		name, addr string
		handler    http.Handler
		tls        *tls.Config
	}
	var servers []server
	if m.opts.HealthAddr != "" {
		m.mu.Lock()
		healthz, readyz := m.healthz, m.readyz
		m.mu.Unlock()
		mux := http.NewServeMux()
		mux.Handle("/healthz", m.probe("healthz", healthz))
		mux.Handle("/readyz", m.probe("readyz", readyz))
		servers = append(servers, server{"health", m.opts.HealthAddr, mux, nil})
	}
	if m.opts.MetricsAddr != "" {
		h, tlsCfg, err := m.metricsHandler()
		if err != nil {
			return fmt.Errorf("manager: metrics server: %w", err)
		}
		servers = append(servers, server{"metrics", m.opts.MetricsAddr, h, tlsCfg})
	}
	if m.opts.PprofAddr != "" {
		mux := http.NewServeMux()
		mux.HandleFunc("/debug/pprof/", pprof.Index)
		mux.HandleFunc("/debug/pprof/cmdline", pprof.Cmdline)
		mux.HandleFunc("/debug/pprof/profile", pprof.Profile)
		mux.HandleFunc("/debug/pprof/symbol", pprof.Symbol)
		mux.HandleFunc("/debug/pprof/trace", pprof.Trace)
		servers = append(servers, server{"pprof", m.opts.PprofAddr, mux, nil})
	}
	var listeners []net.Listener
	for _, s := range servers {
		l, err := net.Listen("tcp", s.addr)
		if err != nil {
			for _, l := range listeners {
				_ = l.Close()
			}
			return fmt.Errorf("manager: %s server: %w", s.name, err)
		}
		listeners = append(listeners, l)
	}
	for i, s := range servers {
		l := listeners[i]
		m.mu.Lock()
		m.addrs[s.name] = l.Addr()
		m.mu.Unlock()
		log := m.log.With("server", s.name)
		srv := httpserver.New(s.handler, log, s.tls)
		wg.Go(func() {
			if s.tls != nil {
				_ = srv.ServeTLS(l, "", "")
			} else {
				_ = srv.Serve(l)
			}
		})
		wg.Go(func() {
			<-ctx.Done()
			sctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			_ = srv.Shutdown(sctx)
		})
		scheme := "http"
		if s.tls != nil {
			scheme = "https"
		}
		log.Info("serving", "addr", l.Addr().String(), "scheme", scheme)
	}
	return nil
}
