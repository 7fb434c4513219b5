package webhook

import (
	"bytes"
	"context"
	"crypto/x509"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/pki"
)

// The files Certs keeps in CertOptions.Dir.
const (
	// ServingCertFile holds the serving certificate (PEM, the leaf only).
	ServingCertFile = "tls.crt"
	// ServingKeyFile holds its private key (PEM, PKCS #8), mode 0600.
	ServingKeyFile = "tls.key"
	// CABundleFile holds the CA bundle (PEM, newest CA first): what clients
	// of the webhook must trust, as CABundle returns it.
	CABundleFile = "ca.crt"
	// CAKeyFile holds the keys of the CAs Certs generated (PEM, PKCS #8,
	// one block per CA of the bundle), mode 0600. It is not written when
	// the CA is given.
	CAKeyFile = "ca.key"
)

// Defaults of CertOptions.
const (
	DefaultCAValidity       = 365 * 24 * time.Hour
	DefaultCertValidity     = 90 * 24 * time.Hour
	DefaultPropagationDelay = time.Minute
)

const (
	// certBackdate is how far before now certificates become valid, so that
	// a client whose clock is a little behind ours accepts a fresh one.
	certBackdate = time.Hour
	// certsMaxWait bounds Start's sleep, so that a machine that was
	// suspended (monotonic timers stand still) catches up within an hour.
	certsMaxWait = time.Hour
	// Retries of failed OnRotate hooks or writes back off from
	// certsMinRetry to certsMaxRetry.
	certsMinRetry = time.Second
	certsMaxRetry = time.Minute
)

// Errors of NewCerts, Ensure and Rotate. Problems with a certificate or
// key come wrapped in a *CertError that names it.
var (
	ErrCertsNoDir  = errors.New("webhook: CertOptions.Dir is required")
	ErrCertsNoSANs = errors.New("webhook: CertOptions needs DNSNames or IPs for the serving certificate")
	// ErrCertsOptions is wrapped by errors about durations and names in
	// CertOptions.
	ErrCertsOptions = errors.New("webhook: invalid CertOptions")
	// ErrCertsGiven is returned by Rotate when the serving pair was given:
	// Certs does not renew what it did not make.
	ErrCertsGiven = errors.New("webhook: the serving certificate was given in CertOptions; Certs does not rotate it")

	ErrCertNoPEM       = errors.New("no PEM data of the expected type")
	ErrCertKeyMismatch = errors.New("the private key does not match the certificate")
	ErrCertNotCA       = errors.New("not a CA certificate")
	ErrCertExpired     = errors.New("the certificate has expired or is not valid yet")
	ErrCertSANs        = errors.New("the certificate does not cover the DNS names and IPs asked for")
	ErrCertNotSigned   = errors.New("the certificate is not signed by the given CA")
)

// CertError says which certificate or key is wrong, and why.
type CertError struct {
	// Source names it: a CertOptions field ("CertOptions.CA.Key") or a
	// file.
	Source string
	// Err is one of the ErrCert sentinels or a parse error.
	Err error
}

func (e *CertError) Error() string { return "webhook: " + e.Source + ": " + e.Err.Error() }

func (e *CertError) Unwrap() error { return e.Err }

// CAKeyPair is a CA given to Certs: it signs the serving certificates and is
// the CA bundle.
type CAKeyPair struct {
	// Cert is the CA certificate, PEM. It may hold several certificates
	// (an old and a new CA while you rotate your own): all of them make up
	// the CA bundle, and the one that matches Key signs.
	Cert []byte
	// Key is the CA's private key, PEM: PKCS #8, SEC 1 (EC) or PKCS #1
	// (RSA).
	Key []byte
}

