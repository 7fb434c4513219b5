package rest

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"net"
	"net/http"
	"net/url"
	"os"
	"time"

	"github.com/loom-k8s/loom/config"
)

// Transport defaults. HTTP/2 health-check pings find dead connections
// (a half-open TCP connection would otherwise hang a watch for the kernel's
// keep-alive timeout).
const (
	dialTimeout         = 30 * time.Second
	tcpKeepAlive        = 30 * time.Second
	tlsHandshakeTimeout = 10 * time.Second
	idleConnTimeout     = 90 * time.Second
	maxIdlePerHost      = 25
	h2ReadIdleTimeout   = 30 * time.Second
	h2PingTimeout       = 15 * time.Second
)

// newHTTPTransport builds the base transport: TLS from cfg, proxy, HTTP/2.
func newHTTPTransport(cfg config.Config, host string, exec *execProvider) (*http.Transport, error) {
	tc, err := tlsConfig(cfg, host, exec)
	if err != nil {
		return nil, err
	}
	proxy := http.ProxyFromEnvironment
	if cfg.ProxyURL != "" {
		u, err := url.Parse(cfg.ProxyURL)
		if err != nil {
			return nil, &config.Error{File: cfg.Origin, Field: "proxy-url", Err: fmt.Errorf("invalid URL")}
		}
		switch u.Scheme {
		case "http", "https", "socks5", "socks5h":
		default:
			return nil, &config.Error{File: cfg.Origin, Field: "proxy-url", Err: fmt.Errorf("unsupported scheme %q", u.Scheme)}
		}
		proxy = http.ProxyURL(u)
	}
	return &http.Transport{
		Proxy:               proxy,
		DialContext:         (&net.Dialer{Timeout: dialTimeout, KeepAlive: tcpKeepAlive}).DialContext,
		TLSClientConfig:     tc,
		TLSHandshakeTimeout: tlsHandshakeTimeout,
		MaxIdleConnsPerHost: maxIdlePerHost,
		IdleConnTimeout:     idleConnTimeout,
		ForceAttemptHTTP2:   true,
		DisableCompression:  cfg.DisableCompression,
		HTTP2: &http.HTTP2Config{
			SendPingTimeout: h2ReadIdleTimeout,
			PingTimeout:     h2PingTimeout,
		},
	}, nil
}

func readTLSFile(cfg config.Config, field, path string, data []byte) ([]byte, error) {
	if len(data) > 0 || path == "" {
		return data, nil
	}
	b, err := os.ReadFile(path)
	if err != nil {
		return nil, &config.Error{File: cfg.Origin, Field: field, Err: err}
	}
	return b, nil
}

func tlsConfig(cfg config.Config, host string, exec *execProvider) (*tls.Config, error) {
	t := cfg.TLS
	tc := &tls.Config{MinVersion: tls.VersionTLS12, ServerName: t.ServerName}
	if tc.ServerName == "" {
		tc.ServerName = host
	}
	ca, err := readTLSFile(cfg, "certificate-authority", t.CAFile, t.CAData)
	if err != nil {
		return nil, err
	}
	if t.Insecure {
		if len(ca) > 0 {
			return nil, &config.Error{File: cfg.Origin, Field: "insecure-skip-tls-verify", Err: fmt.Errorf("cannot be combined with a certificate authority")}
		}
		tc.InsecureSkipVerify = true
	} else if len(ca) > 0 {
		pool := x509.NewCertPool()
		if !pool.AppendCertsFromPEM(ca) {
			return nil, &config.Error{File: cfg.Origin, Field: "certificate-authority", Err: fmt.Errorf("no PEM certificates found")}
		}
		tc.RootCAs = pool
	}
	certPEM, err := readTLSFile(cfg, "client-certificate", t.CertFile, t.CertData)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readTLSFile(cfg, "client-key", t.KeyFile, t.KeyData)
	if err != nil {
		return nil, err
	}
	var static *tls.Certificate
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		cert, err := tls.X509KeyPair(certPEM, keyPEM)
		if err != nil {
			// The tls error text does not include key material.
			return nil, &config.Error{File: cfg.Origin, Field: "client-certificate", Err: fmt.Errorf("invalid client certificate or key: %w", err)}
		}
		static = &cert
	}
	if static != nil || exec != nil {
		tc.GetClientCertificate = func(cri *tls.CertificateRequestInfo) (*tls.Certificate, error) {
			if exec != nil {
				// An exec plugin's certificate wins over static ones, as
				// in kubectl. The handshake's context is the request's.
				if c, err := exec.clientCert(cri.Context()); err != nil {
					return nil, err
				} else if c != nil {
					return c, nil
				}
			}
			if static != nil {
				return static, nil
			}
			return &tls.Certificate{}, nil
		}
	}
	return tc, nil
}
