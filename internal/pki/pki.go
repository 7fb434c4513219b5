// Package pki issues the certificates Loom makes for itself: the CAs and
// serving certificates of webhook.Certs, and the CAs, serving and client
// certificates of testenv's control plane.
//
// Every key is ECDSA P-256. Certificates become valid Backdate before the
// time they are issued at, so that a peer whose clock is a little behind
// accepts a fresh one. Keys are encoded as PKCS #8; decoding also takes
// SEC 1 (EC) and PKCS #1 (RSA) keys, as kubeadm and openssl write them.
//
// The package reads no clock: callers pass the time to issue at, so that
// tests can use a fake one.
package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/pem"
	"fmt"
	"math/big"
	"net"
	"slices"
	"time"
)

// Backdate is how long before the time of issue a certificate becomes
// valid.
const Backdate = time.Hour

// PEM block types.
const (
	certBlock  = "CERTIFICATE"
	pkcs8Block = "PRIVATE KEY"
	sec1Block  = "EC PRIVATE KEY"
	pkcs1Block = "RSA PRIVATE KEY"
)

// CA is a certificate authority: a CA certificate and the key that signs
// with it.
type CA struct {
	Cert    *x509.Certificate
	Key     crypto.Signer
	CertPEM []byte
}

// Pair is an issued certificate, its key, and both encoded as PEM.
type Pair struct {
	Cert    *x509.Certificate
	Key     *ecdsa.PrivateKey
	CertPEM []byte
	KeyPEM  []byte
}

// NewKey generates an ECDSA P-256 key.
func NewKey() (*ecdsa.PrivateKey, error) {
	k, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		return nil, fmt.Errorf("pki: generating a key: %w", err)
	}
	return k, nil
}

// NewCA generates a self-signed CA named commonName, valid from Backdate
// before now until notAfter. It may sign end-entity certificates only
// (path length zero).
func NewCA(commonName string, now, notAfter time.Time) (*CA, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: commonName},
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		IsCA:                  true,
		BasicConstraintsValid: true,
		MaxPathLenZero:        true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageCRLSign | x509.KeyUsageDigitalSignature,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, key.Public(), key)
	if err != nil {
		return nil, fmt.Errorf("pki: making a CA certificate: %w", err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	return &CA{Cert: cert, Key: key, CertPEM: EncodeCert(cert)}, nil
}

// Request describes a certificate for CA.Issue to sign.
type Request struct {
	// CommonName and Organizations are the subject. Kubernetes reads a
	// client certificate's common name as the user name and its
	// organizations as the groups.
	CommonName    string
	Organizations []string
	// DNSNames and IPs are the subject alternative names.
	DNSNames []string
	IPs      []net.IP
	// Server makes a serving certificate (extended key usage server
	// auth); otherwise a client certificate (client auth).
	Server bool
	// NotAfter is when the certificate expires. Zero, or later than the
	// CA's expiry, means when the CA expires.
	NotAfter time.Time
}

// Issue generates a key and a certificate for it signed by ca, valid from
// Backdate before now until r.NotAfter (at most the CA's expiry).
func (ca *CA) Issue(r Request, now time.Time) (*Pair, error) {
	key, err := NewKey()
	if err != nil {
		return nil, err
	}
	serial, err := newSerial()
	if err != nil {
		return nil, err
	}
	notAfter := r.NotAfter
	if notAfter.IsZero() || ca.Cert.NotAfter.Before(notAfter) {
		notAfter = ca.Cert.NotAfter
	}
	usage := x509.ExtKeyUsageClientAuth
	if r.Server {
		usage = x509.ExtKeyUsageServerAuth
	}
	tmpl := &x509.Certificate{
		SerialNumber:          serial,
		Subject:               pkix.Name{CommonName: r.CommonName, Organization: slices.Clone(r.Organizations)},
		DNSNames:              slices.Clone(r.DNSNames),
		IPAddresses:           slices.Clone(r.IPs),
		NotBefore:             now.Add(-Backdate),
		NotAfter:              notAfter,
		KeyUsage:              x509.KeyUsageDigitalSignature,
		ExtKeyUsage:           []x509.ExtKeyUsage{usage},
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.Cert, key.Public(), ca.Key)
	if err != nil {
		return nil, fmt.Errorf("pki: signing a certificate for %q: %w", r.CommonName, err)
	}
	cert, err := x509.ParseCertificate(der)
	if err != nil {
		return nil, fmt.Errorf("pki: %w", err)
	}
	keyPEM, err := EncodeKey(key)
	if err != nil {
		return nil, err
	}
	return &Pair{Cert: cert, Key: key, CertPEM: EncodeCert(cert), KeyPEM: keyPEM}, nil
}

// newSerial returns a random serial number of up to 127 bits, never zero.
func newSerial() (*big.Int, error) {
	n, err := rand.Int(rand.Reader, new(big.Int).Lsh(big.NewInt(1), 127))
	if err != nil {
		return nil, fmt.Errorf("pki: certificate serial number: %w", err)
	}
	return n.Add(n, big.NewInt(1)), nil
}

// EncodeCert returns cert as a PEM CERTIFICATE block.
func EncodeCert(cert *x509.Certificate) []byte {
	return pem.EncodeToMemory(&pem.Block{Type: certBlock, Bytes: cert.Raw})
}

// EncodeKey returns key as a PEM PRIVATE KEY block (PKCS #8).
func EncodeKey(key crypto.Signer) ([]byte, error) {
	der, err := x509.MarshalPKCS8PrivateKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encoding a private key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: pkcs8Block, Bytes: der}), nil
}

