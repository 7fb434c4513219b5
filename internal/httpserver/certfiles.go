package httpserver

import (
	"bytes"
	"crypto/tls"
	"fmt"
	"log/slog"
	"os"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// CertCheckInterval is how often CertFiles looks at its files again.
const CertCheckInterval = 10 * time.Second

// CertFiles serves a certificate and key read from two PEM files, such as
// the tls.crt and tls.key of a mounted kubernetes.io/tls Secret, and reads
// them again when their size or modification time changes, at most once
// per CertCheckInterval (or the interval given to LazyCertFiles). A new pair that does not load (the certificate
// written, the key not yet) keeps the old one in service, and is tried
// again at the next check.
type CertFiles struct {
	certFile, keyFile string
	interval          time.Duration
	log               *slog.Logger
	clock             clock.Clock

	mu        sync.Mutex
	cert      *tls.Certificate
	stamp     [2]fileStamp
	lastCheck time.Time
}

type fileStamp struct {
	size int64
	mod  time.Time
}

// NewCertFiles reads the pair in certFile and keyFile, and fails when it
// does not load. log receives a line when a new pair is loaded, or when
// one fails to load while the old one stays in service.
func NewCertFiles(certFile, keyFile string, log *slog.Logger) (*CertFiles, error) {
	return newCertFiles(certFile, keyFile, log, clock.Real{})
}

func newCertFiles(certFile, keyFile string, log *slog.Logger, c clock.Clock) (*CertFiles, error) {
	f := LazyCertFiles(certFile, keyFile, CertCheckInterval, c, log)
	if _, err := f.GetCertificate(nil); err != nil {
		return nil, err
	}
	return f, nil
}

// LazyCertFiles is NewCertFiles for files that may not exist yet (another
// part is about to write them): it reads nothing now, and the first
// GetCertificate fails until they load. It checks them at most once per
// interval, by the clock c (nil: the real one).
func LazyCertFiles(certFile, keyFile string, interval time.Duration, c clock.Clock, log *slog.Logger) *CertFiles {
	return &CertFiles{certFile: certFile, keyFile: keyFile, interval: interval, log: log, clock: clock.OrReal(c)}
}

// GetCertificate returns the pair in service; it is a
// tls.Config.GetCertificate.
func (f *CertFiles) GetCertificate(*tls.ClientHelloInfo) (*tls.Certificate, error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	now := f.clock.Now()
	if f.cert != nil && now.Sub(f.lastCheck) < f.interval {
		return f.cert, nil
	}
	f.lastCheck = now
	stamp, err := stamps(f.certFile, f.keyFile)
	if err == nil && f.cert != nil && stamp == f.stamp {
		return f.cert, nil
	}
	var certPEM, keyPEM []byte
	if err == nil {
		certPEM, err = os.ReadFile(f.certFile)
	}
	if err == nil {
		keyPEM, err = os.ReadFile(f.keyFile)
	}
	var pair tls.Certificate
	if err == nil {
		pair, err = tls.X509KeyPair(certPEM, keyPEM)
	}
	if err != nil {
		if f.cert != nil {
			f.log.Warn("new serving certificate not loaded; keeping the old one", "file", f.certFile, "err", err)
			return f.cert, nil
		}
		return nil, fmt.Errorf("serving certificate %s: %w", f.certFile, err)
	}
	if f.cert == nil || !bytes.Equal(f.cert.Certificate[0], pair.Certificate[0]) {
		f.log.Info("serving certificate loaded", "file", f.certFile)
		f.cert = &pair
	}
	f.stamp = stamp
	return f.cert, nil
}

func stamps(files ...string) ([2]fileStamp, error) {
	var out [2]fileStamp
	for i, name := range files {
		st, err := os.Stat(name)
		if err != nil {
			return out, err
		}
		out[i] = fileStamp{size: st.Size(), mod: st.ModTime()}
	}
	return out, nil
}
