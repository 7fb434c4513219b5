package webhook

import (
	"bytes"
	"context"
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
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
	DefaultCAValidity       = 10 * 365 * 24 * time.Hour
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

	// CAValidity is the lifetime of a generated CA. Default 10 years.
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

	// Clock tells the time and paces Start. Nil means the real clock.
	Clock clock.Clock
	// Logger receives what Certs generates and rotates (never keys). Nil
	// means discard.
	Logger *slog.Logger
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
	opts         CertOptions
	clock        clock.Clock
	log          *slog.Logger
	caRenew      time.Duration // renew a generated CA when less than this is left
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

// certsCA is a CA of the bundle.
type certsCA struct {
	cert *x509.Certificate
	pem  []byte
	key  crypto.Signer // nil when Certs cannot sign with it
	// trustedAt is when hooks first succeeded with a bundle holding this
	// CA; zero while not known.
	trustedAt time.Time
}

// certsLeaf is a serving pair.
type certsLeaf struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
	bundleFromChain []byte
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
		opts:    opts,
		clock:   clock.OrReal(opts.Clock),
		log:     log,
		caRenew: caRenew,
		wake:    make(chan struct{}, 1),
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
	_, err := c.step(true)
	c.rot.Unlock()
	if err == nil {
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
		next, err := c.step(false)
		c.rot.Unlock()
		if err == nil {
			err = c.publish(ctx)
			c.rot.Lock()
			next = c.nextDue(c.clock.Now()) // publishing may have made a CA trusted
			c.rot.Unlock()
		}
		if ctx.Err() != nil {
			return nil
		}
		if err != nil {
			c.log.Error("webhook: certificates", "err", err)
		}
		wait := min(next.Sub(c.clock.Now()), certsMaxWait)
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

// load reads the files of Dir into c. rot must be held.
func (c *Certs) load() error {
	if err := os.MkdirAll(c.opts.Dir, 0o700); err != nil {
		return fmt.Errorf("webhook: certificate folder: %w", err)
	}
	now := c.clock.Now()
	old := c.cas
	c.unhooked = true
	c.leafSince = now
	switch {
	case c.givenServing != nil:
		c.cas = c.givenCAs
		c.leaf = c.givenServing
		c.leafIssuer = nil
		return nil
	case c.givenCAs != nil:
		c.cas = c.givenCAs
	default:
		c.cas = c.loadCAs(now)
	}
	// Keep what is known of the trust of CAs already loaded.
	for _, ca := range c.cas {
		for _, o := range old {
			if bytes.Equal(ca.cert.Raw, o.cert.Raw) && ca.trustedAt.IsZero() {
				ca.trustedAt = o.trustedAt
			}
		}
	}
	c.leaf, c.leafIssuer = nil, nil
	certPEM, err1 := os.ReadFile(filepath.Join(c.opts.Dir, ServingCertFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(c.opts.Dir, ServingKeyFile))
	if err1 != nil || err2 != nil {
		return nil
	}
	leaf, err := parseCertsLeaf(certPEM, keyPEM, ServingCertFile, ServingKeyFile)
	if err != nil {
		c.log.Warn("webhook: serving certificate in the folder is unusable; a new one will be made", "dir", c.opts.Dir, "err", err)
		return nil
	}
	c.leaf = leaf
	c.leafIssuer = c.issuerOf(leaf.cert)
	return nil
}

// loadCAs reads the generated CAs and their keys from Dir, newest first,
// skipping expired ones. Unreadable files count as none: the CA is then
// made anew.
func (c *Certs) loadCAs(now time.Time) []*certsCA {
	bundlePEM, err := os.ReadFile(filepath.Join(c.opts.Dir, CABundleFile))
	if err != nil {
		return nil
	}
	keys, _ := parseKeysPEM(readOptional(filepath.Join(c.opts.Dir, CAKeyFile)))
	var cas []*certsCA
	for _, cert := range parseCertsPEM(bundlePEM) {
		if !cert.IsCA || !now.Before(cert.NotAfter) || slices.ContainsFunc(cas, func(o *certsCA) bool { return bytes.Equal(o.cert.Raw, cert.Raw) }) {
			continue
		}
		ca := &certsCA{cert: cert, pem: certPEMOf(cert)}
		for _, k := range keys {
			if publicKeysEqual(cert.PublicKey, k.Public()) {
				ca.key = k
			}
		}
		cas = append(cas, ca)
	}
	sort.SliceStable(cas, func(i, j int) bool { return cas[i].cert.NotBefore.After(cas[j].cert.NotBefore) })
	return cas
}

// issuerOf returns the CA of c.cas whose key signed cert, or nil.
func (c *Certs) issuerOf(cert *x509.Certificate) *certsCA {
	for _, ca := range c.cas {
		if cert.CheckSignatureFrom(ca.cert) == nil {
			return ca
		}
	}
	return nil
}

// step brings the certificates up to date at the clock's current time:
// it renews what is due (everything it can when force) and writes the
// files; publish then calls the hooks if the bundle has not been
// published. It returns when the next thing falls due. rot must be held.
func (c *Certs) step(force bool) (next time.Time, err error) {
	now := c.clock.Now()
	if c.givenServing == nil {
		if err := c.renew(now, force); err != nil {
			c.failed(now)
			return c.retryAt, err
		}
	}
	c.setBundle()
	if err := c.writeBundle(); err != nil {
		c.failed(now)
		return c.retryAt, err
	}
	return c.nextDue(now), nil
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
	now := c.clock.Now()
	if !c.unhooked || now.Before(c.retryAt) {
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
	now = c.clock.Now()
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

// failed schedules a retry with backoff.
func (c *Certs) failed(now time.Time) {
	c.retryDelay = min(max(2*c.retryDelay, certsMinRetry), certsMaxRetry)
	c.retryAt = now.Add(c.retryDelay)
}

// renew generates whatever is due in the generated (not given) serving
// certificate and CA. rot must be held.
func (c *Certs) renew(now time.Time, force bool) error {
	generated := c.givenCAs == nil
	if generated {
		// Expired CAs verify nothing: drop them.
		c.cas = slices.DeleteFunc(c.cas, func(ca *certsCA) bool { return !now.Before(ca.cert.NotAfter) })
		if c.leafIssuer != nil && !slices.Contains(c.cas, c.leafIssuer) {
			c.leafIssuer = nil
		}
		if len(c.cas) == 0 || c.cas[0].key == nil || c.cas[0].cert.NotAfter.Sub(now) <= c.caRenew {
			ca, err := c.newCA(now)
			if err != nil {
				return err
			}
			c.cas = append([]*certsCA{ca}, c.cas...)
			// The key first: a key without its certificate is ignored on
			// load, a certificate without its key could not sign.
			if err := c.writeCAFiles(); err != nil {
				return err
			}
		}
	} else if !now.Before(c.cas[0].cert.NotAfter) {
		return &CertError{Source: "CertOptions.CA.Cert", Err: ErrCertExpired}
	}

	trusted := c.trustedSigner(now)
	reason := ""
	signer := trusted
	switch {
	case c.leaf == nil:
		reason = "no serving certificate"
	case c.leafIssuer == nil:
		reason = "serving certificate not signed by a CA of the bundle"
	case !sameSANs(c.leaf.cert, c.opts.DNSNames, c.opts.IPs):
		reason = "serving certificate for other DNS names or IPs"
	case now.Before(c.leaf.cert.NotBefore) || !now.Before(c.leaf.cert.NotAfter):
		reason = "serving certificate expired"
	}
	if reason != "" {
		// Nothing works now: sign with the best CA there is.
		if signer == nil {
			signer = c.newestSigner()
		}
	} else {
		switch {
		case trusted != nil && trusted != c.leafIssuer:
			reason = "switch to the new CA"
		case force:
			reason = "rotation asked for"
			if trusted == nil {
				signer = c.newestSigner()
			}
		case trusted != nil && c.leafDue(now, trusted):
			reason = "serving certificate due for renewal"
		}
	}
	if reason != "" {
		if err := c.issueLeaf(now, signer, reason); err != nil {
			return err
		}
	}

	if generated && c.leafIssuer != nil {
		// CAs older than the one in service leave the bundle once every
		// server has had time to load the serving certificate.
		i := slices.Index(c.cas, c.leafIssuer)
		if i >= 0 && i < len(c.cas)-1 && !now.Before(c.leafSince.Add(c.opts.PropagationDelay)) {
			for _, ca := range c.cas[i+1:] {
				c.log.Info("webhook: old CA dropped from the bundle", "serial", ca.cert.SerialNumber.Text(16))
			}
			c.cas = c.cas[:i+1]
			if err := c.writeCAFiles(); err != nil {
				return err
			}
		}
	}
	return nil
}

// trustedSigner returns the newest CA with a key that clients are known to
// trust: the one that signed the serving certificate in service, or one the
// hooks published at least PropagationDelay ago. Nil if none.
func (c *Certs) trustedSigner(now time.Time) *certsCA {
	for _, ca := range c.cas {
		if ca.key == nil {
			continue
		}
		if ca == c.leafIssuer || c.givenCAs != nil {
			return ca
		}
		if !ca.trustedAt.IsZero() && !now.Before(ca.trustedAt.Add(c.opts.PropagationDelay)) {
			return ca
		}
	}
	return nil
}

// newestSigner returns the newest CA with a key.
func (c *Certs) newestSigner() *certsCA {
	for _, ca := range c.cas {
		if ca.key != nil {
			return ca
		}
	}
	return nil
}

// leafDue reports whether the serving certificate has less than
// RotateBefore left and a renewal by signer would last longer.
func (c *Certs) leafDue(now time.Time, signer *certsCA) bool {
	return c.leaf.cert.NotAfter.Sub(now) <= c.opts.RotateBefore && signer.cert.NotAfter.After(c.leaf.cert.NotAfter)
}

// nextDue returns when step has something to do next. rot must be held.
func (c *Certs) nextDue(now time.Time) time.Time {
	next := now.Add(certsMaxWait)
	at := func(t time.Time) {
		if t.After(now) && t.Before(next) {
			next = t
		}
	}
	if c.unhooked && !c.retryAt.IsZero() {
		at(c.retryAt)
	}
	if c.givenServing != nil {
		return next
	}
	if c.leaf != nil {
		at(c.leaf.cert.NotAfter)
		if signer := c.trustedSigner(now); signer != nil && signer.cert.NotAfter.After(c.leaf.cert.NotAfter) {
			at(c.leaf.cert.NotAfter.Add(-c.opts.RotateBefore))
		}
	}
	for i, ca := range c.cas {
		at(ca.cert.NotAfter)
		if i == 0 && c.givenCAs == nil {
			at(ca.cert.NotAfter.Add(-c.caRenew))
		}
		if ca != c.leafIssuer && !ca.trustedAt.IsZero() && ca.key != nil {
			at(ca.trustedAt.Add(c.opts.PropagationDelay))
		}
	}
	if i := slices.Index(c.cas, c.leafIssuer); i >= 0 && i < len(c.cas)-1 {
		at(c.leafSince.Add(c.opts.PropagationDelay))
	}
	return next
}

// newCA generates a CA.
func (c *Certs) newCA(now time.Time) (*certsCA, error) {
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("webhook: generating a CA key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: fmt.Sprintf("loom-webhook-ca@%d", now.Unix())},
		NotBefore:             now.Add(-certBackdate),
		NotAfter:              now.Add(c.opts.CAValidity),
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("webhook: making a CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, err
	}
	c.log.Info("webhook: CA generated", "serial", cert.SerialNumber.Text(16), "notAfter", cert.NotAfter)
	return &certsCA{cert: cert, pem: certPEMOf(cert), key: key}, nil
}

// issueLeaf makes a serving certificate signed by ca and writes the pair.
func (c *Certs) issueLeaf(now time.Time, ca *certsCA, reason string) error {
	if ca == nil {
		return &CertError{Source: "CertOptions.CA", Err: errors.New("no CA key to sign with")}
	}
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return fmt.Errorf("webhook: generating a serving key: %w", err)
	}
	serial, err := randomSerial()
	if err != nil {
		return err
	}
	notAfter := now.Add(c.opts.CertValidity)
	if ca.cert.NotAfter.Before(notAfter) {
		notAfter = ca.cert.NotAfter
		c.log.Warn("webhook: serving certificate cut short by its CA's expiry; renew the CA", "caNotAfter", notAfter)
	}
	cn := ""
	if len(c.opts.DNSNames) > 0 {
		cn = c.opts.DNSNames[0]
	} else {
		cn = c.opts.IPs[0].String()
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: cn},
		DNSNames:              slices.Clone(c.opts.DNSNames),
		IPAddresses:           slices.Clone(c.opts.IPs),
		NotBefore:             now.Add(-certBackdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, key.Public(), ca.key)
	if err != nil {
		return fmt.Errorf("webhook: signing the serving certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return err
	}
	keyPEM, err := keyPEMOf(key)
	if err != nil {
		return err
	}
	leaf := &certsLeaf{cert: cert, certPEM: certPEMOf(cert), keyPEM: keyPEM}
	// The certificate first, then the key: a Server that looks in between
	// finds a pair that does not match and keeps the old one.
	if err := writeFileAtomic(c.opts.Dir, ServingCertFile, leaf.certPEM, 0o644); err != nil {
		return err
	}
	if err := writeFileAtomic(c.opts.Dir, ServingKeyFile, leaf.keyPEM, 0o600); err != nil {
		return err
	}
	c.leaf, c.leafIssuer, c.leafSince = leaf, ca, now
	c.log.Info("webhook: serving certificate written", "reason", reason, "serial", cert.SerialNumber.Text(16),
		"ca", ca.cert.SerialNumber.Text(16), "notAfter", cert.NotAfter, "dir", c.opts.Dir)
	return nil
}

// writeCAFiles writes ca.key, then ca.crt, for generated CAs.
func (c *Certs) writeCAFiles() error {
	var keys []byte
	for _, ca := range c.cas {
		if ca.key == nil {
			continue
		}
		k, err := keyPEMOf(ca.key)
		if err != nil {
			return err
		}
		keys = append(keys, k...)
	}
	if err := writeFileAtomic(c.opts.Dir, CAKeyFile, keys, 0o600); err != nil {
		return err
	}
	return writeFileAtomic(c.opts.Dir, CABundleFile, joinCAPEM(c.cas), 0o644)
}

// setBundle sets the bundle from the CAs, and marks it unpublished if it
// changed. rot must be held.
func (c *Certs) setBundle() {
	b := c.givenBundle
	if c.givenServing == nil {
		b = joinCAPEM(c.cas)
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	if !bytes.Equal(b, c.bundle) {
		c.bundle = b
		c.unhooked = true
		c.retryAt, c.retryDelay = time.Time{}, 0
	}
}

// writeBundle writes ca.crt and, when given, the serving pair, unless the
// files hold them already.
func (c *Certs) writeBundle() error {
	if c.givenServing != nil {
		if err := writeFileAtomic(c.opts.Dir, ServingCertFile, c.givenServing.certPEM, 0o644); err != nil {
			return err
		}
		if err := writeFileAtomic(c.opts.Dir, ServingKeyFile, c.givenServing.keyPEM, 0o600); err != nil {
			return err
		}
	}
	return writeFileAtomic(c.opts.Dir, CABundleFile, c.CABundle(), 0o644)
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

// parseGivenCA reads CertOptions.CA.
func parseGivenCA(given *CAKeyPair, now time.Time) ([]*certsCA, error) {
	certs := parseCertsPEM(given.Cert)
	if len(certs) == 0 {
		return nil, &CertError{Source: "CertOptions.CA.Cert", Err: ErrCertNoPEM}
	}
	keys, err := parseKeysPEM(given.Key)
	if err != nil {
		return nil, &CertError{Source: "CertOptions.CA.Key", Err: err}
	}
	if len(keys) == 0 {
		return nil, &CertError{Source: "CertOptions.CA.Key", Err: ErrCertNoPEM}
	}
	var signer *certsCA
	var cas []*certsCA
	for _, cert := range certs {
		if !cert.IsCA || !cert.BasicConstraintsValid {
			return nil, &CertError{Source: "CertOptions.CA.Cert", Err: fmt.Errorf("%w: %q", ErrCertNotCA, cert.Subject.CommonName)}
		}
		ca := &certsCA{cert: cert, pem: certPEMOf(cert)}
		if signer == nil && publicKeysEqual(cert.PublicKey, keys[0].Public()) {
			ca.key, signer = keys[0], ca
		}
		cas = append(cas, ca)
	}
	if signer == nil {
		return nil, &CertError{Source: "CertOptions.CA.Key", Err: ErrCertKeyMismatch}
	}
	if now.Before(signer.cert.NotBefore) || !now.Before(signer.cert.NotAfter) {
		return nil, &CertError{Source: "CertOptions.CA.Cert", Err: fmt.Errorf("%w (valid %v to %v)", ErrCertExpired, signer.cert.NotBefore, signer.cert.NotAfter)}
	}
	// The signer first: it is the CA in service.
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
	if cas != nil && !slices.ContainsFunc(cas, func(ca *certsCA) bool { return leaf.cert.CheckSignatureFrom(ca.cert) == nil }) {
		return &CertError{Source: src, Err: ErrCertNotSigned}
	}
	return nil
}

// parseCertsLeaf reads a serving pair: the first certificate of certPEM is
// the leaf; the others are its chain.
func parseCertsLeaf(certPEM, keyPEM []byte, certSrc, keySrc string) (*certsLeaf, error) {
	certs := parseCertsPEM(certPEM)
	if len(certs) == 0 {
		return nil, &CertError{Source: certSrc, Err: ErrCertNoPEM}
	}
	keys, err := parseKeysPEM(keyPEM)
	if err != nil {
		return nil, &CertError{Source: keySrc, Err: err}
	}
	if len(keys) == 0 {
		return nil, &CertError{Source: keySrc, Err: ErrCertNoPEM}
	}
	if !publicKeysEqual(certs[0].PublicKey, keys[0].Public()) {
		return nil, &CertError{Source: keySrc, Err: ErrCertKeyMismatch}
	}
	leaf := &certsLeaf{cert: certs[0], certPEM: bytes.Clone(certPEM), keyPEM: bytes.Clone(keyPEM)}
	for _, cert := range certs[1:] {
		leaf.bundleFromChain = append(leaf.bundleFromChain, certPEMOf(cert)...)
	}
	return leaf, nil
}

// parseCertsPEM returns the certificates of the CERTIFICATE blocks of data
// that parse.
func parseCertsPEM(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type != "CERTIFICATE" {
			continue
		}
		if cert, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, cert)
		}
	}
}

// parseKeysPEM returns the private keys of data, in PKCS #8, SEC 1 or
// PKCS #1 blocks. A key block that does not parse is an error.
func parseKeysPEM(data []byte) ([]crypto.Signer, error) {
	var out []crypto.Signer
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out, nil
		}
		var key any
		var err error
		switch b.Type {
		case "PRIVATE KEY":
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case "EC PRIVATE KEY":
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case "RSA PRIVATE KEY":
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			// The parse error names no key material.
			return nil, fmt.Errorf("%w: %s block: %w", ErrCertNoPEM, b.Type, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%w: %s block holds a %T, not a signing key", ErrCertNoPEM, b.Type, key)
		}
		out = append(out, s)
	}
}

func publicKeysEqual(a, b crypto.PublicKey) bool {
	e, ok := a.(interface{ Equal(crypto.PublicKey) bool })
	return ok && e.Equal(b)
}

// sameSANs reports whether cert names exactly dns and ips.
func sameSANs(cert *x509.Certificate, dns []string, ips []net.IP) bool {
	norm := func(ips []net.IP) []string {
		out := make([]string, 0, len(ips))
		for _, ip := range ips {
			out = append(out, ip.To16().String())
		}
		slices.Sort(out)
		return slices.Compact(out)
	}
	sorted := func(s []string) []string {
		s = slices.Clone(s)
		slices.Sort(s)
		return slices.Compact(s)
	}
	return slices.Equal(sorted(cert.DNSNames), sorted(dns)) && slices.Equal(norm(cert.IPAddresses), norm(ips))
}

func joinCAPEM(cas []*certsCA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.pem...)
	}
	return b
}

func certPEMOf(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: cert.Raw})
}

