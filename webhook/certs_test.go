package webhook_test

import (
	"bytes"
	"context"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"errors"
	"math/big"
	"net"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/webhook"
)

var certsEpoch = time.Date(2026, 3, 1, 0, 0, 0, 0, time.UTC)

var (
	testDNS = []string{"at-webhook.at-system.svc", "at-webhook.at-system.svc.cluster.local"}
	testIPs = []net.IP{net.ParseIP("127.0.0.1")}
)

// certFiles reads the files of dir.
type certFiles struct {
	crt, key, ca, caKey []byte
}

func readCertFiles(t *testing.T, dir string) certFiles {
	t.Helper()
	read := func(name string) []byte {
		b, err := os.ReadFile(filepath.Join(dir, name))
		if err != nil && !errors.Is(err, os.ErrNotExist) {
			t.Fatal(err)
		}
		return b
	}
	return certFiles{
		crt:   read(webhook.ServingCertFile),
		key:   read(webhook.ServingKeyFile),
		ca:    read(webhook.CABundleFile),
		caKey: read(webhook.CAKeyFile),
	}
}

func parsePEMCerts(t *testing.T, data []byte) []*x509.Certificate {
	t.Helper()
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		c, err := x509.ParseCertificate(b.Bytes)
		if err != nil {
			t.Fatal(err)
		}
		out = append(out, c)
	}
}

func leafOf(t *testing.T, dir string) *x509.Certificate {
	t.Helper()
	certs := parsePEMCerts(t, readCertFiles(t, dir).crt)
	if len(certs) == 0 {
		t.Fatalf("%s holds no certificate", webhook.ServingCertFile)
	}
	return certs[0]
}

// verifyLeaf checks that the serving pair in dir loads and that the
// certificate verifies against bundle for every SAN at time now.
func verifyLeaf(t *testing.T, dir string, bundle []byte, now time.Time) *x509.Certificate {
	t.Helper()
	f := readCertFiles(t, dir)
	if _, err := tls.X509KeyPair(f.crt, f.key); err != nil {
		t.Fatalf("serving pair does not load: %v", err)
	}
	leaf := leafOf(t, dir)
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(bundle) {
		t.Fatal("CA bundle holds no certificate")
	}
	for _, name := range []string{testDNS[0], testDNS[1], "127.0.0.1"} {
		if _, err := leaf.Verify(x509.VerifyOptions{
			DNSName: name, Roots: pool, CurrentTime: now,
			KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		}); err != nil {
			t.Fatalf("serving certificate does not verify for %s against the bundle: %v", name, err)
		}
	}
	return leaf
}

