package pki

import (
	"crypto"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/rsa"
	"crypto/x509"
	"encoding/pem"
	"net"
	"slices"
	"strings"
	"testing"
	"time"
)

var epoch = time.Date(2026, 3, 1, 12, 0, 0, 0, time.UTC)

func mustCA(t *testing.T, notAfter time.Time) *CA {
	t.Helper()
	ca, err := NewCA("test CA", epoch, notAfter)
	if err != nil {
		t.Fatal(err)
	}
	return ca
}

func TestNewCA(t *testing.T) {
	ca := mustCA(t, epoch.Add(24*time.Hour))
	c := ca.Cert
	for _, check := range []struct {
		what string
		ok   bool
	}{
		{"is a CA", c.IsCA && c.BasicConstraintsValid},
		{"signs end entities only", c.MaxPathLen == 0 && c.MaxPathLenZero},
		{"may sign certificates", c.KeyUsage&x509.KeyUsageCertSign != 0},
		{"named", c.Subject.CommonName == "test CA"},
		{"valid from Backdate before now", c.NotBefore.Equal(epoch.Add(-Backdate))},
		{"valid until notAfter", c.NotAfter.Equal(epoch.Add(24 * time.Hour))},
		{"self-signed", c.CheckSignatureFrom(c) == nil},
		{"key is P-256", c.PublicKey.(*ecdsa.PublicKey).Curve == elliptic.P256()},
		{"key matches", Matches(c, ca.Key)},
		{"serial positive", c.SerialNumber.Sign() > 0},
		{"PEM is the certificate", slices.Equal(DecodeCerts(ca.CertPEM)[0].Raw, c.Raw)},
	} {
		if !check.ok {
			t.Errorf("CA: not %s", check.what)
		}
	}
	other := mustCA(t, epoch.Add(24*time.Hour))
	if other.Cert.SerialNumber.Cmp(c.SerialNumber) == 0 {
		t.Error("two CAs share a serial number")
	}
}

func TestIssue(t *testing.T) {
	caEnd := epoch.Add(30 * 24 * time.Hour)
	ca := mustCA(t, caEnd)
	ip := net.ParseIP("127.0.0.1")
	for _, tc := range []struct {
		name      string
		req       Request
		wantUsage x509.ExtKeyUsage
		wantEnd   time.Time
		verifyAs  string // a name to verify the serving certificate for
	}{
		{
			name:      "serving, own expiry",
			req:       Request{CommonName: "svc", DNSNames: []string{"svc.ns.svc"}, IPs: []net.IP{ip}, Server: true, NotAfter: epoch.Add(48 * time.Hour)},
			wantUsage: x509.ExtKeyUsageServerAuth,
			wantEnd:   epoch.Add(48 * time.Hour),
			verifyAs:  "svc.ns.svc",
		},
		{
			name:      "serving, cut short by the CA",
			req:       Request{CommonName: "127.0.0.1", IPs: []net.IP{ip}, Server: true, NotAfter: caEnd.Add(time.Hour)},
			wantUsage: x509.ExtKeyUsageServerAuth,
			wantEnd:   caEnd,
			verifyAs:  "127.0.0.1",
		},
		{
			name:      "client, as long as the CA",
			req:       Request{CommonName: "alice", Organizations: []string{"devs", "system:masters"}},
			wantUsage: x509.ExtKeyUsageClientAuth,
			wantEnd:   caEnd,
		},
	} {
		t.Run(tc.name, func(t *testing.T) {
			p, err := ca.Issue(tc.req, epoch)
			if err != nil {
				t.Fatal(err)
			}
			c := p.Cert
			if c.IsCA {
				t.Error("issued a CA")
			}
			if !c.NotBefore.Equal(epoch.Add(-Backdate)) || !c.NotAfter.Equal(tc.wantEnd) {
				t.Errorf("valid %v to %v, want %v to %v", c.NotBefore, c.NotAfter, epoch.Add(-Backdate), tc.wantEnd)
			}
			if !slices.Equal(c.ExtKeyUsage, []x509.ExtKeyUsage{tc.wantUsage}) {
				t.Errorf("extended key usage %v, want %v", c.ExtKeyUsage, tc.wantUsage)
			}
			if c.Subject.CommonName != tc.req.CommonName || !slices.Equal(c.Subject.Organization, tc.req.Organizations) {
				t.Errorf("subject %v, want CN %q O %v", c.Subject, tc.req.CommonName, tc.req.Organizations)
			}
			if !slices.Equal(c.DNSNames, tc.req.DNSNames) || len(c.IPAddresses) != len(tc.req.IPs) {
				t.Errorf("SANs %v %v, want %v %v", c.DNSNames, c.IPAddresses, tc.req.DNSNames, tc.req.IPs)
			}
			if p.Key.Curve != elliptic.P256() || !Matches(c, p.Key) {
				t.Error("key is not the certificate's P-256 key")
			}
			// The PEM forms decode to the same certificate and key.
			if certs := DecodeCerts(p.CertPEM); len(certs) != 1 || !certs[0].Equal(c) {
				t.Error("CertPEM is not the certificate")
			}
			if keys, err := DecodeKeys(p.KeyPEM); err != nil || len(keys) != 1 || !Matches(c, keys[0]) {
				t.Errorf("KeyPEM is not the key: %v", err)
			}
			pool := x509.NewCertPool()
			pool.AddCert(ca.Cert)
			if _, err := c.Verify(x509.VerifyOptions{
				DNSName: tc.verifyAs, Roots: pool, CurrentTime: epoch,
				KeyUsages: []x509.ExtKeyUsage{tc.wantUsage},
			}); err != nil {
				t.Errorf("does not verify against its CA: %v", err)
			}
		})
	}
}