// CertOptions configure NewCerts. The zero value is not usable: Dir is
// required, and DNSNames or IPs unless the serving pair is given.
type CertOptions struct {
	// Dir is the folder where the serving pair (tls.crt, tls.key), the CA
	// bundle (ca.crt) and the keys of generated CAs (ca.key) are written,
	// and read from on the next start. It is created (mode 0700) if
	// missing. Point ServerOptions.CertDir at it.
	Dir string

	// DNSNames and IPs are the subject alternative names of the serving
	// certificate, such as "at-webhook.at-system.svc" (the name the API
	// server calls a Service by) or 127.0.0.1 (a webhook the API server
	// reaches on this machine, as in tests).
	DNSNames []string
	IPs      []net.IP

	// CA, when set, signs the serving certificates and is the CA bundle.
	// Certs then never makes or rotates a CA: renew it yourself (give one
	// with the old and new CA certificates to rotate without failures).
	// Default nil: Certs generates an ECDSA P-256 CA, keeps it in Dir and
	// renews it before it expires.
	//
	// Several replicas of a webhook with their own Dir each generate their
	// own CA, and their injections would overwrite one another: give them
	// one CA (from a Secret), or the serving pair.
	CA *CAKeyPair

	// ServingCert and ServingKey, when set, are the serving pair (PEM,
	// leaf first, then any chain). Certs only writes them to Dir: it
	// generates nothing and rotates nothing. The CA bundle is then CA.Cert
	// if a CA is given, else the chain after the leaf, else the leaf
	// itself. DNSNames and IPs, if set, must be covered by the leaf.
	ServingCert, ServingKey []byte

	// CAValidity is the lifetime of a generated CA. Default one year: it
	// is renewed 120 days before it expires (with the other defaults), so
	// a CA key that leaked stops being trusted within a year.
	CAValidity time.Duration
	// CertValidity is the lifetime of a generated serving certificate
	// (cut short if its CA expires sooner). Default 90 days.
	CertValidity time.Duration
	// RotateBefore: a serving certificate is renewed when no more than
	// this is left of it. Default a third of CertValidity (30 days by
	// default); it must be shorter than CertValidity. A generated CA is
	// renewed when no more than CertValidity + RotateBefore is left of it
	// (120 days by default), so that the certificates it signs are never
	// cut short; CAValidity must be longer than that.
	RotateBefore time.Duration
	// PropagationDelay is how long a changed CA bundle is given to reach
	// every client, once the OnRotate hooks have published it, before
	// Certs relies on it: the serving certificate switches to a new CA, and
	// an old CA leaves the bundle, only this long after. The API server
	// picks up webhook configuration changes within a second or so.
	// Default one minute.
	PropagationDelay time.Duration
	// HookTimeout bounds each call of the OnRotate hooks: their context
	// ends after it (or when Start's context ends). Default 30 s.
	HookTimeout time.Duration

	// Logger receives what Certs generates and rotates (never keys). Nil
	// means discard.
	Logger *slog.Logger

	clock clock.Clock // tests fake time through export_test.go; nil means the real clock
}