func newCerts(t *testing.T, opts webhook.CertOptions) *webhook.Certs {
	t.Helper()
	c, err := webhook.NewCerts(opts)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func TestCertsGenerate(t *testing.T) {
	fake := clock.NewFake(certsEpoch)
	dir := filepath.Join(t.TempDir(), "certs") // created by Ensure
	opts := webhook.CertOptions{Dir: dir, DNSNames: testDNS, IPs: testIPs}
	opts.SetClock(fake)
	c := newCerts(t, opts)
	if c.CABundle() != nil {
		t.Fatal("CABundle before Ensure is not nil")
	}
	if err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	f := readCertFiles(t, dir)
	for name, b := range map[string][]byte{"tls.crt": f.crt, "tls.key": f.key, "ca.crt": f.ca, "ca.key": f.caKey} {
		if len(b) == 0 {
			t.Errorf("%s missing or empty", name)
		}
	}
	for name, mode := range map[string]os.FileMode{
		webhook.ServingKeyFile: 0o600, webhook.CAKeyFile: 0o600,
		webhook.ServingCertFile: 0o644, webhook.CABundleFile: 0o644,
	} {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil {
			t.Fatal(err)
		}
		if st.Mode().Perm() != mode {
			t.Errorf("%s has mode %v, want %v", name, st.Mode().Perm(), mode)
		}
	}
	if !bytes.Equal(f.ca, c.CABundle()) {
		t.Error("ca.crt differs from CABundle()")
	}
	cas := parsePEMCerts(t, c.CABundle())
	if len(cas) != 1 || !cas[0].IsCA {
		t.Fatalf("bundle holds %d certificates, want one CA", len(cas))
	}
	if k, ok := cas[0].PublicKey.(*ecdsa.PublicKey); !ok || k.Curve != elliptic.P256() {
		t.Errorf("CA key is %T, want ECDSA P-256", cas[0].PublicKey)
	}
	if got := cas[0].NotAfter.Sub(certsEpoch); got != webhook.DefaultCAValidity {
		t.Errorf("CA valid for %v, want %v", got, webhook.DefaultCAValidity)
	}
	if n := len(parsePEMCerts(t, f.crt)); n != 1 {
		t.Errorf("%s holds %d certificates, want the leaf only", webhook.ServingCertFile, n)
	}
	leaf := verifyLeaf(t, dir, c.CABundle(), certsEpoch)
	if !slicesEqual(leaf.DNSNames, testDNS) || len(leaf.IPAddresses) != 1 || !leaf.IPAddresses[0].Equal(testIPs[0]) {
		t.Errorf("SANs %v %v, want %v %v", leaf.DNSNames, leaf.IPAddresses, testDNS, testIPs)
	}
	if got := leaf.NotAfter.Sub(certsEpoch); got != webhook.DefaultCertValidity {
		t.Errorf("serving certificate valid for %v, want %v", got, webhook.DefaultCertValidity)
	}
	if leaf.NotBefore.After(certsEpoch) {
		t.Errorf("serving certificate valid only from %v", leaf.NotBefore)
	}

	// Ensure again, and from a new Certs (a restart): nothing changes.
	if err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	c2 := newCerts(t, opts)
	if err := c2.Ensure(); err != nil {
		t.Fatal(err)
	}
	if readCertFiles(t, dir).String() != f.String() {
		t.Error("Ensure rewrote valid files")
	}
	if !bytes.Equal(c2.CABundle(), f.ca) {
		t.Error("a restarted Certs has another bundle")
	}
	// No temporary files are left behind.
	ents, _ := os.ReadDir(dir)
	if len(ents) != 4 {
		t.Errorf("folder holds %d files, want 4", len(ents))
	}
}

// Comparable form of certFiles for the != above.
func (f certFiles) String() string {
	return string(f.crt) + string(f.key) + string(f.ca) + string(f.caKey)
}

func slicesEqual(a, b []string) bool { return strings.Join(a, ",") == strings.Join(b, ",") }

func TestCertsEnsureRegenerates(t *testing.T) {
	for _, tc := range []struct {
		name        string
		change      func(t *testing.T, dir string, opts *webhook.CertOptions)
		newLeaf     bool
		newCA       bool
		leafByNewCA bool // else by the old CA
		bundleCA    int  // CAs in the bundle after; default 1
	}{
		{name: "unchanged"},
		{name: "other DNS names", newLeaf: true, change: func(t *testing.T, _ string, o *webhook.CertOptions) {
			o.DNSNames = []string{"other.at-system.svc"}
		}},
		{name: "an IP fewer", newLeaf: true, change: func(t *testing.T, _ string, o *webhook.CertOptions) { o.IPs = nil }},
		{name: "within RotateBefore", newLeaf: true, change: func(t *testing.T, _ string, o *webhook.CertOptions) {
			o.SetClock(clock.NewFake(certsEpoch.Add(webhook.DefaultCertValidity - webhook.DefaultCertValidity/3 + time.Minute)))
		}},
		{name: "just before RotateBefore", change: func(t *testing.T, _ string, o *webhook.CertOptions) {
			o.SetClock(clock.NewFake(certsEpoch.Add(webhook.DefaultCertValidity - webhook.DefaultCertValidity/3 - time.Minute)))
		}},
		{name: "expired", newLeaf: true, change: func(t *testing.T, _ string, o *webhook.CertOptions) {
			o.SetClock(clock.NewFake(certsEpoch.Add(webhook.DefaultCertValidity + time.Hour)))
		}},
		{name: "key of another pair", newLeaf: true, change: func(t *testing.T, dir string, _ *webhook.CertOptions) {
			writeTestFile(t, dir, webhook.ServingKeyFile, keyPEM(t, newKey(t)))
		}},
		{name: "garbage certificate", newLeaf: true, change: func(t *testing.T, dir string, _ *webhook.CertOptions) {
			writeTestFile(t, dir, webhook.ServingCertFile, []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n"))
		}},
		{name: "key missing", newLeaf: true, change: func(t *testing.T, dir string, _ *webhook.CertOptions) {
			os.Remove(filepath.Join(dir, webhook.ServingKeyFile))
		}},
		{name: "CA bundle missing", newLeaf: true, newCA: true, leafByNewCA: true, change: func(t *testing.T, dir string, _ *webhook.CertOptions) {
			os.Remove(filepath.Join(dir, webhook.CABundleFile))
		}},
		// Without the CA key nothing more can be signed: a new CA joins
		// the bundle, and the serving certificate, still valid, stays
		// until the new CA is published (by Start).
		{name: "CA key missing", newCA: true, bundleCA: 2, change: func(t *testing.T, dir string, _ *webhook.CertOptions) {
			os.Remove(filepath.Join(dir, webhook.CAKeyFile))
		}},
		// The CA is due: a new one joins the bundle; the expired serving
		// certificate is renewed at once by the CA clients trust now.
		{name: "CA due", newLeaf: true, newCA: true, bundleCA: 2, change: func(t *testing.T, dir string, o *webhook.CertOptions) {
			o.SetClock(clock.NewFake(certsEpoch.Add(webhook.DefaultCAValidity - webhook.DefaultCertValidity - webhook.DefaultCertValidity/3 + time.Hour)))
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			opts := webhook.CertOptions{Dir: dir, DNSNames: testDNS, IPs: testIPs}
			opts.SetClock(clock.NewFake(certsEpoch))
			if err := newCerts(t, opts).Ensure(); err != nil {
				t.Fatal(err)
			}
			before := readCertFiles(t, dir)
			oldCA := parsePEMCerts(t, before.ca)[0]
			if tc.change != nil {
				tc.change(t, dir, &opts)
			}
			c := newCerts(t, opts)
			if err := c.Ensure(); err != nil {
				t.Fatal(err)
			}
			after := readCertFiles(t, dir)
			if got := !bytes.Equal(before.crt, after.crt); got != tc.newLeaf {
				t.Errorf("new serving certificate: %v, want %v", got, tc.newLeaf)
			}
			cas := parsePEMCerts(t, c.CABundle())
			if got := !cas[0].Equal(oldCA); got != tc.newCA {
				t.Errorf("new CA: %v, want %v", got, tc.newCA)
			}
			if want := max(tc.bundleCA, 1); len(cas) != want {
				t.Errorf("bundle holds %d CAs, want %d", len(cas), want)
			}
			if !bytes.Equal(after.ca, c.CABundle()) {
				t.Error("ca.crt differs from CABundle()")
			}
			leaf := leafOf(t, dir)
			now := opts.Clock().Now()
			pool := x509.NewCertPool()
			pool.AppendCertsFromPEM(c.CABundle())
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, CurrentTime: now, DNSName: opts.DNSNames[0]}); err != nil {
				t.Errorf("serving certificate does not verify: %v", err)
			}
			if _, err := tls.X509KeyPair(after.crt, after.key); err != nil {
				t.Errorf("serving pair does not load: %v", err)
			}
			wantCA := oldCA
			if tc.leafByNewCA {
				wantCA = cas[0]
			}
			if leaf.CheckSignatureFrom(wantCA) != nil {
				t.Errorf("serving certificate not signed by the %s CA", map[bool]string{true: "new", false: "old"}[tc.leafByNewCA])
			}
		})
	}
}