func keyPEMOf(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("webhook: encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PRIVATE KEY", Bytes: der}), nil
}

func randomSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("webhook: certificate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

func readOptional(path string) []byte {
	b, _ := os.ReadFile(path)
	return b
}

// writeFileAtomic replaces dir/name with data: written to a temporary file
// in dir, synced, then renamed over it, so that a reader sees the old or
// the new file, never a torn one. A file that holds data already is left
// alone (but given perm).
func writeFileAtomic(dir, name string, data []byte, perm os.FileMode) error {
	path := filepath.Join(dir, name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() != perm {
			if err := os.Chmod(path, perm); err != nil {
				return fmt.Errorf("webhook: %w", err)
			}
		}
		return nil
	}
	f, err := os.CreateTemp(dir, "."+name+".tmp-*")
	if err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	tmp := f.Name()
	ok := false
	defer func() {
		if !ok {
			_ = f.Close()
			_ = os.Remove(tmp)
		}
	}()
	if err := f.Chmod(perm); err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	if _, err := f.Write(data); err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	if err := f.Sync(); err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	if err := f.Close(); err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	if err := os.Rename(tmp, path); err != nil {
		return fmt.Errorf("webhook: writing %s: %w", path, err)
	}
	ok = true
	if d, err := os.Open(dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}