// Certs makes and renews the certificates of a webhook server without
// cert-manager: a CA, a serving certificate signed by it for the webhook's
// DNS names and IPs, and the CA bundle that the API server must trust,
// which Injector writes into webhook configurations and CRDs.
//
// Call Ensure before the server starts, register OnRotate hooks (usually an
// Injector), then run Start (it is a manager.Runnable). Renewals cause no
// failed webhook calls: a serving certificate is renewed with the same CA,
// so the bundle stays as it is; a new CA is first published in the bundle
// next to the old one, and signs serving certificates only once the hooks
// have published it and PropagationDelay has passed; the old CA leaves the
// bundle PropagationDelay after the switch.
//
// Files are replaced by rename, so a reader never sees a torn file.
// The serving certificate is written before its key; for the short time
// between, Server keeps the old pair.
//
// Certs is safe for concurrent use.
type Certs struct {
	// Each step sums up the certificates (state; Ensure first reads Dir
	// through store), asks planCerts what is due, carries the plan out
	// (carryOut: generate, write), and then publishes the bundle through
	// the hooks without holding rot (publish).
	opts         CertOptions
	policy       certPolicy
	store        certStore
	clock        clock.Clock
	log          *slog.Logger
	givenCAs     []*certsCA    // the given CA's certificates; nil when Certs generates its CA
	givenServing *certsLeaf    // the given serving pair; nil when Certs generates it
	givenBundle  []byte        // the bundle with a given serving pair
	wake         chan struct{} // Rotate tells Start to re-plan

	rot sync.Mutex // serializes Ensure, Rotate and Start's steps; never held while hooks run
	pub sync.Mutex // serializes the calls of the hooks
	// Guarded by rot.
	ensured    bool
	cas        []*certsCA // newest first
	leaf       *certsLeaf // nil until Ensure
	leafIssuer *certsCA   // the CA of cas that signed leaf; nil if none
	leafSince  time.Time  // when leaf was written or loaded
	unhooked   bool       // the hooks have not yet succeeded with the bundle as it is
	retryAt    time.Time  // when to retry failed hooks or writes
	retryDelay time.Duration

	mu     sync.Mutex // guards bundle and hooks
	bundle []byte
	hooks  []func(ctx context.Context, caBundle []byte) error
}

// NewCerts checks opts and returns a Certs. It reads and writes no file;
// Ensure does.
func NewCerts(opts CertOptions) (*Certs, error) {
	if opts.Dir == "" {
		return nil, ErrCertsNoDir
	}
	for _, n := range opts.DNSNames {
		if n == "" {
			return nil, fmt.Errorf("%w: empty DNS name in DNSNames", ErrCertsOptions)
		}
	}
	for _, ip := range opts.IPs {
		if len(ip) != net.IPv4len && len(ip) != net.IPv6len {
			return nil, fmt.Errorf("%w: invalid IP %v in IPs", ErrCertsOptions, ip)
		}
	}
	given := len(opts.ServingCert) > 0 || len(opts.ServingKey) > 0
	if !given && len(opts.DNSNames) == 0 && len(opts.IPs) == 0 {
		return nil, ErrCertsNoSANs
	}
	if opts.CAValidity < 0 || opts.CertValidity < 0 || opts.RotateBefore < 0 || opts.PropagationDelay < 0 {
		return nil, fmt.Errorf("%w: negative duration", ErrCertsOptions)
	}
	if opts.CAValidity == 0 {
		opts.CAValidity = DefaultCAValidity
	}
	if opts.CertValidity == 0 {
		opts.CertValidity = DefaultCertValidity
	}
	if opts.RotateBefore == 0 {
		opts.RotateBefore = opts.CertValidity / 3
	}
	if opts.PropagationDelay == 0 {
		opts.PropagationDelay = DefaultPropagationDelay
	}
	if opts.HookTimeout <= 0 {
		opts.HookTimeout = 30 * time.Second
	}
	if opts.RotateBefore >= opts.CertValidity {
		return nil, fmt.Errorf("%w: RotateBefore (%v) must be shorter than CertValidity (%v)", ErrCertsOptions, opts.RotateBefore, opts.CertValidity)
	}
	caRenew := opts.CertValidity + opts.RotateBefore
	if opts.CA == nil && !given && opts.CAValidity <= caRenew {
		return nil, fmt.Errorf("%w: CAValidity (%v) must be longer than CertValidity + RotateBefore (%v)", ErrCertsOptions, opts.CAValidity, caRenew)
	}
	log := opts.Logger
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	c := &Certs{
		opts: opts,
		policy: certPolicy{
			DNSNames:         slices.Clone(opts.DNSNames),
			IPs:              slices.Clone(opts.IPs),
			CAValidity:       opts.CAValidity,
			CertValidity:     opts.CertValidity,
			RotateBefore:     opts.RotateBefore,
			PropagationDelay: opts.PropagationDelay,
			CARenew:          caRenew,
			GivenCA:          opts.CA != nil,
			GivenServing:     given,
		},
		store: certStore{dir: opts.Dir},
		clock: clock.OrReal(opts.clock),
		log:   log,
		wake:  make(chan struct{}, 1),
	}
	now := c.clock.Now()
	if opts.CA != nil {
		cas, err := parseGivenCA(opts.CA, now)
		if err != nil {
			return nil, err
		}
		c.givenCAs = cas
	}
	if given {
		leaf, err := parseCertsLeaf(opts.ServingCert, opts.ServingKey, "CertOptions.ServingCert", "CertOptions.ServingKey")
		if err != nil {
			return nil, err
		}
		if err := checkGivenLeaf(leaf, opts, c.givenCAs, now); err != nil {
			return nil, err
		}
		c.givenServing = leaf
		switch {
		case c.givenCAs != nil:
			c.givenBundle = joinCAPEM(c.givenCAs)
		case leaf.bundleFromChain != nil:
			c.givenBundle = leaf.bundleFromChain
		default:
			c.givenBundle = leaf.certPEM
		}
	}
	return c, nil
}

