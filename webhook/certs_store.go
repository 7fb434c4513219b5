package webhook

import (
	"bytes"
	"crypto"
	"crypto/x509"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"time"

	"github.com/loom-k8s/loom/internal/pki"
)

// certsCA is a CA of the bundle.
type certsCA struct {
	// CA is the certificate, its PEM, and its key: nil when Certs cannot
	// sign with it (a CA loaded without its key, or a given CA other than
	// the one matching CAKeyPair.Key).
	pki.CA
	// trustedAt is when hooks first succeeded with a bundle holding this
	// CA; zero while not known.
	trustedAt time.Time
}

// certsLeaf is a serving pair.
type certsLeaf struct {
	cert            *x509.Certificate
	certPEM, keyPEM []byte
	// bundleFromChain is the chain after the leaf in certPEM; nil when
	// certPEM holds the leaf only.
	bundleFromChain []byte
}

// certStore reads and writes the files of CertOptions.Dir. It decides
// nothing: Certs plans, then tells it what to write. Every write replaces
// the file by rename, so that a reader (Server, a sidecar) sees the old or
// the new file, never a torn one; a file that holds the data already is
// left alone.
type certStore struct {
	dir string
}

// prepare creates the folder (mode 0700) if it is missing.
func (s certStore) prepare() error {
	if err := os.MkdirAll(s.dir, 0o700); err != nil {
		return fmt.Errorf("webhook: certificate folder: %w", err)
	}
	return nil
}

// loadCAs reads the CAs of ca.crt, newest (by NotBefore) first, with the
// keys of ca.key that match them. Certificates that are not CAs and
// duplicates are skipped; expired ones are kept (the plan drops them).
// Unreadable files count as none: the plan then makes a CA anew.
func (s certStore) loadCAs() []*certsCA {
	bundlePEM, err := os.ReadFile(filepath.Join(s.dir, CABundleFile))
	if err != nil {
		return nil
	}
	keysPEM, _ := os.ReadFile(filepath.Join(s.dir, CAKeyFile))
	keys, _ := pki.DecodeKeys(keysPEM)
	var cas []*certsCA
	for _, cert := range pki.DecodeCerts(bundlePEM) {
		if !cert.IsCA || slices.ContainsFunc(cas, func(o *certsCA) bool { return bytes.Equal(o.Cert.Raw, cert.Raw) }) {
			continue
		}
		ca := &certsCA{CA: pki.CA{Cert: cert, CertPEM: pki.EncodeCert(cert)}}
		for _, k := range keys {
			if pki.Matches(cert, k) {
				ca.Key = k
			}
		}
		cas = append(cas, ca)
	}
	sort.SliceStable(cas, func(i, j int) bool { return cas[i].Cert.NotBefore.After(cas[j].Cert.NotBefore) })
	return cas
}

// loadServing reads the serving pair: nil and no error when a file is
// missing, an error (a *CertError) when they do not form a pair.
func (s certStore) loadServing() (*certsLeaf, error) {
	certPEM, err1 := os.ReadFile(filepath.Join(s.dir, ServingCertFile))
	keyPEM, err2 := os.ReadFile(filepath.Join(s.dir, ServingKeyFile))
	if err1 != nil || err2 != nil {
		return nil, nil
	}
	return parseCertsLeaf(certPEM, keyPEM, ServingCertFile, ServingKeyFile)
}

// writeCAs writes the keys of the CAs Certs can sign with to ca.key, then
// the CAs to ca.crt. The key first: a key without its certificate is
// ignored on load, a certificate without its key could not sign.
func (s certStore) writeCAs(cas []*certsCA) error {
	var keys []byte
	for _, ca := range cas {
		if ca.Key == nil {
			continue
		}
		k, err := pki.EncodeKey(ca.Key)
		if err != nil {
			return fmt.Errorf("webhook: %w", err)
		}
		keys = append(keys, k...)
	}
	if err := s.write(CAKeyFile, keys, 0o600); err != nil {
		return err
	}
	return s.writeBundle(joinCAPEM(cas))
}

// writeServing writes the serving pair: the certificate first, then the
// key. A Server that looks in between finds a pair that does not match and
// keeps the old one.
func (s certStore) writeServing(leaf *certsLeaf) error {
	if err := s.write(ServingCertFile, leaf.certPEM, 0o644); err != nil {
		return err
	}
	return s.write(ServingKeyFile, leaf.keyPEM, 0o600)
}

// writeBundle writes ca.crt.
func (s certStore) writeBundle(bundle []byte) error {
	return s.write(CABundleFile, bundle, 0o644)
}

// write replaces dir/name with data: written to a temporary file in dir,
// synced, then renamed over it. A file that holds data already is left
// alone (but given perm).
func (s certStore) write(name string, data []byte, perm os.FileMode) error {
	path := filepath.Join(s.dir, name)
	if old, err := os.ReadFile(path); err == nil && bytes.Equal(old, data) {
		if st, err := os.Stat(path); err == nil && st.Mode().Perm() != perm {
			if err := os.Chmod(path, perm); err != nil {
				return fmt.Errorf("webhook: %w", err)
			}
		}
		return nil
	}
	f, err := os.CreateTemp(s.dir, "."+name+".tmp-*")
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
	if d, err := os.Open(s.dir); err == nil {
		_ = d.Sync()
		_ = d.Close()
	}
	return nil
}

// parseCertsLeaf reads a serving pair: the first certificate of certPEM is
// the leaf; the others are its chain. certSrc and keySrc name where the
// PEM came from, for errors.
func parseCertsLeaf(certPEM, keyPEM []byte, certSrc, keySrc string) (*certsLeaf, error) {
	certs := pki.DecodeCerts(certPEM)
	if len(certs) == 0 {
		return nil, &CertError{Source: certSrc, Err: ErrCertNoPEM}
	}
	keys, err := decodeKeys(keyPEM)
	if err != nil {
		return nil, &CertError{Source: keySrc, Err: err}
	}
	if !pki.Matches(certs[0], keys[0]) {
		return nil, &CertError{Source: keySrc, Err: ErrCertKeyMismatch}
	}
	leaf := &certsLeaf{cert: certs[0], certPEM: bytes.Clone(certPEM), keyPEM: bytes.Clone(keyPEM)}
	for _, cert := range certs[1:] {
		leaf.bundleFromChain = append(leaf.bundleFromChain, pki.EncodeCert(cert)...)
	}
	return leaf, nil
}

// decodeKeys returns the private keys of data; none, or a key block that
// does not parse, is an error wrapping ErrCertNoPEM.
func decodeKeys(data []byte) ([]crypto.Signer, error) {
	keys, err := pki.DecodeKeys(data)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrCertNoPEM, err)
	}
	if len(keys) == 0 {
		return nil, ErrCertNoPEM
	}
	return keys, nil
}

// joinCAPEM returns the bundle of cas, in order.
func joinCAPEM(cas []*certsCA) []byte {
	var b []byte
	for _, ca := range cas {
		b = append(b, ca.CertPEM...)
	}
	return b
}