// EncodePublicKey returns key as a PEM PUBLIC KEY block (PKIX).
func EncodePublicKey(key crypto.PublicKey) ([]byte, error) {
	der, err := x509.MarshalPKIXPublicKey(key)
	if err != nil {
		return nil, fmt.Errorf("pki: encoding a public key: %w", err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "PUBLIC KEY", Bytes: der}), nil
}

// DecodeCerts returns the certificates of the CERTIFICATE blocks of data,
// in order. Blocks of other types, and blocks that do not parse, are
// skipped.
func DecodeCerts(data []byte) []*x509.Certificate {
	var out []*x509.Certificate
	for {
		var b *pem.Block
		b, data = pem.Decode(data)
		if b == nil {
			return out
		}
		if b.Type != certBlock {
			continue
		}
		if cert, err := x509.ParseCertificate(b.Bytes); err == nil {
			out = append(out, cert)
		}
	}
}

// DecodeKeys returns the private keys of data, in order: PRIVATE KEY
// (PKCS #8), EC PRIVATE KEY (SEC 1) and RSA PRIVATE KEY (PKCS #1) blocks.
// Blocks of other types are skipped; a key block that does not parse, or
// holds a key that cannot sign, is an error. The errors name the block
// type, never key material, and have no prefix: callers say which file or
// field they read.
func DecodeKeys(data []byte) ([]crypto.Signer, error) {
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
		case pkcs8Block:
			key, err = x509.ParsePKCS8PrivateKey(b.Bytes)
		case sec1Block:
			key, err = x509.ParseECPrivateKey(b.Bytes)
		case pkcs1Block:
			key, err = x509.ParsePKCS1PrivateKey(b.Bytes)
		default:
			continue
		}
		if err != nil {
			return nil, fmt.Errorf("%s block: %w", b.Type, err)
		}
		s, ok := key.(crypto.Signer)
		if !ok {
			return nil, fmt.Errorf("%s block holds a %T, not a signing key", b.Type, key)
		}
		out = append(out, s)
	}
}

// Matches reports whether key is the private key of cert.
func Matches(cert *x509.Certificate, key crypto.Signer) bool {
	pub, ok := cert.PublicKey.(interface{ Equal(crypto.PublicKey) bool })
	return ok && pub.Equal(key.Public())
}
