package webhook_test

import (
	"bytes"
	"context"
	"crypto/tls"
	"crypto/x509"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/pki"
	"github.com/loom-k8s/loom/webhook"
)

// caReplica is one replica of a webhook with a shared CA: its SharedCA,
// Certs and Server, running until stop.
type caReplica struct {
	shared *webhook.SharedCA
	addr   string
	stop   func()
}

func startCAReplica(t *testing.T, opts webhook.SharedCAOptions, ca *webhook.CAKeyPair, hook func(context.Context, []byte) error) *caReplica {
	t.Helper()
	shared, err := webhook.NewSharedCA(opts)
	if err != nil {
		t.Fatal(err)
	}
	if hook != nil {
		shared.OnRotate(hook)
	}
	dir := t.TempDir()
	certs, err := webhook.NewCerts(webhook.CertOptions{Dir: dir, IPs: []net.IP{net.ParseIP("127.0.0.1")}, CA: ca})
	if err != nil {
		t.Fatal(err)
	}
	if err := certs.Ensure(); err != nil {
		t.Fatal(err)
	}
	shared.Follow(certs)
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: dir, ReloadInterval: 10 * time.Millisecond})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for _, run := range []func(context.Context) error{srv.Start, certs.Start, shared.Start} {
		wg.Go(func() {
			if err := run(ctx); err != nil {
				t.Errorf("replica: %v", err)
			}
		})
	}
	var once sync.Once
	stop := func() { once.Do(func() { cancel(); wg.Wait() }) }
	t.Cleanup(stop)
	return &caReplica{shared: shared, addr: srv.Addr().String(), stop: stop}
}

