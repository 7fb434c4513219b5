package testenv

import (
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/base64"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/rest"
)

// Options configures Start and New. The zero value starts etcd and
// kube-apiserver only, in a temporary folder, with binaries from AssetsDir.
type Options struct {
	// Controllers starts kube-controller-manager (garbage collector,
	// namespaces, service accounts, deployments and the rest of its default
	// controllers). Default off. With it off, the ServiceAccount admission
	// plugin is disabled, so Pods can be created without a "default"
	// service account existing; with it on, Start waits until the default
	// namespace has its "default" service account.
	Controllers bool

	// Scheduler starts kube-scheduler. Default off: Pods stay unscheduled.
	// It needs Controllers: kube-apiserver taints every new node
	// not-ready, and only kube-controller-manager clears the taint, so
	// without it nothing could be scheduled.
	Scheduler bool

	// Nodes is the number of fake nodes run by kwok; 0 (the default) starts
	// no kwok. kwok moves Pods bound to its nodes to Running and Ready.
	// Start waits until every node is Ready.
	Nodes int

	// Dir is the state folder (certificates, kubeconfig, etcd data, logs).
	// Empty (the default) means a new temporary folder, removed by Stop. A
	// given folder is kept, and its CA and etcd data are reused on the next
	// Start, so a dev cluster keeps its objects and its kubeconfigs.
	Dir string

	// AssetsDir holds the binaries. Empty means AssetsDir().
	AssetsDir string

	// Logger receives progress messages. Nil means discard.
	Logger *slog.Logger

	// APIServerArgs are extra kube-apiserver flags ("--name=value"),
	// appended after testenv's own, so they win where the server takes the
	// last value.
	APIServerArgs []string

	// StartTimeout bounds each wait for a server to become ready. Zero means
	// 90 seconds.
	StartTimeout time.Duration

	// Tracing makes kube-apiserver export its spans to Env.Traces, a
	// TraceCollector that Start runs in this process. Default off.
	// kube-apiserver records a request only when the request carries a
	// sampled W3C traceparent header (see the package documentation).
	Tracing bool

	// RealNodes is the number of real nodes (at most 100): each a kubelet
	// with a containerd of its own, on this machine, so that Pods really
	// run. 0 (the default) starts none. They need Linux, root,
	// containerd, runc and the CNI plugins (ErrRealNodesUnavailable says
	// what is missing), the kubelet binary from the assets folder, and the
	// Go toolchain, which builds their pause image. Images are never
	// pulled: load them with Env.ImportImage. Start waits until every node
	// is Ready. See the package documentation, "Real nodes".
	RealNodes int

	// CRDs are files or folders of CustomResourceDefinition manifests
	// (YAML; a folder's *.yaml and *.yml files, not recursively) that
	// Start installs once the control plane is ready, waiting until each
	// is established and listed by discovery. A file that holds no CRD,
	// or a CRD the server refuses, fails Start with an error that names
	// it. Default: none.
	CRDs []string
}