func TestDecodeKeys(t *testing.T) {
	ec, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	rsaKey, err := rsa.GenerateKey(rand.Reader, 2048)
	if err != nil {
		t.Fatal(err)
	}
	pkcs8, err := EncodeKey(ec)
	if err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(string(pkcs8), "-----BEGIN PRIVATE KEY-----") {
		t.Errorf("EncodeKey wrote %q, want a PRIVATE KEY block", strings.SplitN(string(pkcs8), "\n", 2)[0])
	}
	sec1DER, _ := x509.MarshalECPrivateKey(ec)
	sec1 := pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: sec1DER})
	pkcs1 := pem.EncodeToMemory(&pem.Block{Type: "RSA PRIVATE KEY", Bytes: x509.MarshalPKCS1PrivateKey(rsaKey)})
	cert := mustCA(t, epoch.Add(time.Hour)).CertPEM
	garbage := []byte("-----BEGIN PRIVATE KEY-----\nAAAA\n-----END PRIVATE KEY-----\n")

	for _, tc := range []struct {
		name    string
		data    []byte
		want    []crypto.PublicKey
		wantErr string
	}{
		{"PKCS #8", pkcs8, []crypto.PublicKey{ec.Public()}, ""},
		{"SEC 1", sec1, []crypto.PublicKey{ec.Public()}, ""},
		{"PKCS #1", pkcs1, []crypto.PublicKey{rsaKey.Public()}, ""},
		{"several, other blocks skipped", slices.Concat(cert, pkcs8, []byte("text between\n"), pkcs1), []crypto.PublicKey{ec.Public(), rsaKey.Public()}, ""},
		{"none", cert, nil, ""},
		{"garbage key", garbage, nil, "PRIVATE KEY block"},
	} {
		t.Run(tc.name, func(t *testing.T) {
			keys, err := DecodeKeys(tc.data)
			if tc.wantErr != "" {
				if err == nil || !strings.Contains(err.Error(), tc.wantErr) {
					t.Fatalf("error %v, want one naming %q", err, tc.wantErr)
				}
				if strings.Contains(err.Error(), "AAAA") {
					t.Error("error holds key material")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			if len(keys) != len(tc.want) {
				t.Fatalf("%d keys, want %d", len(keys), len(tc.want))
			}
			for i, k := range keys {
				if !k.Public().(interface{ Equal(crypto.PublicKey) bool }).Equal(tc.want[i]) {
					t.Errorf("key %d is not the one encoded", i)
				}
			}
		})
	}
}

func TestDecodeCertsSkips(t *testing.T) {
	a, b := mustCA(t, epoch.Add(time.Hour)), mustCA(t, epoch.Add(time.Hour))
	key, _ := EncodeKey(a.Key)
	bad := []byte("-----BEGIN CERTIFICATE-----\nAAAA\n-----END CERTIFICATE-----\n")
	got := DecodeCerts(slices.Concat(a.CertPEM, key, bad, b.CertPEM))
	if len(got) != 2 || !got[0].Equal(a.Cert) || !got[1].Equal(b.Cert) {
		t.Fatalf("decoded %d certificates, want the two CAs in order", len(got))
	}
	if Matches(a.Cert, b.Key) {
		t.Error("Matches took another CA's key")
	}
}

func TestEncodePublicKey(t *testing.T) {
	k, err := NewKey()
	if err != nil {
		t.Fatal(err)
	}
	b, err := EncodePublicKey(k.Public())
	if err != nil {
		t.Fatal(err)
	}
	blk, _ := pem.Decode(b)
	if blk == nil || blk.Type != "PUBLIC KEY" {
		t.Fatalf("not a PUBLIC KEY block: %q", b)
	}
	pub, err := x509.ParsePKIXPublicKey(blk.Bytes)
	if err != nil || !k.PublicKey.Equal(pub) {
		t.Fatalf("does not decode to the key: %v", err)
	}
}