// TestSharedCAAcrossReplicas: two replicas that load the CA at once share
// one Secret and one CA. While the leader rotates the CA, a caller that
// trusts only the bundle last published (half a second late) completes every handshake with
// both replicas; afterwards the bundle holds only the new CA, and both
// replicas serve certificates it signed.
func TestSharedCAAcrossReplicas(t *testing.T) {
	rc := adminREST(t)
	ns := namespace(t, rc, "shared-ca")
	opts := webhook.SharedCAOptions{REST: rc, Namespace: ns, Name: "hook-ca", PropagationDelay: 2 * time.Second}

	// Both load at once: one creates, the other reads its CA.
	var pairs [2]*webhook.CAKeyPair
	var wg sync.WaitGroup
	for i := range pairs {
		wg.Go(func() {
			s, err := webhook.NewSharedCA(opts)
			if err != nil {
				t.Error(err)
				return
			}
			if pairs[i], err = s.Load(t.Context()); err != nil {
				t.Error(err)
			}
		})
	}
	wg.Wait()
	if t.Failed() {
		t.FailNow()
	}
	if !bytes.Equal(pairs[0].Cert, pairs[1].Cert) || !bytes.Equal(pairs[0].Key, pairs[1].Key) {
		t.Fatal("two replicas loading at once got different CAs")
	}
	first := pki.DecodeCerts(pairs[0].Cert)[0]

	// The leader, replica a, publishes into what a caller trusts.
	// The caller trusts a published bundle only half a second after its
	// publication, as an API server picks a changed webhook
	// configuration up a moment later.
	const lag = 500 * time.Millisecond
	type publication struct {
		at   time.Time
		pool *x509.CertPool
	}
	var mu sync.Mutex
	var published []publication
	var publications atomic.Int32
	trusted := func() *x509.CertPool {
		mu.Lock()
		defer mu.Unlock()
		p := published[0].pool
		for _, pub := range published {
			if time.Since(pub.at) >= lag {
				p = pub.pool
			}
		}
		return p
	}
	a := startCAReplica(t, opts, pairs[0], func(_ context.Context, bundle []byte) error {
		p := x509.NewCertPool()
		if !p.AppendCertsFromPEM(bundle) {
			return errors.New("empty bundle")
		}
		mu.Lock()
		published = append(published, publication{time.Now(), p})
		mu.Unlock()
		publications.Add(1)
		return nil
	})
	b := startCAReplica(t, opts, pairs[1], nil)
	leader := a.shared
	leadCtx, stopLead := context.WithCancel(context.Background())
	leadDone := make(chan struct{})
	go func() { defer close(leadDone); _ = leader.Lead(leadCtx) }()
	t.Cleanup(func() { stopLead(); <-leadDone })
	waitFor(t, "the first publication", func() bool { return publications.Load() > 0 })

	// A caller that handshakes with both replicas all along.
	var handshakes, failures atomic.Int32
	var lastErr atomic.Value
	callCtx, stopCalls := context.WithCancel(context.Background())
	callsDone := make(chan struct{})
	go func() {
		defer close(callsDone)
		for callCtx.Err() == nil {
			for _, r := range []*caReplica{a, b} {
				c, err := tls.Dial("tcp", r.addr, &tls.Config{RootCAs: trusted()})
				handshakes.Add(1)
				if err != nil {
					failures.Add(1)
					lastErr.Store(err)
					continue
				}
				c.Close()
			}
			time.Sleep(5 * time.Millisecond)
		}
	}()

	if err := b.shared.Rotate(t.Context()); err != nil {
		t.Fatal(err)
	}
	secrets, err := client.For[corev1.Secret](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	served := func(addr string) *x509.Certificate {
		c, err := tls.Dial("tcp", addr, &tls.Config{InsecureSkipVerify: true})
		if err != nil {
			return nil
		}
		defer c.Close()
		return c.ConnectionState().PeerCertificates[0]
	}
	var final *x509.Certificate
	waitFor(t, "the rotation to end with one new CA that signs both replicas' certificates", func() bool {
		sec, err := secrets.Namespace(ns).Get(t.Context(), "hook-ca", metav1.GetOptions{})
		if err != nil {
			return false
		}
		cas := pki.DecodeCerts(sec.Data[webhook.SharedCACertKey])
		if len(cas) != 1 || cas[0].Equal(first) {
			return false
		}
		for _, r := range []*caReplica{a, b} {
			leaf := served(r.addr)
			if leaf == nil || leaf.CheckSignatureFrom(cas[0]) != nil {
				return false
			}
		}
		final = cas[0]
		return true
	})
	// One more round of handshakes against the bundle as it ends.
	waitFor(t, "handshakes after the rotation", func() bool {
		n := handshakes.Load()
		time.Sleep(50 * time.Millisecond)
		return handshakes.Load() > n+4
	})
	stopCalls()
	<-callsDone
	if f := failures.Load(); f > 0 {
		t.Fatalf("%d of %d handshakes failed during the rotation; last: %v", f, handshakes.Load(), lastErr.Load())
	}
	if publications.Load() < 3 {
		t.Errorf("%d publications; want at least 3 (start, new CA joined, old CA left)", publications.Load())
	}
	t.Logf("rotation to CA %s: %d handshakes, none failed; %d publications", final.SerialNumber.Text(16), handshakes.Load(), publications.Load())
}

// TestSharedCABadSecret: a Secret whose signer has no key is repaired by
// Load with a new CA that keeps the old certificates in the bundle; bad
// options are typed errors.
func TestSharedCABadSecret(t *testing.T) {
	rc := adminREST(t)
	ns := namespace(t, rc, "shared-ca-bad")
	now := time.Now()
	ca, err := pki.NewCA("orphan", now, now.Add(time.Hour))
	if err != nil {
		t.Fatal(err)
	}
	secrets, err := client.For[corev1.Secret](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	_, err = secrets.Create(t.Context(), &corev1.Secret{
		ObjectMeta: metav1.ObjectMeta{Name: "hook-ca", Namespace: ns,
			Annotations: map[string]string{webhook.SharedCASignerAnnotation: ca.Cert.SerialNumber.Text(16)}},
		Data: map[string][]byte{webhook.SharedCACertKey: ca.CertPEM, webhook.SharedCAKeyKey: []byte("garbage")},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s, err := webhook.NewSharedCA(webhook.SharedCAOptions{REST: rc, Namespace: ns, Name: "hook-ca"})
	if err != nil {
		t.Fatal(err)
	}
	pair, err := s.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	cas := pki.DecodeCerts(pair.Cert)
	if len(cas) != 2 || cas[0].Equal(ca.Cert) || !cas[1].Equal(ca.Cert) {
		t.Fatalf("repaired bundle: %d CAs; want the new one, then the orphan", len(cas))
	}
	if _, err := webhook.NewCerts(webhook.CertOptions{Dir: t.TempDir(), IPs: []net.IP{net.ParseIP("127.0.0.1")}, CA: pair}); err != nil {
		t.Fatalf("the repaired CA does not sign: %v", err)
	}

	for _, o := range []webhook.SharedCAOptions{
		{Namespace: ns, Name: "x"},
		{REST: rc, Name: "x"},
		{REST: rc, Namespace: ns, Name: "x", CAValidity: time.Hour, RenewBefore: 2 * time.Hour},
		{REST: rc, Namespace: ns, Name: "x", PropagationDelay: -1},
	} {
		if _, err := webhook.NewSharedCA(o); !errors.Is(err, webhook.ErrSharedCA) {
			t.Errorf("NewSharedCA(%+v): %v, want ErrSharedCA", o, err)
		}
	}
}

// waitFor polls cond until it holds, for up to two minutes.
func waitFor(t *testing.T, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(2 * time.Minute)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(20 * time.Millisecond)
	}
}
