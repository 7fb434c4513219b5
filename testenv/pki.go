package testenv

import (
	"fmt"
	"os"
	"path/filepath"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// certLifetime is long enough for any test or dev session; a dev state folder
// older than this gets new certificates (see loadOrCreateCA).
const certLifetime = 365 * 24 * time.Hour

// loadOrCreateCA reuses the CA in dir (name.crt, name.key) when it is there
// and valid for at least another day, so kubeconfigs written earlier for a
// dev cluster keep working; otherwise it writes a new one named cn.
func loadOrCreateCA(dir, name, cn string) (*pki.CA, error) {
	certPath, keyPath := filepath.Join(dir, name+".crt"), filepath.Join(dir, name+".key")
	if c, err := loadCA(certPath, keyPath); err == nil && time.Until(c.Cert.NotAfter) > 24*time.Hour {
		return c, nil
	}
	now := time.Now()
	c, err := pki.NewCA(cn, now, now.Add(certLifetime))
	if err != nil {
		return nil, fmt.Errorf("testenv: generate %s: %w", name, err)
	}
	keyPEM, err := pki.EncodeKey(c.Key)
	if err != nil {
		return nil, fmt.Errorf("testenv: generate %s: %w", name, err)
	}
	if err := writeFiles(map[string][]byte{certPath: c.CertPEM, keyPath: keyPEM}); err != nil {
		return nil, err
	}
	return c, nil
}

// loadCA reads a CA certificate and its key (PKCS #8, or SEC 1 as earlier
// versions wrote it).
func loadCA(certPath, keyPath string) (*pki.CA, error) {
	certPEM, err := os.ReadFile(certPath)
	if err != nil {
		return nil, err
	}
	keyPEM, err := os.ReadFile(keyPath)
	if err != nil {
		return nil, err
	}
	certs := pki.DecodeCerts(certPEM)
	keys, err := pki.DecodeKeys(keyPEM)
	if err != nil {
		return nil, err
	}
	if len(certs) != 1 || len(keys) != 1 || !certs[0].IsCA || !pki.Matches(certs[0], keys[0]) {
		return nil, fmt.Errorf("testenv: %s and %s are not one CA and its key", certPath, keyPath)
	}
	return &pki.CA{Cert: certs[0], Key: keys[0], CertPEM: certPEM}, nil
}

// issue signs a new certificate with ca, valid until ca expires, and
// returns it and its key as PEM.
func issue(ca *pki.CA, r pki.Request) (certPEM, keyPEM []byte, err error) {
	p, err := ca.Issue(r, time.Now())
	if err != nil {
		return nil, nil, err
	}
	return p.CertPEM, p.KeyPEM, nil
}

// newServiceAccountKey returns a key pair for signing service-account tokens.
func newServiceAccountKey() (privPEM, pubPEM []byte, err error) {
	key, err := pki.NewKey()
	if err != nil {
		return nil, nil, err
	}
	if privPEM, err = pki.EncodeKey(key); err != nil {
		return nil, nil, err
	}
	if pubPEM, err = pki.EncodePublicKey(key.Public()); err != nil {
		return nil, nil, err
	}
	return privPEM, pubPEM, nil
}

// writeFiles writes each file with mode 0600.
func writeFiles(files map[string][]byte) error {
	for p, b := range files {
		if err := os.WriteFile(p, b, 0o600); err != nil {
			return fmt.Errorf("testenv: %w", err)
		}
	}
	return nil
}