func writeTestFile(t *testing.T, dir, name string, data []byte) {
	t.Helper()
	if err := os.WriteFile(filepath.Join(dir, name), data, 0o600); err != nil {
		t.Fatal(err)
	}
}

// published records the bundles the hooks were called with, and when.
type published struct {
	clock *clock.Fake
	mu    sync.Mutex
	at    []time.Time
	b     [][]byte
	fail  error
	calls chan []byte
}

func newPublished(fake *clock.Fake) *published {
	return &published{clock: fake, calls: make(chan []byte, 100)}
}

func (p *published) hook(_ context.Context, b []byte) error {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.fail != nil {
		return p.fail
	}
	p.at = append(p.at, p.clock.Now())
	p.b = append(p.b, b)
	p.calls <- b
	return nil
}

func (p *published) setFail(err error) {
	p.mu.Lock()
	defer p.mu.Unlock()
	p.fail = err
}

func (p *published) bundle(i int) []byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	return p.b[i]
}

func (p *published) count() int {
	p.mu.Lock()
	defer p.mu.Unlock()
	return len(p.b)
}

// inUse returns the bundles clients may still be using at now: the one
// that was current delay ago, and every one published since.
func (p *published) inUse(now time.Time, delay time.Duration) [][]byte {
	p.mu.Lock()
	defer p.mu.Unlock()
	var out [][]byte
	for i, at := range p.at {
		if !at.After(now.Add(-delay)) && i+1 < len(p.at) && !p.at[i+1].After(now.Add(-delay)) {
			continue // superseded before now-delay
		}
		out = append(out, p.b[i])
	}
	return out
}

// startCerts runs c.Start until the test ends, and waits until it sleeps.
func startCerts(t *testing.T, c *webhook.Certs, fake *clock.Fake) {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- c.Start(ctx) }()
	t.Cleanup(func() {
		cancel()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("Start returned %v, want nil", err)
			}
		case <-time.After(10 * time.Second):
			t.Error("Start did not return after its context ended")
		}
	})
	waitArmed(t, fake)
}