// CABundle returns the CA bundle (PEM) that clients of the webhook must
// trust: nil before Ensure. While a generated CA is being replaced it holds
// the new and the old CA, so that a client trusting it accepts a serving
// certificate signed by either.
func (c *Certs) CABundle() []byte {
	c.mu.Lock()
	defer c.mu.Unlock()
	return bytes.Clone(c.bundle)
}

// OnRotate registers f to be called with the CA bundle each time it
// changes (by Start or Rotate), and once when Start starts. Register hooks
// before Start. An error from any hook makes Certs call them all again
// later (with backoff, up to a minute apart), and holds back a switch to a
// new CA until they succeed; hooks must therefore be idempotent, as
// Injector.Inject is. Hooks run one at a time, with a context that ends
// after HookTimeout, and hold no lock of Certs: a slow hook delays only
// the next publication, and may call CABundle (but not Rotate, which
// would wait for it).
func (c *Certs) OnRotate(f func(ctx context.Context, caBundle []byte) error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.hooks = append(c.hooks, f)
}

// ErrCertsNotGivenCA is returned by SetCA on a Certs made without
// CertOptions.CA: one that generates its own CA.
var ErrCertsNotGivenCA = errors.New("webhook: SetCA needs a Certs made with CertOptions.CA")

// SetCA replaces the given CA (CertOptions.CA) while Certs runs, as
// SharedCA does when its Secret changes: the bundle becomes ca.Cert, and
// when the CA that signs (the one matching ca.Key) is another, the serving
// certificate is renewed with it at once. A certificate that the bundle
// still trusts is kept otherwise. It checks ca as NewCerts does, and
// returns ErrCertsNotGivenCA for a Certs that generates its CA or was given
// its serving pair.
func (c *Certs) SetCA(ca CAKeyPair) error {
	if !c.policy.GivenCA || c.givenServing != nil {
		return ErrCertsNotGivenCA
	}
	cas, err := parseGivenCA(&ca, c.clock.Now())
	if err != nil {
		return err
	}
	c.rot.Lock()
	c.givenCAs = cas
	if c.ensured {
		c.cas = cas
		c.leafIssuer = nil
		if c.leaf != nil {
			c.leafIssuer = c.issuerOf(c.leaf.cert)
		}
		if _, err := c.step(false); err != nil {
			c.rot.Unlock()
			return err
		}
	}
	c.rot.Unlock()
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// Ensure makes the certificates ready: it loads the files in Dir and
// keeps them if they are valid (a serving certificate for the same DNS
// names and IPs, signed by a CA of the bundle, with more than RotateBefore
// left, and a matching key), and otherwise generates what is missing or
// stale. It writes the files, so that after it CABundle is ready and a
// Server can load the pair. It does not call the OnRotate hooks; Start does,
// when it starts. Calling Ensure again reloads the files.
func (c *Certs) Ensure() error {
	c.rot.Lock()
	defer c.rot.Unlock()
	if err := c.load(); err != nil {
		return err
	}
	c.ensured = true
	_, err := c.step(false)
	return err
}

// Rotate renews the serving certificate now, with the CA that is in
// service, and calls the OnRotate hooks (with ctx) if the bundle changed or
// has not been published yet (a first call, or an earlier call of them
// failed), returning their error. If a generated CA is due for renewal, it
// starts the CA rotation: the new CA joins the bundle now, and the serving
// certificate switches to it PropagationDelay after the hooks published it
// (done by Start, or by a later Rotate). It returns ErrCertsGiven when the
// serving pair was given, and calls Ensure first if it was not called.
func (c *Certs) Rotate(ctx context.Context) error {
	if c.givenServing != nil {
		return ErrCertsGiven
	}
	c.rot.Lock()
	if !c.ensured {
		if err := c.load(); err != nil {
			c.rot.Unlock()
			return err
		}
		c.ensured = true
	}
	c.retryAt = time.Time{} // retry failed hooks now
	pl, err := c.step(true)
	c.rot.Unlock()
	if err == nil && pl.Publish {
		err = c.publish(ctx)
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return err
}

// Start keeps the certificates fresh until ctx ends, then returns nil.
// It calls Ensure first if it was not called (and returns its error), then
// the OnRotate hooks with the current bundle, and then sleeps on the
// clock's timers until the next thing is due: a serving certificate to
// renew, a CA to renew, a switch to a new CA, an old CA to drop, or hooks
// to retry. Errors on the way (a failed hook, a file that cannot be
// written) are logged and retried with backoff.
func (c *Certs) Start(ctx context.Context) error {
	c.rot.Lock()
	if !c.ensured {
		if err := c.load(); err != nil {
			c.rot.Unlock()
			return err
		}
		c.ensured = true
	}
	c.unhooked = true // publish the bundle at start
	c.retryAt = time.Time{}
	c.rot.Unlock()
	for {
		c.rot.Lock()
		pl, err := c.step(false)
		next := c.retryAt
		c.rot.Unlock()
		if err == nil {
			if pl.Publish {
				err = c.publish(ctx)
			}
			// Publishing may have made a CA trusted, and another
			// goroutine may have stepped meanwhile: plan the wake-up from
			// the state as it is now.
			c.rot.Lock()
			next, _ = nextDue(c.state(c.clock.Now(), false), c.policy)
			c.rot.Unlock()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.log.Error("webhook: certificates", "err", err)
		}
		wait := certsMaxWait
		if !next.IsZero() {
			wait = min(next.Sub(c.clock.Now()), certsMaxWait)
		}
		if wait <= 0 {
			wait = certsMinRetry
		}
		t := c.clock.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return nil
		case <-t.C():
		case <-c.wake:
			t.Stop()
		}
	}
}

// load reads the files of Dir into c, keeping what is known of the trust
// of CAs already loaded. rot must be held.
func (c *Certs) load() error {
	if err := c.store.prepare(); err != nil {
		return err
	}
	old := c.cas
	c.unhooked = true
	c.leafSince = c.clock.Now()
	switch {
	case c.givenServing != nil:
		c.cas = c.givenCAs
		c.leaf = c.givenServing
		c.leafIssuer = nil
		return nil
	case c.givenCAs != nil:
		c.cas = c.givenCAs
	default:
		c.cas = c.store.loadCAs()
	}
	for _, ca := range c.cas {
		for _, o := range old {
			if bytes.Equal(ca.Cert.Raw, o.Cert.Raw) && ca.trustedAt.IsZero() {
				ca.trustedAt = o.trustedAt
			}
		}
	}
	c.leaf, c.leafIssuer = nil, nil
	leaf, err := c.store.loadServing()
	if err != nil {
		c.log.Warn("webhook: serving certificate in the folder is unusable; a new one will be made", "dir", c.opts.Dir, "err", err)
		return nil
	}
	if leaf != nil {
		c.leaf = leaf
		c.leafIssuer = c.issuerOf(leaf.cert)
	}
	return nil
}

// issuerOf returns the CA of c.cas whose key signed cert, or nil.
func (c *Certs) issuerOf(cert *x509.Certificate) *certsCA {
	for _, ca := range c.cas {
		if cert.CheckSignatureFrom(ca.Cert) == nil {
			return ca
		}
	}
	return nil
}

// state sums up c for the plan. rot must be held.
func (c *Certs) state(now time.Time, force bool) certState {
	s := certState{
		Now:         now,
		Force:       force,
		BundleStale: !bytes.Equal(c.bundleOf(), c.CABundle()),
		Unpublished: c.unhooked,
		RetryAt:     c.retryAt,
	}
	for _, ca := range c.cas {
		s.CAs = append(s.CAs, caState{NotBefore: ca.Cert.NotBefore, NotAfter: ca.Cert.NotAfter, Key: ca.Key != nil, TrustedAt: ca.trustedAt})
	}
	if l := c.leaf; l != nil {
		s.Leaf = &leafState{
			NotBefore: l.cert.NotBefore, NotAfter: l.cert.NotAfter,
			DNSNames: l.cert.DNSNames, IPs: l.cert.IPAddresses,
			Issuer: slices.Index(c.cas, c.leafIssuer), Since: c.leafSince,
		}
	}
	return s
}

// bundleOf returns the bundle of the CAs as they are. rot must be held.
func (c *Certs) bundleOf() []byte {
	if c.givenServing != nil {
		return c.givenBundle
	}
	return joinCAPEM(c.cas)
}

// step brings the certificates up to date at the clock's current time:
// it plans, and carries the plan out. It returns the plan, whose Publish
// says whether to call publish next. A failure schedules a retry with
// backoff (c.retryAt). rot must be held.
func (c *Certs) step(force bool) (certPlan, error) {
	now := c.clock.Now()
	pl := planCerts(c.state(now, force), c.policy)
	if err := c.carryOut(now, pl); err != nil {
		c.failed(now)
		return pl, err
	}
	return pl, nil
}

// carryOut does what pl asks, in its order, and writes the files. On an
// error it stops: what was done stays done (in memory and on disk), and the
// next plan starts from there. rot must be held.
func (c *Certs) carryOut(now time.Time, pl certPlan) error {
	if pl.Err != nil {
		return pl.Err
	}
	planned := slices.Clone(c.cas) // what the plan's indexes refer to
	drop := func(idx []int, msg string) {
		for _, i := range idx {
			c.log.Info(msg, "serial", planned[i].Cert.SerialNumber.Text(16))
		}
		c.cas = slices.DeleteFunc(c.cas, func(ca *certsCA) bool {
			return slices.ContainsFunc(idx, func(i int) bool { return planned[i] == ca })
		})
		if c.leafIssuer != nil && !slices.Contains(c.cas, c.leafIssuer) {
			c.leafIssuer = nil
		}
	}
	drop(pl.Expired, "webhook: expired CA dropped from the bundle")
	var fresh *certsCA
	if pl.NewCA != "" {
		ca, err := pki.NewCA(fmt.Sprintf("loom-webhook-ca@%d", now.Unix()), now, now.Add(c.opts.CAValidity))
		if err != nil {
			return fmt.Errorf("webhook: generating a CA: %w", err)
		}
		fresh = &certsCA{CA: *ca}
		c.log.Info("webhook: CA generated", "reason", pl.NewCA, "serial", ca.Cert.SerialNumber.Text(16), "notAfter", ca.Cert.NotAfter)
		c.cas = slices.Insert(c.cas, 0, fresh)
		if err := c.store.writeCAs(c.cas); err != nil {
			return err
		}
	}
	if r := pl.Renew; r != nil {
		signer := fresh
		if r.Signer != newCA {
			signer = planned[r.Signer]
		}
		if err := c.issueLeaf(now, signer, r); err != nil {
			return err
		}
	}
	if len(pl.Retired) > 0 {
		drop(pl.Retired, "webhook: old CA dropped from the bundle")
		if err := c.store.writeCAs(c.cas); err != nil {
			return err
		}
	}
	if pl.BundleChanged {
		c.mu.Lock()
		c.bundle = c.bundleOf()
		c.mu.Unlock()
		c.unhooked = true
		c.retryAt, c.retryDelay = time.Time{}, 0
	}
	// ca.crt, and a given serving pair, unless the files hold them
	// already.
	if c.givenServing != nil {
		if err := c.store.writeServing(c.givenServing); err != nil {
			return err
		}
	}
	return c.store.writeBundle(c.CABundle())
}

// issueLeaf makes a serving certificate signed by ca, as r asks, and
// writes the pair. rot must be held.
func (c *Certs) issueLeaf(now time.Time, ca *certsCA, r *renewal) error {
	if r.CutShort {
		c.log.Warn("webhook: serving certificate cut short by its CA's expiry; renew the CA", "caNotAfter", ca.Cert.NotAfter)
	}
	cn := ""
	if len(c.opts.DNSNames) > 0 {
		cn = c.opts.DNSNames[0]
	} else {
		cn = c.opts.IPs[0].String()
	}
	pair, err := ca.Issue(pki.Request{
		CommonName: cn,
		DNSNames:   c.opts.DNSNames,
		IPs:        c.opts.IPs,
		Server:     true,
		NotAfter:   now.Add(c.opts.CertValidity),
	}, now)
	if err != nil {
		return fmt.Errorf("webhook: serving certificate: %w", err)
	}
	leaf := &certsLeaf{cert: pair.Cert, certPEM: pair.CertPEM, keyPEM: pair.KeyPEM}
	if err := c.store.writeServing(leaf); err != nil {
		return err
	}
	c.leaf, c.leafIssuer, c.leafSince = leaf, ca, now
	c.log.Info("webhook: serving certificate written", "reason", r.Reason, "serial", pair.Cert.SerialNumber.Text(16),
		"ca", ca.Cert.SerialNumber.Text(16), "notAfter", pair.Cert.NotAfter, "dir", c.opts.Dir)
	return nil
}

// publish calls the OnRotate hooks with the current bundle if it has not
// been published yet and no retry is pending, without holding rot, and
// records the outcome: the CAs of the bundle published count as trusted
// from now. If the bundle changed while the hooks ran, it stays
// unpublished, to be published next.
func (c *Certs) publish(ctx context.Context) error {
	c.pub.Lock()
	defer c.pub.Unlock()
	c.rot.Lock()
	// Checked again: another caller may have published since the plan.
	if !publishDue(c.unhooked, c.retryAt, c.clock.Now()) {
		c.rot.Unlock()
		return nil
	}
	c.mu.Lock()
	bundle, hooks := c.bundle, slices.Clone(c.hooks)
	c.mu.Unlock()
	published := slices.Clone(c.cas)
	c.rot.Unlock()

	err := c.callHooks(ctx, hooks, bundle)

	c.rot.Lock()
	defer c.rot.Unlock()
	now := c.clock.Now()
	if err != nil {
		c.failed(now)
		return err
	}
	c.retryAt, c.retryDelay = time.Time{}, 0
	for _, ca := range published {
		if ca.trustedAt.IsZero() {
			ca.trustedAt = now
		}
	}
	c.mu.Lock()
	changed := !bytes.Equal(bundle, c.bundle)
	c.mu.Unlock()
	c.unhooked = changed
	return nil
}

// failed schedules a retry with backoff. rot must be held.
func (c *Certs) failed(now time.Time) {
	c.retryDelay = retryDelay(c.retryDelay)
	c.retryAt = now.Add(c.retryDelay)
}

// callHooks calls every hook with the bundle; it returns their errors
// joined.
func (c *Certs) callHooks(ctx context.Context, hooks []func(context.Context, []byte) error, bundle []byte) error {
	ctx, cancel := context.WithTimeout(ctx, c.opts.HookTimeout)
	defer cancel()
	var errs []error
	for _, h := range hooks {
		if err := h(ctx, bytes.Clone(bundle)); err != nil {
			errs = append(errs, err)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return fmt.Errorf("webhook: publishing the CA bundle: %w", err)
	}
	if len(hooks) > 0 {
		c.log.Info("webhook: CA bundle published", "cas", bytes.Count(bundle, []byte("-----BEGIN CERTIFICATE-----")))
	}
	return nil
}

// parseGivenCA reads CertOptions.CA: the CA matching the key first (it
// signs), then the others of the bundle.
func parseGivenCA(given *CAKeyPair, now time.Time) ([]*certsCA, error) {
	certs := pki.DecodeCerts(given.Cert)
	if len(certs) == 0 {
		return nil, &CertError{Source: "CertOptions.CA.Cert", Err: ErrCertNoPEM}
	}
	keys, err := decodeKeys(given.Key)
	if err != nil {
		return nil, &CertError{Source: "CertOptions.CA.Key", Err: err}
	}
	var signer *certsCA
	var cas []*certsCA
	for _, cert := range certs {
		if !cert.IsCA || !cert.BasicConstraintsValid {
			return nil, &CertError{Source: "CertOptions.CA.Cert", Err: fmt.Errorf("%w: %q", ErrCertNotCA, cert.Subject.CommonName)}
		}
		ca := &certsCA{CA: pki.CA{Cert: cert, CertPEM: pki.EncodeCert(cert)}}
		if signer == nil && pki.Matches(cert, keys[0]) {
			ca.Key, signer = keys[0], ca
		}
		cas = append(cas, ca)
	}
	if signer == nil {
		return nil, &CertError{Source: "CertOptions.CA.Key", Err: ErrCertKeyMismatch}
	}
	if now.Before(signer.Cert.NotBefore) || !now.Before(signer.Cert.NotAfter) {
		return nil, &CertError{Source: "CertOptions.CA.Cert", Err: fmt.Errorf("%w (valid %v to %v)", ErrCertExpired, signer.Cert.NotBefore, signer.Cert.NotAfter)}
	}
	i := slices.Index(cas, signer)
	cas[0], cas[i] = cas[i], cas[0]
	return cas, nil
}

// checkGivenLeaf checks a given serving pair against the options.
func checkGivenLeaf(leaf *certsLeaf, opts CertOptions, cas []*certsCA, now time.Time) error {
	const src = "CertOptions.ServingCert"
	if now.Before(leaf.cert.NotBefore) || !now.Before(leaf.cert.NotAfter) {
		return &CertError{Source: src, Err: fmt.Errorf("%w (valid %v to %v)", ErrCertExpired, leaf.cert.NotBefore, leaf.cert.NotAfter)}
	}
	for _, n := range opts.DNSNames {
		if leaf.cert.VerifyHostname(n) != nil {
			return &CertError{Source: src, Err: fmt.Errorf("%w: %q", ErrCertSANs, n)}
		}
	}
	for _, ip := range opts.IPs {
		if leaf.cert.VerifyHostname(ip.String()) != nil {
			return &CertError{Source: src, Err: fmt.Errorf("%w: %v", ErrCertSANs, ip)}
		}
	}
	if cas != nil && !slices.ContainsFunc(cas, func(ca *certsCA) bool { return leaf.cert.CheckSignatureFrom(ca.Cert) == nil }) {
		return &CertError{Source: src, Err: ErrCertNotSigned}
	}
	return nil
}