// Env is a running control plane. Its exported fields are set by Start and
// must not be changed. Its methods are safe for concurrent use.
type Env struct {
	// URL is kube-apiserver's address, https://127.0.0.1:<port>; with real
	// nodes, https://<bridge address>:<port> (see RealNode.IP), which this
	// machine and the Pods reach.
	URL string
	// KubeconfigPath is the admin kubeconfig written in Dir; Kubeconfig holds
	// the same bytes. The admin authenticates with AdminCertPEM/AdminKeyPEM.
	KubeconfigPath string
	Kubeconfig     []byte
	// CAPEM is the CA that signed kube-apiserver's serving certificate and
	// that kube-apiserver trusts for client certificates.
	CAPEM []byte
	// AdminCertPEM and AdminKeyPEM are a client certificate for the user
	// "loom-admin" in the group system:masters.
	AdminCertPEM, AdminKeyPEM []byte
	// AdminToken is a static bearer token for the user "loom-admin-token" in
	// the group system:masters.
	AdminToken string
	// FrontProxyCAPEM is the CA of the aggregation layer: kube-apiserver
	// presents FrontProxyClientCertPEM (CN front-proxy-client, signed by
	// this CA) when it proxies a request to an aggregated API server, which
	// then trusts the X-Remote-User, X-Remote-Group and X-Remote-Extra-*
	// headers. See RegisterLocalAPIService.
	FrontProxyCAPEM []byte
	// FrontProxyClientCertPEM and FrontProxyClientKeyPEM are kube-apiserver's
	// proxy client certificate.
	FrontProxyClientCertPEM, FrontProxyClientKeyPEM []byte
	// PodLogFile is the log of every container on the fake nodes (when
	// Options.Nodes > 0), in the CRI log format kubelets keep: kwok serves
	// it for pods/log requests, and follows it. Append to it with
	// AppendPodLog.
	PodLogFile string
	// EtcdURL is etcd's client address, http://127.0.0.1:<port>.
	EtcdURL string
	// Dir is the state folder.
	Dir string
	// Traces receives kube-apiserver's spans when Options.Tracing is on; it
	// is nil otherwise. It stays readable after Stop.
	Traces *TraceCollector `json:"-"`
	// RealNodes describes the real nodes (Options.RealNodes), in order.
	RealNodes []RealNode

	opts      Options
	log       *slog.Logger
	ca        *pki.CA
	removeDir bool
	grace     time.Duration // how long Stop waits after SIGTERM

	mu        sync.Mutex
	procs     []*proc // in start order
	etcd      *proc
	apiserver *proc
	proxies   []*Proxy
	stopped   bool
	realNodes []*realNode
	nodeRec   *nodeEnvRecord // what the real nodes made on the machine
	kubeProxy *proc          // with real nodes, when this env holds the machine's kube-proxy
	sharedDir string         // when another process runs the control plane (Shared.AcrossPackages)
	admin     *http.Client   // adminCall's, made on first use
	rest      *rest.Client   // what REST with zero Options returns, made on first use
}

