package rest

import (
	"crypto/sha256"
	"crypto/tls"
	"crypto/x509"
	"encoding/pem"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/pki"
)

// TLSReloadOptions configure how a Client follows changes to the files its
// Config names for TLS: the CA (certificate-authority, or an in-cluster
// ca.crt) and the client certificate and key (client-certificate,
// client-key). Inline data never changes and is not affected. The zero
// value is valid: changed files are picked up, checked at most once a
// minute.
type TLSReloadOptions struct {
	// Disabled makes [New] read the files once and keep what it read for
	// the life of the Client, as a kubeconfig loaded once would. Default
	// false: changed files are picked up.
	Disabled bool
	// Interval is the least time between two checks of the files. A check
	// is made when a request is about to be sent and one is due; it stats
	// each file, and reads a file only when its size, modification time or
	// identity (a file renamed over it) changed. After a TLS verification
	// failure or a 401 the next check is due within a second. Default one
	// minute.
	Interval time.Duration
}

// soonAfterRefusal bounds how long after a refused handshake or a 401 the
// files are checked again.
const soonAfterRefusal = time.Second

// tlsFiles is the TLS material of a Config: the pool of CAs that verify
// the server and the client certificate, as read from inline data or from
// files. When reloading is on, check re-reads files that changed and keeps
// the last good material when a file is missing, unreadable, half written
// or does not match its partner.
type tlsFiles struct {
	caPath, certPath, keyPath string // a file to follow, or empty
	certData, keyData         []byte // used where the path is empty
	reload                    bool
	interval                  time.Duration
	clock                     clock.Clock
	logger                    *slog.Logger

	last atomic.Int64 // unix nanoseconds of the last check
	due  atomic.Int64 // unix nanoseconds when the next check is due

	mu                           sync.Mutex // held by the goroutine that checks
	caStamp, certStamp, keyStamp os.FileInfo
	caSum, pairSum               [sha256.Size]byte

	pool atomic.Pointer[x509.CertPool]   // nil: the system roots
	pair atomic.Pointer[tls.Certificate] // nil: no client certificate
}

// newTLSFiles reads the TLS material of cfg. A missing or bad file or
// value is a [*config.Error] naming the field.
func newTLSFiles(cfg config.Config, opts TLSReloadOptions, clk clock.Clock, logger *slog.Logger) (*tlsFiles, error) {
	t := cfg.TLS
	f := &tlsFiles{
		certData: t.CertData,
		keyData:  t.KeyData,
		interval: opts.Interval,
		clock:    clk,
		logger:   logger,
	}
	if f.interval <= 0 {
		f.interval = time.Minute
	}
	if len(t.CAData) == 0 {
		f.caPath = t.CAFile
	}
	if len(t.CertData) == 0 {
		f.certPath = t.CertFile
	}
	if len(t.KeyData) == 0 {
		f.keyPath = t.KeyFile
	}
	// Stat before reading: a change made in between is seen by the first
	// check.
	f.caStamp, f.certStamp, f.keyStamp = stat(f.caPath), stat(f.certPath), stat(f.keyPath)

	ca, err := readTLSFile(cfg, "certificate-authority", t.CAFile, t.CAData)
	if err != nil {
		return nil, err
	}
	if t.Insecure {
		if len(ca) > 0 {
			return nil, &config.Error{File: cfg.Origin, Field: "insecure-skip-tls-verify", Err: fmt.Errorf("cannot be combined with a certificate authority")}
		}
	} else if len(ca) > 0 {
		pool, err := parseCA(ca)
		if err != nil {
			return nil, &config.Error{File: cfg.Origin, Field: "certificate-authority", Err: err}
		}
		f.pool.Store(pool)
		f.caSum = sha256.Sum256(ca)
	}
	certPEM, err := readTLSFile(cfg, "client-certificate", t.CertFile, t.CertData)
	if err != nil {
		return nil, err
	}
	keyPEM, err := readTLSFile(cfg, "client-key", t.KeyFile, t.KeyData)
	if err != nil {
		return nil, err
	}
	if len(certPEM) > 0 || len(keyPEM) > 0 {
		pair, err := parsePair(certPEM, keyPEM, f.certName(), f.keyName())
		if err != nil {
			// The errors name the files, never key material.
			return nil, &config.Error{File: cfg.Origin, Field: "client-certificate", Err: fmt.Errorf("invalid client certificate or key: %w", err)}
		}
		f.pair.Store(pair)
		f.pairSum = pairSum(certPEM, keyPEM)
	}
	f.reload = !opts.Disabled && (f.caPath != "" && f.pool.Load() != nil || f.certPath != "" || f.keyPath != "")
	f.last.Store(clk.Now().UnixNano())
	f.due.Store(clk.Now().Add(f.interval).UnixNano())
	return f, nil
}

// certName and keyName name the client certificate and key in errors: the
// file, or the field that holds them.
func (f *tlsFiles) certName() string {
	return nameOf(f.certPath, f.certData, "client-certificate")
}

func (f *tlsFiles) keyName() string { return nameOf(f.keyPath, f.keyData, "client-key") }

func nameOf(path string, data []byte, field string) string {
	switch {
	case path != "":
		return path
	case len(data) > 0:
		return field + "-data"
	}
	return field + " (not set)"
}

// check looks at the files when a check is due, and calls changed, with
// the new material in place, if the CA or the client certificate changed.
// While one goroutine checks, the others go on with what is in place.
func (f *tlsFiles) check(changed func()) {
	if !f.reload || f.clock.Now().UnixNano() < f.due.Load() || !f.mu.TryLock() {
		return
	}
	defer f.mu.Unlock()
	now := f.clock.Now()
	if now.UnixNano() < f.due.Load() {
		return // another goroutine has just checked
	}
	f.last.Store(now.UnixNano())
	f.due.Store(now.Add(f.interval).UnixNano())
	ca := f.reloadCA()
	pair := f.reloadPair()
	if ca || pair {
		changed()
	}
}

