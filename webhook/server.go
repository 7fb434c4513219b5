package webhook

import (
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/httpserver"
	"github.com/loom-k8s/loom/tracing"
)

// Metrics observes webhook requests. The manager's Prometheus registry
// implements it.
type Metrics interface {
	// RegisterWebhook is called when a webhook is registered, with its
	// path, before any request to it.
	RegisterWebhook(webhook string)
	// StartWebhook is called when a request to a webhook arrives; the
	// ObserveWebhook call for the same request follows.
	StartWebhook(webhook string)
	// ObserveWebhook is called after each request to a webhook with the HTTP
	// status code written (200 for an answered review, whether it allowed
	// or denied; 4xx and 5xx for requests that could not be answered).
	ObserveWebhook(webhook string, code int, d time.Duration)
	// ObservePanic is called, before ObserveWebhook, when a handler made
	// by this package (an admission handler, or Conversion when
	// conversion is true) recovered from a panic while answering a
	// request to webhook.
	ObservePanic(webhook string, conversion bool)
}

// panicsKey is the context key of a request's *panics.
type panicsKey struct{}

// panics counts the panics recovered while answering one request.
type panics struct{ admission, conversion atomic.Int32 }

// notePanic records a recovered panic for the server's metrics, if ctx
// is a request context of a Server.
func notePanic(ctx context.Context, conversion bool) {
	p, ok := ctx.Value(panicsKey{}).(*panics)
	if !ok {
		return
	}
	if conversion {
		p.conversion.Add(1)
	} else {
		p.admission.Add(1)
	}
}

// ServerOptions configure NewServer. CertDir is required; the rest may be
// left zero.
type ServerOptions struct {
	// Addr is where to listen. Default ":9443".
	Addr string
	// CertDir holds the serving certificate (tls.crt, PEM, leaf first) and
	// its key (tls.key). Certs writes them there. Required.
	CertDir string
	// ReloadInterval is how often, at most, the files are checked for a
	// change (on a TLS handshake, so an idle server does no work). Default
	// one second.
	ReloadInterval time.Duration
	// MinTLSVersion is the oldest TLS version accepted. Default TLS 1.2;
	// older values are refused.
	MinTLSVersion uint16
	// EnableHTTP2 offers HTTP/2 to callers. Default false: HTTP/1.1 only,
	// which keeps the server out of reach of HTTP/2's stream-reset and
	// stream-cancellation floods (CVE-2023-44487, CVE-2023-39325).
	// kube-apiserver calls webhooks over HTTP/1.1 as well.
	EnableHTTP2 bool
	// TLSConfig, when set, is called with the server's TLS config once it
	// is built, and has the last word: it may change any field (adding
	// "h2" to NextProtos turns HTTP/2 on). Default nil.
	TLSConfig func(*tls.Config)
	// ClientCAFile, when set, is a PEM bundle of CAs, and every caller must
	// present a client certificate that one of them signed: for an API
	// server configured to authenticate to its webhooks
	// (--admission-control-config-file with a kubeconfig per webhook).
	// The file is read again when it changes, at most once per
	// ReloadInterval. Default "": no client certificate is asked for.
	ClientCAFile string
	// DrainPeriod is how long, once Start's context ends, the server goes
	// on serving while it sends each caller away: every response closes
	// its connection ("Connection: close"), so a caller that holds a
	// kept-alive connection to this replica opens its next one elsewhere
	// instead of racing the close of an idle connection (which fails the
	// call: kube-apiserver does not retry a webhook call that met EOF).
	// The drain ends early once no connection is open. Default 5 s;
	// negative means none.
	DrainPeriod time.Duration
	// ShutdownTimeout bounds the wait for requests in flight when Start's
	// context ends. Default 10 s.
	ShutdownTimeout time.Duration
	// Metrics observes every request. Nil means none.
	Metrics Metrics
	// Logger receives reloads and failed requests. Nil means discard.
	Logger *slog.Logger
	// Tracing, when its Provider is set, makes a server span per request
	// that continues the traceparent kube-apiserver sends (see package
	// tracing). The zero value is off.
	Tracing tracing.Options

	clock clock.Clock // tests fake time through export_test.go; nil means the real clock
}

// ErrNoCertDir is returned by NewServer without ServerOptions.CertDir.
var ErrNoCertDir = errors.New("webhook: ServerOptions.CertDir is required")

// Server serves webhooks over HTTPS. Make it with NewServer, register
// handlers with Register, then Start it (or add it to a manager).
type Server struct {
	opts  ServerOptions
	log   *slog.Logger
	mux   *http.ServeMux
	certs *httpserver.CertFiles
	// clientCAs is nil unless ServerOptions.ClientCAFile is set.
	clientCAs *poolReloader
	mu        sync.Mutex
	ln        net.Listener
	paths     map[string]bool
	closed    bool // by Close or Start
	started   bool
}