// Start starts a control plane and waits until it is ready. On error,
// everything it started is stopped again. ctx bounds the start-up only; the
// servers run until Stop.
func Start(ctx context.Context, opts Options) (env *Env, err error) {
	if opts.StartTimeout == 0 {
		opts.StartTimeout = 90 * time.Second
	}
	if opts.Scheduler && !opts.Controllers {
		return nil, errors.New("testenv: Options.Scheduler needs Options.Controllers: new nodes are tainted not-ready until kube-controller-manager clears the taint")
	}
	if opts.RealNodes < 0 || opts.RealNodes > 100 {
		return nil, fmt.Errorf("testenv: Options.RealNodes is %d; want 0 to 100", opts.RealNodes)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	assets := opts.AssetsDir
	if assets == "" {
		assets = AssetsDir()
	}
	bins := map[string]string{}
	need := []string{"etcd", "kube-apiserver"}
	if opts.Controllers {
		need = append(need, "kube-controller-manager")
	}
	if opts.Scheduler {
		need = append(need, "kube-scheduler")
	}
	if opts.Nodes > 0 {
		need = append(need, "kwok")
	}
	if opts.RealNodes > 0 {
		need = append(need, "kubelet", "kube-proxy")
	}
	for _, n := range need {
		p, err := binary(assets, n)
		if err != nil {
			return nil, err
		}
		bins[n] = p
	}
	if opts.RealNodes > 0 {
		if err := checkRealNodeHost(); err != nil {
			return nil, err
		}
	}

	if killed := sweepOrphans(); len(killed) > 0 {
		log.Info("killed servers left by an earlier run", "pids", killed)
	}
	// Real nodes of a dead process hold mounts in its state folder: take
	// them down before the folder is removed. (Nothing to do unless an env
	// with real nodes ever ran on this machine.)
	sweepStaleRealNodes(log)
	if removed := sweepStaleDirs(); len(removed) > 0 {
		log.Info("removed state folders left by an earlier run", "dirs", removed)
	}

	e := &Env{opts: opts, log: log, Dir: opts.Dir}
	if e.Dir == "" {
		d, err := os.MkdirTemp("", tempPrefix)
		if err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
		e.Dir, e.removeDir = d, true
		// Records who owns the folder, so that a later run can remove it
		// if this process dies without Stop (see sweepStaleDirs).
		if err := os.WriteFile(e.path(ownerFile), []byte(selfIdentity()), 0o600); err != nil {
			return nil, fmt.Errorf("testenv: %w", err)
		}
	} else {
		e.grace = 10 * time.Second // keep a persistent etcd consistent
		if err := os.MkdirAll(e.Dir, 0o700); err != nil {
			return nil, fmt.Errorf("testenv: state folder: %w", err)
		}
	}
	if opts.RealNodes > 0 {
		// Mounts and sockets under it are named by absolute, resolved paths.
		abs, err := filepath.Abs(e.Dir)
		if err == nil {
			abs, err = filepath.EvalSymlinks(abs)
		}
		if err != nil {
			return nil, fmt.Errorf("testenv: state folder: %w", err)
		}
		e.Dir = abs
	}
	defer func() {
		if err != nil {
			_ = e.Stop()
		}
	}()

	if opts.RealNodes > 0 {
		// kube-apiserver listens on the bridge, so the bridge comes first.
		if err := e.prepareRealNodeNetwork(ctx); err != nil {
			return nil, err
		}
	}
	if err := e.writePKI(); err != nil {
		return nil, err
	}
	if opts.RealNodes > 0 {
		if err := e.writeKubeletClientPKI(); err != nil {
			return nil, err
		}
	}
	if err := e.startEtcd(ctx, bins["etcd"]); err != nil {
		return nil, err
	}
	if opts.Tracing {
		if err := e.startTracing(); err != nil {
			return nil, err
		}
	}
	if err := e.startAPIServer(ctx, bins["kube-apiserver"]); err != nil {
		return nil, err
	}
	if opts.Controllers {
		if err := e.startControllerManager(ctx, bins["kube-controller-manager"]); err != nil {
			return nil, err
		}
	}
	if opts.Scheduler {
		if err := e.startScheduler(bins["kube-scheduler"]); err != nil {
			return nil, err
		}
	}
	if opts.Nodes > 0 {
		if err := e.startKwok(ctx, bins["kwok"]); err != nil {
			return nil, err
		}
	}
	if opts.RealNodes > 0 {
		if err := e.startRealNodes(ctx, bins["kubelet"], bins["kube-proxy"]); err != nil {
			return nil, err
		}
	}
	if len(opts.CRDs) > 0 {
		if err := e.installCRDs(ctx); err != nil {
			return nil, err
		}
	}
	log.Info("control plane ready", "url", e.URL, "kubeconfig", e.KubeconfigPath)
	return e, nil
}

// New starts a control plane for a test and stops it when the test and its
// subtests end. If the test failed, it logs the tail of each server's log.
// It fails the test at once if the control plane cannot start.
func New(t testing.TB, opts Options) *Env {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	e, err := Start(ctx, opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if t.Failed() {
			t.Log(e.LogTails(30))
		}
		if err := e.Stop(); err != nil {
			t.Error(err)
		}
	})
	return e
}

// LogTails returns the last n lines of every server's log.
func (e *Env) LogTails(n int) string {
	e.mu.Lock()
	procs := append([]*proc(nil), e.procs...)
	e.mu.Unlock()
	var s string
	for _, p := range procs {
		s += tail(p.logPath, n)
	}
	return s
}

// Processes returns the PID of every server process that was started, by
// name, including any that have since exited.
func (e *Env) Processes() map[string]int {
	e.mu.Lock()
	defer e.mu.Unlock()
	m := map[string]int{}
	for _, p := range e.procs {
		m[p.name] = p.pid()
	}
	return m
}

// Stop stops every server, newest first, then the trace collector, and
// removes the temporary state folder. With real nodes, it first stops
// their kubelets, their Pods and their containerds, and removes what they
// made on the machine (see the package documentation). It is safe to call
// more than once.
func (e *Env) Stop() error {
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil
	}
	e.stopped = true
	procs := append([]*proc(nil), e.procs...)
	proxies := e.proxies
	traces := e.Traces
	admin, rc := e.admin, e.rest
	e.mu.Unlock()
	if admin != nil {
		admin.CloseIdleConnections()
	}
	if rc != nil {
		rc.CloseIdleConnections()
	}
	if e.sharedDir != "" {
		// Another process runs the servers: this one is done with them.
		_ = os.Remove(filepath.Join(e.sharedDir, "users", strconv.Itoa(os.Getpid())))
		return nil
	}
	var errs []error
	// Real nodes first, in their own order (kubelet, the Pods, containerd),
	// and with what they made on the machine.
	if err := e.stopRealNodes(); err != nil {
		errs = append(errs, err)
	}
	for _, p := range proxies {
		_ = p.Close()
	}
	for i := len(procs) - 1; i >= 0; i-- {
		procs[i].stop(e.grace)
	}
	if traces != nil {
		errs = append(errs, traces.Close())
	}
	if e.removeDir {
		if err := os.RemoveAll(e.Dir); err != nil {
			errs = append(errs, fmt.Errorf("testenv: remove state folder: %w", err))
		}
	}
	return errors.Join(errs...)
}