// waitArmed waits until Start sleeps on its timer.
func waitArmed(t *testing.T, fake *clock.Fake) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for fake.Waiters() != 1 {
		if time.Now().After(deadline) {
			t.Fatal("Start does not wait on a timer")
		}
		time.Sleep(time.Millisecond)
	}
}

// advanceTo moves the fake clock to target, at most an hour at a time (no
// further than Start sleeps), letting Start finish each step, and calls
// check after each.
func advanceTo(t *testing.T, fake *clock.Fake, target time.Time, check func()) {
	t.Helper()
	for fake.Now().Before(target) {
		next := fake.Now().Add(time.Hour)
		if next.After(target) {
			next = target
		}
		fake.Set(next)
		waitArmed(t, fake)
		if check != nil {
			check()
		}
	}
}

// TestCertsStartRotates drives Start with a fake clock through serving
// certificate renewals and a CA rotation, and checks at every step that the
// serving certificate on disk verifies against every bundle clients may
// still hold: no webhook call could fail.
func TestCertsStartRotates(t *testing.T) {
	fake := clock.NewFake(certsEpoch)
	dir := t.TempDir()
	const delay = time.Minute
	opts := webhook.CertOptions{
		Dir: dir, DNSNames: testDNS, IPs: testIPs,
		CAValidity: 100 * time.Hour, CertValidity: 24 * time.Hour, RotateBefore: 8 * time.Hour,
		PropagationDelay: delay,
	}
	opts.SetClock(fake)
	c := newCerts(t, opts)
	pub := newPublished(fake)
	c.OnRotate(pub.hook)
	if err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	if pub.count() != 0 {
		t.Fatal("Ensure called the hooks")
	}
	startCerts(t, c, fake)
	if pub.count() != 1 || !bytes.Equal(pub.bundle(0), c.CABundle()) {
		t.Fatalf("Start published %d bundles, want the current one", pub.count())
	}
	ca1 := parsePEMCerts(t, c.CABundle())[0]
	check := func() {
		t.Helper()
		for _, b := range pub.inUse(fake.Now(), delay) {
			verifyLeaf(t, dir, b, fake.Now())
		}
	}
	check()

	// Serving certificates are renewed with the same CA, every 16 hours.
	leaf := leafOf(t, dir)
	advanceTo(t, fake, certsEpoch.Add(16*time.Hour-time.Hour), check)
	if !leafOf(t, dir).Equal(leaf) {
		t.Fatal("serving certificate renewed early")
	}
	advanceTo(t, fake, certsEpoch.Add(16*time.Hour), check)
	leaf2 := leafOf(t, dir)
	if leaf2.Equal(leaf) {
		t.Fatal("serving certificate not renewed when due")
	}
	if leaf2.CheckSignatureFrom(ca1) != nil || pub.count() != 1 {
		t.Fatal("renewal changed the CA")
	}
	if got := leaf2.NotAfter.Sub(fake.Now()); got != 24*time.Hour {
		t.Errorf("renewed certificate valid for %v, want 24h", got)
	}

	// The CA is due 32 hours (CertValidity + RotateBefore) before it
	// expires: at 68 h. First the bundle gains the new CA ...
	caDue := certsEpoch.Add(68 * time.Hour)
	advanceTo(t, fake, caDue.Add(-time.Hour), check)
	if pub.count() != 1 {
		t.Fatal("CA renewed early")
	}
	advanceTo(t, fake, caDue, check)
	if pub.count() != 2 {
		t.Fatalf("%d bundles published, want 2", pub.count())
	}
	cas := parsePEMCerts(t, pub.bundle(1))
	if len(cas) != 2 || !cas[1].Equal(ca1) {
		t.Fatalf("bundle during CA rotation holds %d CAs, want the new and the old", len(cas))
	}
	ca2 := cas[0]
	if leafOf(t, dir).CheckSignatureFrom(ca1) != nil {
		t.Fatal("serving certificate switched to the new CA before it was published")
	}
	// ... then, PropagationDelay later, the serving certificate switches
	// to the new CA ...
	advanceTo(t, fake, caDue.Add(delay-time.Second), check)
	if leafOf(t, dir).CheckSignatureFrom(ca1) != nil {
		t.Fatal("serving certificate switched early")
	}
	advanceTo(t, fake, caDue.Add(delay), check)
	if leafOf(t, dir).CheckSignatureFrom(ca2) != nil {
		t.Fatal("serving certificate not switched to the new CA")
	}
	if pub.count() != 2 {
		t.Fatal("bundle changed with the switch")
	}
	// ... and PropagationDelay after that the old CA leaves the bundle.
	advanceTo(t, fake, caDue.Add(2*delay), check)
	if pub.count() != 3 {
		t.Fatalf("%d bundles published, want 3", pub.count())
	}
	if cas := parsePEMCerts(t, pub.bundle(2)); len(cas) != 1 || !cas[0].Equal(ca2) {
		t.Fatal("old CA not dropped from the bundle")
	}
	if !bytes.Equal(readCertFiles(t, dir).ca, pub.bundle(2)) {
		t.Error("ca.crt is not the published bundle")
	}
	// Renewals go on with the new CA.
	advanceTo(t, fake, caDue.Add(24*time.Hour), check)
	if l := leafOf(t, dir); l.CheckSignatureFrom(ca2) != nil || !l.NotAfter.After(caDue.Add(32*time.Hour)) {
		t.Error("serving certificate not renewed by the new CA")
	}
}

