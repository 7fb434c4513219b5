// Package httpserver holds the settings that every server Loom opens
// shares: the webhook server, the metrics server and the probe server.
// They are in one place so that the three cannot drift apart.
package httpserver

import (
	"crypto/tls"
	"log/slog"
	"net/http"
	"slices"
	"time"
)

// Limits every server applies. They bound what a caller that never
// finishes a request, or that sends an oversized header, can hold.
const (
	// ReadHeaderTimeout bounds the wait for a request's headers.
	ReadHeaderTimeout = 10 * time.Second
	// ReadTimeout bounds the wait for a whole request, body included.
	// Webhook and metrics requests are small; 30 s leaves room for a
	// slow network.
	ReadTimeout = 30 * time.Second
	// IdleTimeout closes keep-alive connections idle this long.
	IdleTimeout = 90 * time.Second
	// MaxHeaderBytes bounds a request's headers (net/http's default is
	// 1 MiB).
	MaxHeaderBytes = 64 << 10
)

// New returns an http.Server for h with the limits above, logging the
// server's own errors (failed handshakes, malformed requests) to log at
// debug level. tlsCfg is nil for a plain HTTP server; otherwise the server
// speaks HTTP/2 only when tlsCfg.NextProtos offers "h2" (see TLSConfig).
// Serve it with ServeTLS(l, "", "") when tlsCfg is set.
func New(h http.Handler, log *slog.Logger, tlsCfg *tls.Config) *http.Server {
	var protos http.Protocols
	protos.SetHTTP1(true)
	if tlsCfg != nil && slices.Contains(tlsCfg.NextProtos, "h2") {
		protos.SetHTTP2(true)
	}
	return &http.Server{
		Handler:           h,
		TLSConfig:         tlsCfg,
		Protocols:         &protos,
		ReadHeaderTimeout: ReadHeaderTimeout,
		ReadTimeout:       ReadTimeout,
		IdleTimeout:       IdleTimeout,
		MaxHeaderBytes:    MaxHeaderBytes,
		ErrorLog:          slog.NewLogLogger(log.Handler(), slog.LevelDebug),
	}
}

// TLSOptions are the TLS settings that callers may choose.
type TLSOptions struct {
	// MinVersion is the oldest TLS version accepted (TLS 1.2 when zero).
	MinVersion uint16
	// HTTP2 offers HTTP/2 in ALPN. Off, only HTTP/1.1 is offered, which
	// keeps the server out of reach of HTTP/2's stream-reset and
	// stream-cancellation floods (CVE-2023-44487, CVE-2023-39325).
	HTTP2 bool
	// GetCertificate serves the certificate.
	GetCertificate func(*tls.ClientHelloInfo) (*tls.Certificate, error)
	// Hook, when set, is called last with the config, and may change
	// anything in it: adding "h2" to NextProtos turns HTTP/2 on.
	Hook func(*tls.Config)
}

// TLSConfig returns the TLS config of opts.
func TLSConfig(opts TLSOptions) *tls.Config {
	minVersion := opts.MinVersion
	if minVersion == 0 {
		minVersion = tls.VersionTLS12
	}
	protos := []string{"http/1.1"}
	if opts.HTTP2 {
		protos = []string{"h2", "http/1.1"}
	}
	cfg := &tls.Config{MinVersion: minVersion, GetCertificate: opts.GetCertificate, NextProtos: protos}
	if opts.Hook != nil {
		opts.Hook(cfg)
	}
	return cfg
}