// addProc records and starts a server process.
func (e *Env) addProc(name, bin string, args []string) (*proc, error) {
	p := &proc{name: name, path: bin, args: args, logPath: filepath.Join(e.Dir, name+".log")}
	e.mu.Lock()
	if e.stopped {
		e.mu.Unlock()
		return nil, errors.New("testenv: stopped")
	}
	e.procs = append(e.procs, p)
	e.mu.Unlock()
	if err := p.start(); err != nil {
		return nil, err
	}
	return p, nil
}

// writePKI creates (or, in a kept state folder, reuses) the CA and writes
// the serving certificate, the admin credentials and the service-account
// keys.
func (e *Env) writePKI() error {
	c, err := loadOrCreateCA(e.Dir, "ca", "loom-testenv-ca")
	if err != nil {
		return err
	}
	e.ca, e.CAPEM = c, c.CertPEM
	serving, servingKey, err := issue(c, pki.Request{
		CommonName: "kube-apiserver",
		Server:     true,
		DNSNames:   []string{"localhost", "kubernetes", "kubernetes.default", "kubernetes.default.svc", "kubernetes.default.svc.cluster.local"},
		IPs:        append([]net.IP{net.ParseIP("127.0.0.1"), net.ParseIP("10.0.0.1")}, e.bridgeIPs()...),
	})
	if err != nil {
		return fmt.Errorf("testenv: serving certificate: %w", err)
	}
	e.AdminCertPEM, e.AdminKeyPEM, err = issue(c, pki.Request{CommonName: "loom-admin", Organizations: []string{"system:masters"}})
	if err != nil {
		return fmt.Errorf("testenv: admin certificate: %w", err)
	}
	fp, err := loadOrCreateCA(e.Dir, "front-proxy-ca", "loom-testenv-front-proxy-ca")
	if err != nil {
		return err
	}
	e.FrontProxyCAPEM = fp.CertPEM
	e.FrontProxyClientCertPEM, e.FrontProxyClientKeyPEM, err = issue(fp, pki.Request{CommonName: frontProxyClientName})
	if err != nil {
		return fmt.Errorf("testenv: front-proxy client certificate: %w", err)
	}
	saKey, saPub, err := newServiceAccountKey()
	if err != nil {
		return fmt.Errorf("testenv: service-account key: %w", err)
	}
	tok := make([]byte, 24)
	if _, err := rand.Read(tok); err != nil {
		return err
	}
	e.AdminToken = base64.RawURLEncoding.EncodeToString(tok)
	return writeFiles(map[string][]byte{
		e.path("serving.crt"):            serving,
		e.path("serving.key"):            servingKey,
		e.path("admin.crt"):              e.AdminCertPEM,
		e.path("admin.key"):              e.AdminKeyPEM,
		e.path("front-proxy-client.crt"): e.FrontProxyClientCertPEM,
		e.path("front-proxy-client.key"): e.FrontProxyClientKeyPEM,
		e.path("sa.key"):                 saKey,
		e.path("sa.pub"):                 saPub,
		e.path("tokens.csv"):             []byte(e.AdminToken + ",loom-admin-token,loom-admin-token,\"system:masters\"\n"),
	})
}

func (e *Env) path(name string) string { return filepath.Join(e.Dir, name) }

// UserCert issues a client certificate for user in groups, signed by the CA
// kube-apiserver trusts. No RBAC is granted to the user.
func (e *Env) UserCert(user string, groups ...string) (certPEM, keyPEM []byte, err error) {
	return issue(e.ca, pki.Request{CommonName: user, Organizations: groups})
}

