package httpserver

import (
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
	"github.com/loom-k8s/loom/internal/pki"
)

func writePair(t *testing.T, dir, name string, now time.Time) *pki.Pair {
	t.Helper()
	ca, err := pki.NewCA("test-ca", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	pair, err := ca.Issue(pki.Request{CommonName: name, DNSNames: []string{"localhost"}, Server: true}, now)
	if err != nil {
		t.Fatal(err)
	}
	// Written as a Secret's volume is updated: elsewhere, then renamed.
	for file, data := range map[string][]byte{"tls.crt": pair.CertPEM, "tls.key": pair.KeyPEM} {
		tmp := filepath.Join(dir, "."+file)
		if err := os.WriteFile(tmp, data, 0o600); err != nil {
			t.Fatal(err)
		}
		if err := os.Rename(tmp, filepath.Join(dir, file)); err != nil {
			t.Fatal(err)
		}
	}
	return pair
}

func TestCertFilesReload(t *testing.T) {
	dir := t.TempDir()
	clk := clock.NewFake(time.Now())
	first := writePair(t, dir, "first", clk.Now())
	crt, key := filepath.Join(dir, "tls.crt"), filepath.Join(dir, "tls.key")
	f, err := newCertFiles(crt, key, slog.New(slog.DiscardHandler), clk)
	if err != nil {
		t.Fatal(err)
	}
	serving := func() string {
		t.Helper()
		c, err := f.GetCertificate(nil)
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range []*pki.Pair{first} {
			if string(c.Certificate[0]) == string(p.Cert.Raw) {
				return p.Cert.Subject.CommonName
			}
		}
		return "another"
	}
	if got := serving(); got != "first" {
		t.Fatalf("serving %s", got)
	}
	second := writePair(t, dir, "second", clk.Now())
	// Not looked at again before CertCheckInterval.
	if got := serving(); got != "first" {
		t.Errorf("serving %s before the next check", got)
	}
	clk.Step(CertCheckInterval)
	c, err := f.GetCertificate(nil)
	if err != nil || string(c.Certificate[0]) != string(second.Cert.Raw) {
		t.Errorf("after the next check: not the new pair (%v)", err)
	}
	// A half-written pair keeps the old one in service.
	if err := os.WriteFile(key, []byte("not a key"), 0o600); err != nil {
		t.Fatal(err)
	}
	clk.Step(CertCheckInterval)
	c, err = f.GetCertificate(nil)
	if err != nil || string(c.Certificate[0]) != string(second.Cert.Raw) {
		t.Errorf("with a broken key file: %v; want the old pair kept", err)
	}

	if _, err := NewCertFiles(filepath.Join(dir, "missing.crt"), key, slog.New(slog.DiscardHandler)); err == nil {
		t.Error("NewCertFiles without the files: no error")
	}
}