// TestCertsSwitchWaitsForHooks: while the hooks fail, the new CA is not
// known to be published, so the serving certificate stays with the old CA
// however often it is renewed.
func TestCertsSwitchWaitsForHooks(t *testing.T) {
	fake := clock.NewFake(certsEpoch)
	dir := t.TempDir()
	opts := webhook.CertOptions{
		Dir: dir, DNSNames: testDNS, IPs: testIPs,
		CAValidity: 40 * time.Hour, CertValidity: 24 * time.Hour, RotateBefore: 8 * time.Hour,
	}
	opts.SetClock(fake)
	c := newCerts(t, opts)
	pub := newPublished(fake)
	c.OnRotate(pub.hook)
	if err := c.Rotate(t.Context()); err != nil { // Ensure and publish
		t.Fatal(err)
	}
	if pub.count() != 1 {
		t.Fatalf("first Rotate published %d bundles, want 1", pub.count())
	}
	ca1 := parsePEMCerts(t, c.CABundle())[0]
	leaf := leafOf(t, dir)
	if err := c.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if pub.count() != 1 {
		t.Error("Rotate published an unchanged bundle again")
	}
	if l := leafOf(t, dir); l.Equal(leaf) || l.CheckSignatureFrom(ca1) != nil {
		t.Error("Rotate did not renew the serving certificate with the same CA")
	}

	hookErr := errors.New("API server unreachable")
	pub.setFail(hookErr)
	fake.Set(certsEpoch.Add(8 * time.Hour)) // the CA is due (40 h - 32 h)
	if err := c.Rotate(t.Context()); !errors.Is(err, hookErr) {
		t.Fatalf("Rotate with a failing hook: %v, want %v", err, hookErr)
	}
	if n := len(parsePEMCerts(t, c.CABundle())); n != 2 {
		t.Fatalf("bundle holds %d CAs, want 2", n)
	}
	fake.Step(time.Hour)
	if err := c.Rotate(t.Context()); !errors.Is(err, hookErr) {
		t.Fatalf("Rotate with a failing hook: %v, want %v", err, hookErr)
	}
	if leafOf(t, dir).CheckSignatureFrom(ca1) != nil {
		t.Fatal("serving certificate switched to a CA the hooks did not publish")
	}

	pub.setFail(nil)
	if err := c.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if pub.count() != 2 || !bytes.Equal(pub.bundle(1), c.CABundle()) {
		t.Fatal("bundle not published once the hook works")
	}
	if leafOf(t, dir).CheckSignatureFrom(ca1) != nil {
		t.Fatal("serving certificate switched without PropagationDelay")
	}
	fake.Step(webhook.DefaultPropagationDelay)
	if err := c.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	ca2 := parsePEMCerts(t, c.CABundle())[0]
	if leafOf(t, dir).CheckSignatureFrom(ca2) != nil {
		t.Fatal("serving certificate did not switch to the new CA")
	}
	verifyLeaf(t, dir, pub.bundle(1), fake.Now())
}

// testCA makes a CA certificate and key (PEM) valid from notBefore to
// notAfter.
func testCA(t *testing.T, notBefore, notAfter time.Time) (certPEM, keyPEMBytes []byte, cert *x509.Certificate, key *ecdsa.PrivateKey) {
	t.Helper()
	key = newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: "test CA"},
		NotBefore:    notBefore, NotAfter: notAfter,
		IsCA: true, BasicConstraintsValid: true,
		KeyUsage: x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ = x509.ParseCertificate(der)
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM(t, key), cert, key
}

// testLeaf makes a serving pair signed by ca (self-signed when ca is nil).
func testLeaf(t *testing.T, ca *x509.Certificate, caKey *ecdsa.PrivateKey, dns ...string) (certPEM, keyPEMBytes []byte) {
	t.Helper()
	key := newKey(t)
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: dns[0]},
		DNSNames:     dns,
		IPAddresses:  testIPs,
		NotBefore:    certsEpoch.Add(-time.Hour), NotAfter: certsEpoch.Add(24 * time.Hour),
		ExtKeyUsage: []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth},
		KeyUsage:    x509.KeyUsageDigitalSignature,
	}
	parent, signer := tmpl, key
	if ca != nil {
		parent, signer = ca, caKey
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, parent, key.Public(), signer)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), keyPEM(t, key)
}