// UserKubeconfig returns a kubeconfig for user in groups, authenticating
// with a new client certificate from UserCert.
func (e *Env) UserKubeconfig(user string, groups ...string) ([]byte, error) {
	cert, key, err := e.UserCert(user, groups...)
	if err != nil {
		return nil, err
	}
	return kubeconfig(e.URL, e.CAPEM, user, cert, key), nil
}

// HTTPClient returns an http.Client that trusts the CA and authenticates as
// the admin with its client certificate. It is for tests that want to speak
// plain HTTP to the API server.
func (e *Env) HTTPClient() (*http.Client, error) {
	cert, err := tls.X509KeyPair(e.AdminCertPEM, e.AdminKeyPEM)
	if err != nil {
		return nil, fmt.Errorf("testenv: admin certificate: %w", err)
	}
	return e.httpClient([]tls.Certificate{cert}), nil
}

func (e *Env) httpClient(certs []tls.Certificate) *http.Client {
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(e.CAPEM)
	return &http.Client{
		Timeout: 30 * time.Second,
		Transport: &http.Transport{
			TLSClientConfig:   &tls.Config{RootCAs: pool, Certificates: certs, MinVersion: tls.VersionTLS12},
			ForceAttemptHTTP2: true,
		},
	}
}

// kubeconfig renders a kubeconfig with one cluster, user and context, all
// named "loom", with the credentials embedded.
func kubeconfig(server string, caPEM []byte, user string, certPEM, keyPEM []byte) []byte {
	b64 := base64.StdEncoding.EncodeToString
	return fmt.Appendf(nil, `apiVersion: v1
kind: Config
clusters:
- name: loom
  cluster:
    server: %s
    certificate-authority-data: %s
users:
- name: %s
  user:
    client-certificate-data: %s
    client-key-data: %s
contexts:
- name: loom
  context:
    cluster: loom
    user: %s
    namespace: default
current-context: loom
`, server, b64(caPEM), strconv.Quote(user), b64(certPEM), b64(keyPEM), strconv.Quote(user))
}

// freePort returns a TCP port on 127.0.0.1 that was free a moment ago.
func freePort() (int, error) { return freePortAt("127.0.0.1") }

// freePorts returns n distinct TCP ports on 127.0.0.1 that were free a
// moment ago. Each is held until all are chosen: ports chosen one after
// the other can be the same port, which the kernel hands out again once
// it is closed.
func freePorts(n int) ([]int, error) {
	ports := make([]int, 0, n)
	for range n {
		l, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			return nil, fmt.Errorf("testenv: find a free port: %w", err)
		}
		defer l.Close()
		ports = append(ports, l.Addr().(*net.TCPAddr).Port)
	}
	return ports, nil
}

// freePortAt returns a TCP port on host that was free a moment ago.
func freePortAt(host string) (int, error) {
	l, err := net.Listen("tcp", net.JoinHostPort(host, "0"))
	if err != nil {
		return 0, fmt.Errorf("testenv: find a free port: %w", err)
	}
	defer l.Close()
	return l.Addr().(*net.TCPAddr).Port, nil
}

// waitFor polls check every interval until it returns true, ctx ends, the
// timeout passes or p exits. The last check error is in the returned error.
func (e *Env) waitFor(ctx context.Context, what string, p *proc, check func(context.Context) (bool, error)) error {
	ctx, cancel := context.WithTimeout(ctx, e.opts.StartTimeout)
	defer cancel()
	var exited <-chan struct{}
	if p != nil {
		exited = p.exited()
	}
	tick := time.NewTicker(100 * time.Millisecond)
	defer tick.Stop()
	var last error
	for {
		ok, err := check(ctx)
		if ok {
			return nil
		}
		if err != nil {
			last = err
		}
		select {
		case <-exited:
			return p.exitErr()
		case <-ctx.Done():
			msg := fmt.Sprintf("testenv: timed out waiting for %s", what)
			if last != nil {
				msg += ": " + last.Error()
			}
			if p != nil {
				msg += "\n" + tail(p.logPath, 20)
			}
			return errors.New(msg)
		case <-tick.C:
		}
	}
}
