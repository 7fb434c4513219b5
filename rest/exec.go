package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
)

// execProvider runs an exec credential plugin
// (client.authentication.k8s.io/v1 or v1beta1) and caches its credential
// until the expiry the plugin reports, or until a 401 invalidates it. A
// credential without an expiry is kept until a 401.
type execProvider struct {
	cfg          config.ExecConfig
	origin       string
	cluster      *execCluster
	clock        clock.Clock
	logger       *slog.Logger
	onCertRotate func()

	mu   sync.Mutex
	cred *execCred
}

type execCred struct {
	token   string
	cert    *tls.Certificate
	expiry  time.Time
	fetched time.Time
}

// The ExecCredential wire types.
type execCredential struct {
	APIVersion string          `json:"apiVersion"`
	Kind       string          `json:"kind"`
	Spec       execSpec        `json:"spec"`
	Status     *execCredStatus `json:"status,omitempty"`
}

type execSpec struct {
	Cluster     *execCluster `json:"cluster,omitempty"`
	Interactive bool         `json:"interactive"`
}

type execCluster struct {
	Server                   string `json:"server"`
	TLSServerName            string `json:"tls-server-name,omitempty"`
	InsecureSkipTLSVerify    bool   `json:"insecure-skip-tls-verify,omitempty"`
	CertificateAuthorityData []byte `json:"certificate-authority-data,omitempty"`
	ProxyURL                 string `json:"proxy-url,omitempty"`
	DisableCompression       bool   `json:"disable-compression,omitempty"`
}

type execCredStatus struct {
	ExpirationTimestamp   *time.Time `json:"expirationTimestamp,omitempty"`
	Token                 string     `json:"token,omitempty"`
	ClientCertificateData string     `json:"clientCertificateData,omitempty"`
	ClientKeyData         string     `json:"clientKeyData,omitempty"`
}

func newExecProvider(cfg config.Config, clk clock.Clock, logger *slog.Logger) *execProvider {
	p := &execProvider{cfg: *cfg.Auth.Exec, origin: cfg.Auth.Origin, clock: clk, logger: logger}
	if p.cfg.ProvideClusterInfo {
		ca := cfg.TLS.CAData
		if len(ca) == 0 && cfg.TLS.CAFile != "" {
			ca, _ = os.ReadFile(cfg.TLS.CAFile) // a read error surfaces when the transport is built
		}
		p.cluster = &execCluster{
			Server:                   cfg.Host,
			TLSServerName:            cfg.TLS.ServerName,
			InsecureSkipTLSVerify:    cfg.TLS.Insecure,
			CertificateAuthorityData: ca,
			ProxyURL:                 cfg.ProxyURL,
			DisableCompression:       cfg.DisableCompression,
		}
	}
	return p
}

func (p *execProvider) token(ctx context.Context) (string, error) {
	c, err := p.get(ctx)
	if err != nil {
		return "", err
	}
	return c.token, nil
}

func (p *execProvider) clientCert(ctx context.Context) (*tls.Certificate, error) {
	c, err := p.get(ctx)
	if err != nil {
		return nil, err
	}
	return c.cert, nil
}

// invalidate drops a credential fetched before t (the start of a request
// that got 401), so the next request runs the plugin again.
func (p *execProvider) invalidate(t time.Time) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred != nil && !p.cred.fetched.After(t) {
		p.cred = nil
	}
}

func (p *execProvider) get(ctx context.Context) (*execCred, error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	now := p.clock.Now()
	if p.cred != nil && (p.cred.expiry.IsZero() || now.Before(p.cred.expiry)) {
		return p.cred, nil
	}
	old := p.cred
	c, err := p.run(ctx)
	if err != nil {
		return nil, err
	}
	c.fetched = p.clock.Now()
	p.cred = c
	if old != nil && old.cert != nil && c.cert != nil && !bytes.Equal(old.cert.Certificate[0], c.cert.Certificate[0]) && p.onCertRotate != nil {
		p.onCertRotate()
	}
	return c, nil
}

func (p *execProvider) fail(format string, args ...any) error {
	return &config.Error{File: p.origin, Field: "exec", Err: fmt.Errorf("plugin %s: "+format, append([]any{p.cfg.Command}, args...)...)}
}

func (p *execProvider) run(ctx context.Context) (*execCred, error) {
	in := execCredential{APIVersion: p.cfg.APIVersion, Kind: "ExecCredential", Spec: execSpec{Cluster: p.cluster}}
	info, err := json.Marshal(in)
	if err != nil {
		return nil, p.fail("encoding KUBERNETES_EXEC_INFO: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.cfg.Command, p.cfg.Args...)
	cmd.Env = os.Environ()
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(info))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) && p.cfg.InstallHint != "" {
			return nil, p.fail("%w\n%s", err, p.cfg.InstallHint)
		}
		msg := strings.TrimSpace(stderr.String())
		if len(msg) > 1024 {
			msg = msg[:1024] + "..."
		}
		if msg != "" {
			return nil, p.fail("%w: %s", err, msg)
		}
		return nil, p.fail("%w", err)
	}
	var out execCredential
	if err := json.Unmarshal(stdout.Bytes(), &out); err != nil {
		// Do not quote stdout: it may hold a credential.
		return nil, p.fail("output is not an ExecCredential: %w", err)
	}
	if out.APIVersion != p.cfg.APIVersion {
		return nil, p.fail("returned apiVersion %q, want %q", out.APIVersion, p.cfg.APIVersion)
	}
	if out.Kind != "ExecCredential" {
		return nil, p.fail("returned kind %q, want ExecCredential", out.Kind)
	}
	st := out.Status
	if st == nil {
		return nil, p.fail("returned no status")
	}
	c := &execCred{token: st.Token}
	if st.ExpirationTimestamp != nil {
		c.expiry = *st.ExpirationTimestamp
	}
	if (st.ClientCertificateData == "") != (st.ClientKeyData == "") {
		return nil, p.fail("returned only one of clientCertificateData and clientKeyData")
	}
	if st.ClientCertificateData != "" {
		cert, err := tls.X509KeyPair([]byte(st.ClientCertificateData), []byte(st.ClientKeyData))
		if err != nil {
			return nil, p.fail("invalid client certificate: %w", err)
		}
		c.cert = &cert
	}
	if c.token == "" && c.cert == nil {
		return nil, p.fail("returned neither a token nor a client certificate")
	}
	p.logger.Debug("exec credential plugin ran", "command", p.cfg.Command, "expires", c.expiry)
	return c, nil
}