func newKey(t *testing.T) *ecdsa.PrivateKey {
	t.Helper()
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	return k
}

func keyPEM(t *testing.T, k *ecdsa.PrivateKey) []byte {
	t.Helper()
	der, err := x509.MarshalECPrivateKey(k)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der})
}

func TestCertsGivenCA(t *testing.T) {
	fake := clock.NewFake(certsEpoch)
	caPEM, caKey, caCert, _ := testCA(t, certsEpoch.Add(-time.Hour), certsEpoch.Add(30*24*time.Hour))
	otherPEM, _, otherCert, _ := testCA(t, certsEpoch.Add(-time.Hour), certsEpoch.Add(60*24*time.Hour))
	// The given CA has two certificates (as while rotating one's own CA):
	// both are the bundle, the one matching the key signs.
	given := append(bytes.Clone(otherPEM), caPEM...)
	dir := t.TempDir()
	opts := webhook.CertOptions{Dir: dir, DNSNames: testDNS, IPs: testIPs,
		CA: &webhook.CAKeyPair{Cert: given, Key: caKey}}
	opts.SetClock(fake)
	c := newCerts(t, opts)
	if err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	cas := parsePEMCerts(t, c.CABundle())
	if len(cas) != 2 || !cas[0].Equal(caCert) || !cas[1].Equal(otherCert) {
		t.Fatal("bundle is not the given CA certificates, signer first")
	}
	leaf := verifyLeaf(t, dir, c.CABundle(), certsEpoch)
	if leaf.CheckSignatureFrom(caCert) != nil {
		t.Fatal("serving certificate not signed by the given CA")
	}
	// Cut short by the CA's expiry (30 days < 90).
	if !leaf.NotAfter.Equal(caCert.NotAfter) {
		t.Errorf("serving certificate valid until %v, want the CA's %v", leaf.NotAfter, caCert.NotAfter)
	}
	if f := readCertFiles(t, dir); f.caKey != nil || !bytes.Equal(f.ca, c.CABundle()) {
		t.Error("given CA: ca.key written or ca.crt not the bundle")
	}
	if err := c.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	if l := leafOf(t, dir); l.Equal(leaf) || l.CheckSignatureFrom(caCert) != nil {
		t.Error("Rotate did not renew with the given CA")
	}
	// Start does not renew a certificate its CA cuts short (it could not
	// last longer), and makes no CA.
	pub := newPublished(fake)
	c.OnRotate(pub.hook)
	leaf = leafOf(t, dir)
	startCerts(t, c, fake)
	advanceTo(t, fake, certsEpoch.Add(29*24*time.Hour), nil)
	if !leafOf(t, dir).Equal(leaf) || pub.count() != 1 {
		t.Error("Start renewed a certificate cut short by the given CA, or changed the bundle")
	}
}

func TestCertsGivenServingPair(t *testing.T) {
	caPEM, caKey, caCert, caPriv := testCA(t, certsEpoch.Add(-time.Hour), certsEpoch.Add(30*24*time.Hour))
	leafPEM, leafKey := testLeaf(t, caCert, caPriv, testDNS...)
	selfPEM, selfKey := testLeaf(t, nil, nil, testDNS...)
	for _, tc := range []struct {
		name         string
		opts         webhook.CertOptions
		wantBundle   []byte
		wantCertFile []byte
	}{
		{"with its CA", webhook.CertOptions{ServingCert: leafPEM, ServingKey: leafKey, CA: &webhook.CAKeyPair{Cert: caPEM, Key: caKey}, DNSNames: testDNS}, caPEM, leafPEM},
		{"with its chain", webhook.CertOptions{ServingCert: append(bytes.Clone(leafPEM), caPEM...), ServingKey: leafKey}, caPEM, append(bytes.Clone(leafPEM), caPEM...)},
		{"self-signed", webhook.CertOptions{ServingCert: selfPEM, ServingKey: selfKey, IPs: testIPs}, selfPEM, selfPEM},
	} {
		t.Run(tc.name, func(t *testing.T) {
			fake := clock.NewFake(certsEpoch)
			tc.opts.Dir = t.TempDir()
			tc.opts.SetClock(fake)
			c := newCerts(t, tc.opts)
			if err := c.Ensure(); err != nil {
				t.Fatal(err)
			}
			f := readCertFiles(t, tc.opts.Dir)
			if !bytes.Equal(f.crt, tc.wantCertFile) || !bytes.Equal(f.key, tc.opts.ServingKey) {
				t.Error("files are not the given pair")
			}
			if !bytes.Equal(c.CABundle(), tc.wantBundle) || !bytes.Equal(f.ca, tc.wantBundle) {
				t.Error("wrong CA bundle")
			}
			verifyLeaf(t, tc.opts.Dir, c.CABundle(), certsEpoch)
			if err := c.Rotate(t.Context()); !errors.Is(err, webhook.ErrCertsGiven) {
				t.Errorf("Rotate: %v, want ErrCertsGiven", err)
			}
			pub := newPublished(fake)
			c.OnRotate(pub.hook)
			startCerts(t, c, fake)
			advanceTo(t, fake, certsEpoch.Add(48*time.Hour), nil)
			if pub.count() != 1 || !bytes.Equal(readCertFiles(t, tc.opts.Dir).crt, tc.wantCertFile) {
				t.Error("Start changed a given pair, or did not publish its bundle once")
			}
		})
	}
}