// NewServer returns a server for opts. It does not read the certificate
// yet: Certs may still be about to write it.
func NewServer(opts ServerOptions) (*Server, error) {
	if opts.CertDir == "" {
		return nil, ErrNoCertDir
	}
	if opts.Addr == "" {
		opts.Addr = ":9443"
	}
	if opts.ReloadInterval <= 0 {
		opts.ReloadInterval = time.Second
	}
	if opts.MinTLSVersion == 0 {
		opts.MinTLSVersion = tls.VersionTLS12
	}
	if opts.MinTLSVersion < tls.VersionTLS12 {
		return nil, fmt.Errorf("webhook: MinTLSVersion %#x is older than TLS 1.2", opts.MinTLSVersion)
	}
	if opts.DrainPeriod == 0 {
		opts.DrainPeriod = 5 * time.Second
	}
	if opts.ShutdownTimeout <= 0 {
		opts.ShutdownTimeout = 10 * time.Second
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	s := &Server{
		opts: opts,
		log:  log,
		mux:  http.NewServeMux(),
		certs: httpserver.LazyCertFiles(filepath.Join(opts.CertDir, "tls.crt"), filepath.Join(opts.CertDir, "tls.key"),
			opts.ReloadInterval, opts.clock, log.With("component", "webhook")),
		paths: map[string]bool{},
	}
	if opts.ClientCAFile != "" {
		s.clientCAs = &poolReloader{file: opts.ClientCAFile, interval: opts.ReloadInterval, clock: clock.OrReal(opts.clock), log: log}
		if _, err := s.clientCAs.get(); err != nil {
			return nil, err
		}
	}
	s.mux.HandleFunc("GET /healthz", func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain")
		_, _ = w.Write([]byte("ok"))
	})
	return s, nil
}

// Register serves h at path (such as "/validate-at"), named after the
// path in metrics and logs. It panics if path is registered twice, or does
// not start with "/", as http.ServeMux does: both are programming errors.
func (s *Server) Register(path string, h http.Handler) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.paths[path] {
		panic("webhook: path registered twice: " + path)
	}
	s.paths[path] = true
	if s.opts.Metrics != nil {
		s.opts.Metrics.RegisterWebhook(path)
	}
	s.mux.Handle("POST "+path, s.observe(path, s.traced(path, h)))
}

// Listen binds the listening socket now, so that Addr is known before
// Start (a test can then inject a URL with the port). Start calls it when
// it has not been called.
func (s *Server) Listen() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln != nil {
		return nil
	}
	ln, err := net.Listen("tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("webhook: listen on %s: %w", s.opts.Addr, err)
	}
	s.ln = ln
	return nil
}

// Close releases the listening socket of a server that Listen bound but
// Start never ran (for example when setting up the rest failed). After
// Start has begun, its context stops the server instead, and Close does
// nothing.
func (s *Server) Close() error {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil || s.closed {
		return nil
	}
	s.closed = true
	return s.ln.Close()
}

// Addr returns the listening address, or nil before Listen or Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Start serves until ctx ends, then stops accepting connections and waits
// up to ShutdownTimeout for requests in flight. The serving certificate
// must be readable by the first handshake; a missing or broken one fails
// handshakes (and is logged), not Start.
func (s *Server) Start(ctx context.Context) error {
	if err := s.Listen(); err != nil {
		return err
	}
	s.mu.Lock()
	if s.started {
		s.mu.Unlock()
		return fmt.Errorf("webhook: server: %w", cache.ErrAlreadyStarted)
	}
	if s.closed {
		s.mu.Unlock()
		return fmt.Errorf("webhook: server: %w", http.ErrServerClosed)
	}
	s.closed, s.started = true, true
	ln := s.ln
	s.mu.Unlock()

	tlsCfg := httpserver.TLSConfig(httpserver.TLSOptions{
		MinVersion: s.opts.MinTLSVersion, HTTP2: s.opts.EnableHTTP2,
		GetCertificate: s.certs.GetCertificate, Hook: s.opts.TLSConfig,
	})
	if s.clientCAs != nil {
		base := tlsCfg
		tlsCfg = base.Clone()
		tlsCfg.GetConfigForClient = func(*tls.ClientHelloInfo) (*tls.Config, error) {
			pool, err := s.clientCAs.get()
			if err != nil {
				return nil, err
			}
			c := base.Clone()
			c.ClientAuth, c.ClientCAs = tls.RequireAndVerifyClientCert, pool
			return c, nil
		}
	}
	var draining atomic.Bool
	var open atomic.Int64
	srv := httpserver.New(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if draining.Load() {
			w.Header().Set("Connection", "close")
		}
		s.mux.ServeHTTP(w, r)
	}), s.log, tlsCfg)
	srv.ConnState = func(_ net.Conn, st http.ConnState) {
		switch st {
		case http.StateNew:
			open.Add(1)
		case http.StateClosed, http.StateHijacked:
			open.Add(-1)
		}
	}
	errc := make(chan error, 1)
	go func() { errc <- srv.ServeTLS(ln, "", "") }()
	s.log.Info("webhook server listening", "addr", ln.Addr().String())
	select {
	case err := <-errc:
		return fmt.Errorf("webhook: serve: %w", err)
	case <-ctx.Done():
	}
	if s.opts.DrainPeriod > 0 {
		draining.Store(true)
		s.drain(&open)
	}
	sctx, cancel := context.WithTimeout(context.Background(), s.opts.ShutdownTimeout)
	defer cancel()
	err := srv.Shutdown(sctx)
	<-errc
	if err != nil {
		return fmt.Errorf("webhook: shutdown: %w", err)
	}
	return nil
}