// checkSoon makes the next check due soon after the last one.
func (f *tlsFiles) checkSoon() {
	if !f.reload {
		return
	}
	soon := f.last.Load() + int64(min(f.interval, soonAfterRefusal))
	for {
		due := f.due.Load()
		if due <= soon || f.due.CompareAndSwap(due, soon) {
			return
		}
	}
}

// reloadCA re-reads the CA file if it changed. It reports whether the
// pool changed.
func (f *tlsFiles) reloadCA() bool {
	if f.caPath == "" || f.pool.Load() == nil {
		return false
	}
	st := stat(f.caPath)
	if sameStamp(st, f.caStamp) {
		return false
	}
	b, err := os.ReadFile(f.caPath)
	var pool *x509.CertPool
	if err == nil {
		pool, err = parseCA(b)
		if err != nil {
			err = fmt.Errorf("%s: %w", f.caPath, err)
		}
	}
	if err != nil {
		f.logger.Error("cannot reload the certificate authority file; keeping the previous CA", "file", f.caPath, "error", err)
		return false
	}
	f.caStamp = st
	if sum := sha256.Sum256(b); sum != f.caSum {
		f.caSum = sum
		f.pool.Store(pool)
		f.logger.Info("reloaded the certificate authority", "file", f.caPath)
		return true
	}
	return false
}

// reloadPair re-reads the client certificate and key files if either
// changed. A pair that does not parse or match (one file written before
// the other) is not used: the last good pair stays, and the files are
// read again at the next check.
func (f *tlsFiles) reloadPair() bool {
	if f.certPath == "" && f.keyPath == "" {
		return false
	}
	cst, kst := stat(f.certPath), stat(f.keyPath)
	if (f.certPath == "" || sameStamp(cst, f.certStamp)) && (f.keyPath == "" || sameStamp(kst, f.keyStamp)) {
		return false
	}
	certPEM, err := f.read(f.certPath, f.certData)
	var keyPEM []byte
	if err == nil {
		keyPEM, err = f.read(f.keyPath, f.keyData)
	}
	var pair *tls.Certificate
	if err == nil {
		pair, err = parsePair(certPEM, keyPEM, f.certName(), f.keyName())
	}
	if err != nil {
		f.logger.Error("cannot reload the client certificate and key; keeping the previous pair",
			"certificate", f.certName(), "key", f.keyName(), "error", err)
		return false
	}
	f.certStamp, f.keyStamp = cst, kst
	if sum := pairSum(certPEM, keyPEM); sum != f.pairSum {
		f.pairSum = sum
		f.pair.Store(pair)
		attrs := []any{"certificate", f.certName(), "key", f.keyName()}
		if pair.Leaf != nil {
			attrs = append(attrs, "subject", pair.Leaf.Subject.String(), "notAfter", pair.Leaf.NotAfter)
		}
		f.logger.Info("reloaded the client certificate", attrs...)
		return true
	}
	return false
}

func (f *tlsFiles) read(path string, data []byte) ([]byte, error) {
	if path == "" {
		return data, nil
	}
	return os.ReadFile(path) // the error names the file
}

func stat(path string) os.FileInfo {
	if path == "" {
		return nil
	}
	st, err := os.Stat(path) // follows symbolic links, as reading does
	if err != nil {
		return nil
	}
	return st
}

// sameStamp reports whether a and b describe the same, unchanged file. A
// missing stamp is never the same.
func sameStamp(a, b os.FileInfo) bool {
	return a != nil && b != nil && os.SameFile(a, b) && a.Size() == b.Size() && a.ModTime().Equal(b.ModTime())
}

func pairSum(certPEM, keyPEM []byte) [sha256.Size]byte {
	h := sha256.New()
	h.Write(certPEM)
	h.Write([]byte{0})
	h.Write(keyPEM)
	var sum [sha256.Size]byte
	h.Sum(sum[:0])
	return sum
}

func parseCA(b []byte) (*x509.CertPool, error) {
	pool := x509.NewCertPool()
	if !pool.AppendCertsFromPEM(b) {
		return nil, errors.New("no PEM certificates found")
	}
	return pool, nil
}

// parsePair parses a PEM client certificate (with any intermediates) and
// its key. Errors name certName or keyName, never key material.
func parsePair(certPEM, keyPEM []byte, certName, keyName string) (*tls.Certificate, error) {
	var leaf *pem.Block
	for rest := certPEM; leaf == nil; {
		var b *pem.Block
		if b, rest = pem.Decode(rest); b == nil {
			return nil, fmt.Errorf("%s: no PEM certificate found", certName)
		}
		if b.Type == "CERTIFICATE" {
			leaf = b
		}
	}
	if _, err := x509.ParseCertificate(leaf.Bytes); err != nil {
		return nil, fmt.Errorf("%s: %w", certName, err)
	}
	keys, err := pki.DecodeKeys(keyPEM)
	if err != nil {
		return nil, fmt.Errorf("%s: %w", keyName, err)
	}
	if len(keys) == 0 {
		return nil, fmt.Errorf("%s: no PEM private key found", keyName)
	}
	pair, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		return nil, fmt.Errorf("the certificate of %s and the key of %s do not go together: %w", certName, keyName, err)
	}
	return &pair, nil
}

// tlsRefused reports whether err is a failed TLS handshake: the server's
// certificate did not verify, or the server refused ours.
func tlsRefused(err error) bool {
	if isTLSVerification(err) {
		return true
	}
	var oe *net.OpError
	return errors.As(err, &oe) && oe.Op == "remote error"
}
