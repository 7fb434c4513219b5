package rest

import (
	"bytes"
	"context"
	"crypto/tls"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"os"
	"os/exec"
	"strings"
	"sync"
	"time"

	"golang.org/x/term"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
)

// ExecOptions configure exec credential plugins (users[].user.exec). The
// zero value runs every plugin without a terminal.
type ExecOptions struct {
	// Stdin is the user's terminal, offered to plugins whose
	// interactiveMode is IfAvailable or Always so that they can prompt (for
	// a password, a second factor, a browser login's code). When Stdin is a
	// terminal, such a plugin gets it as its standard input, and the
	// ExecCredential it is given says spec.interactive=true. When Stdin is
	// nil (the default) or not a terminal, IfAvailable plugins run without
	// standard input (spec.interactive=false), and Always plugins fail with
	// an error wrapping [ErrExecNeedsTerminal]. Command-line programs pass
	// os.Stdin, as kubectl does; programs that read their own standard
	// input should not.
	Stdin *os.File
	// Stderr receives the standard error of plugins that run with the
	// terminal, where they write their prompts. Nil means os.Stderr. The
	// standard error of other plugins is kept for error messages only.
	Stderr io.Writer
}

// ErrExecNeedsTerminal is returned (wrapped in a [*config.Error] naming
// the plugin's interactiveMode) when a plugin with interactiveMode Always
// would run but [ExecOptions.Stdin] offers no terminal.
var ErrExecNeedsTerminal = errors.New("the exec credential plugin needs a terminal (interactiveMode Always), and standard input is not one")

// execWaitDelay bounds how long a cancelled plugin's output is waited for
// once it has been killed (a child it started may hold the pipes open).
const execWaitDelay = 5 * time.Second

// execProvider runs an exec credential plugin
// (client.authentication.k8s.io/v1 or v1beta1) and caches its credential
// until the expiry the plugin reports, or until a 401 invalidates it. A
// credential without an expiry is kept until a 401.
//
// One run of the plugin at a time serves every request that needs a
// credential while it runs; a request whose context ends stops waiting at
// once (see flight).
type execProvider struct {
	cfg          config.ExecConfig
	origin       string
	user         string
	cluster      *execCluster
	stdin        *os.File
	stderr       io.Writer
	clock        clock.Clock
	logger       *slog.Logger
	onCertRotate func()

	runs flight[*execCred]

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

func newExecProvider(cfg config.Config, opts ExecOptions, clk clock.Clock, logger *slog.Logger) *execProvider {
	p := &execProvider{cfg: *cfg.Auth.Exec, origin: cfg.Auth.Origin, user: cfg.Auth.User, stdin: opts.Stdin, stderr: opts.Stderr, clock: clk, logger: logger}
	if p.stderr == nil {
		p.stderr = os.Stderr
	}
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

// get returns the cached credential, or runs the plugin (or waits for the
// run in progress) for a new one.
func (p *execProvider) get(ctx context.Context) (*execCred, error) {
	if c := p.cached(); c != nil {
		return c, nil
	}
	c, err := p.runs.do(ctx, func(ctx context.Context) (*execCred, error) {
		if c := p.cached(); c != nil {
			return c, nil // a run that ended just before this one began
		}
		c, err := p.run(ctx)
		if err != nil {
			return nil, err
		}
		p.mu.Lock()
		old := p.cred
		c.fetched = p.clock.Now()
		p.cred = c
		p.mu.Unlock()
		if old != nil && old.cert != nil && c.cert != nil && !bytes.Equal(old.cert.Certificate[0], c.cert.Certificate[0]) && p.onCertRotate != nil {
			p.onCertRotate()
		}
		return c, nil
	})
	if err != nil && ctx.Err() != nil && errors.Is(err, ctx.Err()) {
		return nil, p.fail("waiting for the plugin: %w", err)
	}
	return c, err
}

// cached returns the credential if it is still valid.
func (p *execProvider) cached() *execCred {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.cred != nil && (p.cred.expiry.IsZero() || p.clock.Now().Before(p.cred.expiry)) {
		return p.cred
	}
	return nil
}

func (p *execProvider) fail(format string, args ...any) error {
	return &config.Error{File: p.origin, Field: userField(p.user, "exec"), Err: fmt.Errorf("plugin %s: "+format, append([]any{p.cfg.Command}, args...)...)}
}

// interactive reports whether the plugin runs with the terminal, by its
// interactiveMode and whether ExecOptions.Stdin is a terminal.
func (p *execProvider) interactive() (bool, error) {
	tty := p.stdin != nil && term.IsTerminal(int(p.stdin.Fd()))
	switch p.cfg.InteractiveMode {
	case "", "Never":
		return false, nil
	case "IfAvailable":
		return tty, nil
	case "Always":
		if !tty {
			return false, &config.Error{File: p.origin, Field: userField(p.user, "exec.interactiveMode"), Err: fmt.Errorf("plugin %s: %w", p.cfg.Command, ErrExecNeedsTerminal)}
		}
		return true, nil
	}
	return false, &config.Error{File: p.origin, Field: userField(p.user, "exec.interactiveMode"), Err: fmt.Errorf("unknown mode %q; want Never, IfAvailable or Always", p.cfg.InteractiveMode)}
}

func (p *execProvider) run(ctx context.Context) (*execCred, error) {
	interactive, err := p.interactive()
	if err != nil {
		return nil, err
	}
	in := execCredential{APIVersion: p.cfg.APIVersion, Kind: "ExecCredential", Spec: execSpec{Cluster: p.cluster, Interactive: interactive}}
	info, err := json.Marshal(in)
	if err != nil {
		return nil, p.fail("encoding KUBERNETES_EXEC_INFO: %w", err)
	}
	cmd := exec.CommandContext(ctx, p.cfg.Command, p.cfg.Args...)
	cmd.WaitDelay = execWaitDelay
	cmd.Env = os.Environ()
	for _, e := range p.cfg.Env {
		cmd.Env = append(cmd.Env, e.Name+"="+e.Value)
	}
	cmd.Env = append(cmd.Env, "KUBERNETES_EXEC_INFO="+string(info))
	var stdout, stderr bytes.Buffer
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if interactive {
		// The terminal itself, not a pipe: the plugin sees a terminal and
		// can prompt on it. Its standard error is the user's to read.
		cmd.Stdin, cmd.Stderr = p.stdin, p.stderr
	}
	if err := cmd.Run(); err != nil {
		if errors.Is(err, exec.ErrNotFound) && p.cfg.InstallHint != "" {
			return nil, p.fail("%w\n%s", err, p.cfg.InstallHint)
		}
		if ctx.Err() != nil {
			return nil, p.fail("stopped: %w", ctx.Err())
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