// drain waits until no connection is open, for up to DrainPeriod.
func (s *Server) drain(open *atomic.Int64) {
	end := time.Now().Add(s.opts.DrainPeriod)
	for open.Load() > 0 && time.Now().Before(end) {
		time.Sleep(20 * time.Millisecond)
	}
}

// observe wraps h to count and time requests.
func (s *Server) observe(name string, h http.Handler) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		start := time.Now()
		rec := &statusRecorder{ResponseWriter: w, code: http.StatusOK}
		m := s.opts.Metrics
		if m == nil {
			h.ServeHTTP(rec, r)
		} else {
			m.StartWebhook(name)
			defer func() {
				// A handler that panics (net/http then drops the
				// connection) still ends its request: counted as a 500.
				if v := recover(); v != nil {
					m.ObserveWebhook(name, http.StatusInternalServerError, time.Since(start))
					panic(v)
				}
			}()
			p := &panics{}
			h.ServeHTTP(rec, r.WithContext(context.WithValue(r.Context(), panicsKey{}, p)))
			for range p.admission.Load() {
				m.ObservePanic(name, false)
			}
			for range p.conversion.Load() {
				m.ObservePanic(name, true)
			}
			m.ObserveWebhook(name, rec.code, time.Since(start))
		}
		if rec.code >= 400 {
			s.log.Warn("webhook request failed", "webhook", name, "code", rec.code)
		}
	})
}

type statusRecorder struct {
	http.ResponseWriter
	code int
}

func (r *statusRecorder) WriteHeader(code int) {
	r.code = code
	r.ResponseWriter.WriteHeader(code)
}

// poolReloader hands out the client CA pool of ServerOptions.ClientCAFile,
// re-reading the file when its size or modification time changed, at most
// once per interval. A file that no longer parses keeps the old pool in
// service.
type poolReloader struct {
	file     string
	interval time.Duration
	clock    clock.Clock
	log      *slog.Logger

	mu        sync.Mutex
	pool      *x509.CertPool
	stamp     fileStamp
	lastCheck time.Time
}

// ErrClientCA is wrapped by the errors about ServerOptions.ClientCAFile.
var ErrClientCA = errors.New("webhook: client CA file")

func (r *poolReloader) get() (*x509.CertPool, error) {
	r.mu.Lock()
	defer r.mu.Unlock()
	now := r.clock.Now()
	if r.pool != nil && now.Sub(r.lastCheck) < r.interval {
		return r.pool, nil
	}
	r.lastCheck = now
	st, err := os.Stat(r.file)
	if err == nil && r.pool != nil && (fileStamp{size: st.Size(), mod: st.ModTime()}) == r.stamp {
		return r.pool, nil
	}
	var data []byte
	if err == nil {
		data, err = os.ReadFile(r.file)
	}
	pool := x509.NewCertPool()
	if err == nil && !pool.AppendCertsFromPEM(data) {
		err = ErrCertNoPEM
	}
	if err != nil {
		if r.pool != nil {
			r.log.Warn("webhook: new client CA file not loaded; keeping the old one", "file", r.file, "err", err)
			return r.pool, nil
		}
		return nil, fmt.Errorf("%w %s: %w", ErrClientCA, r.file, err)
	}
	r.pool, r.stamp = pool, fileStamp{size: st.Size(), mod: st.ModTime()}
	r.log.Info("webhook: client CA loaded", "file", r.file)
	return pool, nil
}

type fileStamp struct {
	size int64
	mod  time.Time
}