func TestCertsBadInput(t *testing.T) {
	dir := t.TempDir()
	caPEM, caKey, caCert, caPriv := testCA(t, certsEpoch.Add(-time.Hour), certsEpoch.Add(30*24*time.Hour))
	expiredPEM, expiredKey, _, _ := testCA(t, certsEpoch.Add(-48*time.Hour), certsEpoch.Add(-time.Hour))
	_, otherKey, _, _ := testCA(t, certsEpoch.Add(-time.Hour), certsEpoch.Add(time.Hour))
	leafPEM, leafKey := testLeaf(t, caCert, caPriv, testDNS...)
	selfPEM, selfKey := testLeaf(t, nil, nil, testDNS...)
	garbageKey := []byte("-----BEGIN PRIVATE KEY-----\nAAAAAAAA\n-----END PRIVATE KEY-----\n")
	ok := webhook.CertOptions{Dir: dir, DNSNames: testDNS}
	with := func(f func(o *webhook.CertOptions)) webhook.CertOptions {
		o := ok
		f(&o)
		return o
	}
	for _, tc := range []struct {
		name   string
		opts   webhook.CertOptions
		want   error
		source string // of the *CertError; "" when none
	}{
		{"no Dir", webhook.CertOptions{DNSNames: testDNS}, webhook.ErrCertsNoDir, ""},
		{"no SANs", webhook.CertOptions{Dir: dir}, webhook.ErrCertsNoSANs, ""},
		{"empty DNS name", with(func(o *webhook.CertOptions) { o.DNSNames = []string{""} }), webhook.ErrCertsOptions, ""},
		{"bad IP", with(func(o *webhook.CertOptions) { o.IPs = []net.IP{{1, 2}} }), webhook.ErrCertsOptions, ""},
		{"negative validity", with(func(o *webhook.CertOptions) { o.CertValidity = -time.Hour }), webhook.ErrCertsOptions, ""},
		{"RotateBefore too long", with(func(o *webhook.CertOptions) { o.CertValidity, o.RotateBefore = time.Hour, time.Hour }), webhook.ErrCertsOptions, ""},
		{"CA validity too short", with(func(o *webhook.CertOptions) { o.CAValidity = 100 * 24 * time.Hour }), webhook.ErrCertsOptions, ""},
		{"garbage CA certificate", with(func(o *webhook.CertOptions) { o.CA = &webhook.CAKeyPair{Cert: []byte("junk"), Key: caKey} }), webhook.ErrCertNoPEM, "CertOptions.CA.Cert"},
		{"no CA key", with(func(o *webhook.CertOptions) { o.CA = &webhook.CAKeyPair{Cert: caPEM} }), webhook.ErrCertNoPEM, "CertOptions.CA.Key"},
		{"garbage CA key", with(func(o *webhook.CertOptions) { o.CA = &webhook.CAKeyPair{Cert: caPEM, Key: garbageKey} }), webhook.ErrCertNoPEM, "CertOptions.CA.Key"},
		{"CA key of another CA", with(func(o *webhook.CertOptions) { o.CA = &webhook.CAKeyPair{Cert: caPEM, Key: otherKey} }), webhook.ErrCertKeyMismatch, "CertOptions.CA.Key"},
		{"CA not a CA", with(func(o *webhook.CertOptions) { o.CA = &webhook.CAKeyPair{Cert: leafPEM, Key: leafKey} }), webhook.ErrCertNotCA, "CertOptions.CA.Cert"},
		{"CA expired", with(func(o *webhook.CertOptions) {
			o.CA = &webhook.CAKeyPair{Cert: expiredPEM, Key: expiredKey}
		}), webhook.ErrCertExpired, "CertOptions.CA.Cert"},
		{"serving key missing", with(func(o *webhook.CertOptions) { o.ServingCert = leafPEM }), webhook.ErrCertNoPEM, "CertOptions.ServingKey"},
		{"garbage serving certificate", with(func(o *webhook.CertOptions) { o.ServingCert, o.ServingKey = []byte("junk"), leafKey }), webhook.ErrCertNoPEM, "CertOptions.ServingCert"},
		{"serving key of another pair", with(func(o *webhook.CertOptions) { o.ServingCert, o.ServingKey = leafPEM, selfKey }), webhook.ErrCertKeyMismatch, "CertOptions.ServingKey"},
		{"serving certificate for other names", with(func(o *webhook.CertOptions) {
			o.ServingCert, o.ServingKey, o.DNSNames = leafPEM, leafKey, []string{"elsewhere.svc"}
		}), webhook.ErrCertSANs, "CertOptions.ServingCert"},
		{"serving certificate not signed by the CA", with(func(o *webhook.CertOptions) {
			o.ServingCert, o.ServingKey, o.CA = selfPEM, selfKey, &webhook.CAKeyPair{Cert: caPEM, Key: caKey}
		}), webhook.ErrCertNotSigned, "CertOptions.ServingCert"},
		{"serving certificate expired", with(func(o *webhook.CertOptions) {
			o.ServingCert, o.ServingKey = leafPEM, leafKey
			o.SetClock(clock.NewFake(certsEpoch.Add(25 * time.Hour)))
		}), webhook.ErrCertExpired, "CertOptions.ServingCert"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if tc.opts.Clock() == nil {
				tc.opts.SetClock(clock.NewFake(certsEpoch))
			}
			c, err := webhook.NewCerts(tc.opts)
			if !errors.Is(err, tc.want) || c != nil {
				t.Fatalf("NewCerts: %v, want %v", err, tc.want)
			}
			var ce *webhook.CertError
			if got := errors.As(err, &ce); got != (tc.source != "") || (got && ce.Source != tc.source) {
				t.Errorf("error %v: want a *CertError from %q", err, tc.source)
			}
			for _, secret := range [][]byte{caKey, leafKey, selfKey, otherKey} {
				body := strings.Split(string(secret), "\n")[1]
				if strings.Contains(err.Error(), body) {
					t.Errorf("error %q holds key material", err)
				}
			}
		})
	}

	// A Dir that cannot be made fails Ensure, Rotate and Start with an
	// error, not a panic.
	file := filepath.Join(t.TempDir(), "file")
	writeTestFile(t, filepath.Dir(file), "file", nil)
	c := newCerts(t, webhook.CertOptions{Dir: filepath.Join(file, "certs"), IPs: testIPs})
	if err := c.Ensure(); err == nil {
		t.Error("Ensure in an impossible folder succeeded")
	}
	if err := c.Rotate(t.Context()); err == nil {
		t.Error("Rotate in an impossible folder succeeded")
	}
	if err := c.Start(t.Context()); err == nil {
		t.Error("Start in an impossible folder succeeded")
	}
}

