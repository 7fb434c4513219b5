package testenv

import (
	"crypto/ecdsa"
	"crypto/x509"
	"encoding/pem"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// TestLoadOrCreateCA: a kept state folder's CA is reused while it has more
// than a day left and its key matches, whichever PEM form the key has;
// otherwise a new one is written.
func TestLoadOrCreateCA(t *testing.T) {
	now := time.Now()
	writeCA := func(t *testing.T, dir string, ca *pki.CA, keyPEM []byte) {
		t.Helper()
		if err := writeFiles(map[string][]byte{filepath.Join(dir, "ca.crt"): ca.CertPEM, filepath.Join(dir, "ca.key"): keyPEM}); err != nil {
			t.Fatal(err)
		}
	}
	newCA := func(t *testing.T, lifetime time.Duration) *pki.CA {
		t.Helper()
		ca, err := pki.NewCA("earlier", now, now.Add(lifetime))
		if err != nil {
			t.Fatal(err)
		}
		return ca
	}
	pkcs8 := func(t *testing.T, ca *pki.CA) []byte {
		t.Helper()
		b, err := pki.EncodeKey(ca.Key)
		if err != nil {
			t.Fatal(err)
		}
		return b
	}
	for _, tc := range []struct {
		name   string
		before func(t *testing.T, dir string) *pki.CA // the CA in the folder; nil when none
		reused bool
	}{
		{name: "empty folder"},
		{name: "valid CA, PKCS #8 key", reused: true, before: func(t *testing.T, dir string) *pki.CA {
			ca := newCA(t, certLifetime)
			writeCA(t, dir, ca, pkcs8(t, ca))
			return ca
		}},
		{name: "valid CA, SEC 1 key", reused: true, before: func(t *testing.T, dir string) *pki.CA {
			ca := newCA(t, certLifetime)
			der, err := x509.MarshalECPrivateKey(ca.Key.(*ecdsa.PrivateKey))
			if err != nil {
				t.Fatal(err)
			}
			writeCA(t, dir, ca, pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: der}))
			return ca
		}},
		{name: "less than a day left", before: func(t *testing.T, dir string) *pki.CA {
			ca := newCA(t, 12*time.Hour)
			writeCA(t, dir, ca, pkcs8(t, ca))
			return ca
		}},
		{name: "key of another CA", before: func(t *testing.T, dir string) *pki.CA {
			ca := newCA(t, certLifetime)
			writeCA(t, dir, ca, pkcs8(t, newCA(t, certLifetime)))
			return ca
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			dir := t.TempDir()
			var old *pki.CA
			if tc.before != nil {
				old = tc.before(t, dir)
			}
			ca, err := loadOrCreateCA(dir, "ca", "loom-testenv-ca")
			if err != nil {
				t.Fatal(err)
			}
			if reused := old != nil && ca.Cert.Equal(old.Cert); reused != tc.reused {
				t.Fatalf("reused the CA in the folder: %v, want %v", reused, tc.reused)
			}
			if !tc.reused && (ca.Cert.Subject.CommonName != "loom-testenv-ca" || ca.Cert.NotAfter.Before(now.Add(certLifetime-time.Minute))) {
				t.Errorf("new CA %q valid until %v", ca.Cert.Subject.CommonName, ca.Cert.NotAfter)
			}
			// What is in the folder now loads as this CA, and can issue.
			again, err := loadCA(filepath.Join(dir, "ca.crt"), filepath.Join(dir, "ca.key"))
			if err != nil || !again.Cert.Equal(ca.Cert) || !pki.Matches(ca.Cert, again.Key) {
				t.Fatalf("folder does not hold the CA: %v", err)
			}
			certPEM, _, err := issue(ca, pki.Request{CommonName: "alice"})
			if err != nil {
				t.Fatal(err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			leaf := pki.DecodeCerts(certPEM)[0]
			if _, err := leaf.Verify(x509.VerifyOptions{Roots: pool, KeyUsages: []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth}}); err != nil {
				t.Errorf("issued certificate does not verify: %v", err)
			}
			st, err := os.Stat(filepath.Join(dir, "ca.key"))
			if err != nil {
				t.Fatal(err)
			}
			if st.Mode().Perm() != 0o600 {
				t.Errorf("ca.key has mode %v, want 0600", st.Mode().Perm())
			}
		})
	}
}