// TestCertsHooksHoldNoLock: a hook stuck on a network call holds up
// neither Ensure nor CABundle, and its context ends after HookTimeout, so
// Rotate returns.
func TestCertsHooksHoldNoLock(t *testing.T) {
	c := newCerts(t, webhook.CertOptions{Dir: t.TempDir(), DNSNames: testDNS, IPs: testIPs, HookTimeout: 200 * time.Millisecond})
	entered := make(chan struct{})
	release := make(chan struct{})
	defer close(release)
	var once sync.Once
	c.OnRotate(func(ctx context.Context, _ []byte) error {
		once.Do(func() { close(entered) })
		select {
		case <-release: // a call that ignores its context
		case <-ctx.Done():
			return ctx.Err()
		}
		return nil
	})
	rotated := make(chan error, 1)
	go func() { rotated <- c.Rotate(t.Context()) }()
	<-entered
	ensured := make(chan error, 1)
	go func() { ensured <- c.Ensure() }()
	select {
	case err := <-ensured:
		if err != nil {
			t.Fatal(err)
		}
	case <-time.After(time.Minute):
		t.Fatal("Ensure waited for a hook")
	}
	if len(c.CABundle()) == 0 {
		t.Error("no CA bundle while a hook runs")
	}
	select {
	case err := <-rotated:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("Rotate with a hook that outlived HookTimeout: %v, want DeadlineExceeded", err)
		}
	case <-time.After(time.Minute):
		t.Error("Rotate did not return after HookTimeout")
	}
}
