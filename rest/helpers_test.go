package rest

import (
	"bytes"
	"crypto/ecdsa"
	"crypto/elliptic"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"crypto/x509/pkix"
	"encoding/binary"
	"encoding/json"
	"encoding/pem"
	"io"
	"log"
	"math/big"
	"net"
	"net/http"
	"net/http/httptest"
	runtime2 "runtime"
	"strconv"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/config"
)

// testCA is a throw-away certificate authority for TLS tests.
type testCA struct {
	cert    *x509.Certificate
	key     *ecdsa.PrivateKey
	certPEM []byte
}

func newTestCA(t testing.TB, name string) *testCA {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber:          big.NewInt(1),
		Subject:               pkix.Name{CommonName: name},
		NotBefore:             time.Now().Add(-time.Hour),
		NotAfter:              time.Now().Add(24 * time.Hour),
		IsCA:                  true,
		KeyUsage:              x509.KeyUsageCertSign | x509.KeyUsageDigitalSignature,
		BasicConstraintsValid: true,
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, tmpl, &key.PublicKey, key)
	if err != nil {
		t.Fatal(err)
	}
	cert, _ := x509.ParseCertificate(der)
	return &testCA{cert: cert, key: key, certPEM: pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der})}
}

// issue returns a PEM certificate and key signed by the CA.
func (ca *testCA) issue(t testing.TB, cn string, server bool) (certPEM, keyPEM []byte) {
	t.Helper()
	return ca.issueValid(t, cn, server, time.Now().Add(-time.Hour), time.Now().Add(24*time.Hour))
}

// issueValid is issue with an explicit validity window.
func (ca *testCA) issueValid(t testing.TB, cn string, server bool, notBefore, notAfter time.Time) (certPEM, keyPEM []byte) {
	t.Helper()
	key, err := ecdsa.GenerateKey(elliptic.P256(), rand.Reader)
	if err != nil {
		t.Fatal(err)
	}
	tmpl := &x509.Certificate{
		SerialNumber: big.NewInt(time.Now().UnixNano()),
		Subject:      pkix.Name{CommonName: cn},
		NotBefore:    notBefore,
		NotAfter:     notAfter,
		KeyUsage:     x509.KeyUsageDigitalSignature,
		ExtKeyUsage:  []x509.ExtKeyUsage{x509.ExtKeyUsageClientAuth},
	}
	if server {
		tmpl.ExtKeyUsage = []x509.ExtKeyUsage{x509.ExtKeyUsageServerAuth}
		tmpl.IPAddresses = []net.IP{net.ParseIP("127.0.0.1")}
		tmpl.DNSNames = []string{"localhost"}
	}
	der, err := x509.CreateCertificate(rand.Reader, tmpl, ca.cert, &key.PublicKey, ca.key)
	if err != nil {
		t.Fatal(err)
	}
	kb, err := x509.MarshalECPrivateKey(key)
	if err != nil {
		t.Fatal(err)
	}
	return pem.EncodeToMemory(&pem.Block{Type: "CERTIFICATE", Bytes: der}), pem.EncodeToMemory(&pem.Block{Type: "EC PRIVATE KEY", Bytes: kb})
}

// newTLSServer starts an HTTPS server with a certificate from ca. If
// clientCA is not nil, client certificates signed by it are required.
func newTLSServer(t testing.TB, ca, clientCA *testCA, h http.Handler) *httptest.Server {
	t.Helper()
	certPEM, keyPEM := ca.issue(t, "server", true)
	cert, err := tls.X509KeyPair(certPEM, keyPEM)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewUnstartedServer(h)
	srv.TLS = &tls.Config{Certificates: []tls.Certificate{cert}}
	if clientCA != nil {
		pool := x509.NewCertPool()
		pool.AddCert(clientCA.cert)
		srv.TLS.ClientCAs = pool
		srv.TLS.ClientAuth = tls.RequireAndVerifyClientCert
	}
	srv.EnableHTTP2 = true
	srv.Config.ErrorLog = log.New(io.Discard, "", 0)
	srv.StartTLS()
	t.Cleanup(srv.Close)
	return srv
}

// newTestClient returns a client for a plain-HTTP httptest server.
func newTestClient(t testing.TB, h http.Handler, opts Options, mut ...func(*config.Config)) (*Client, *httptest.Server) {
	t.Helper()
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	cfg := config.Config{Host: srv.URL}
	for _, m := range mut {
		m(&cfg)
	}
	c, err := New(cfg, opts)
	if err != nil {
		t.Fatal(err)
	}
	return c, srv
}

func testPod(name, rv string) *corev1.Pod {
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: "default", ResourceVersion: rv, UID: "uid-" + "1234",
			Labels:            map[string]string{"app": "web", "tier": "front"},
			Annotations:       map[string]string{"note": "x"},
			CreationTimestamp: metav1.Date(2026, 1, 2, 3, 4, 5, 0, time.UTC),
		},
		Spec: corev1.PodSpec{
			NodeName: "node-1",
			Containers: []corev1.Container{{
				Name: "app", Image: "registry.example/app:v1",
				Args:      []string{"--port=8080"},
				Ports:     []corev1.ContainerPort{{ContainerPort: 8080, Protocol: corev1.ProtocolTCP}},
				Resources: corev1.ResourceRequirements{Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m")}},
				Env:       []corev1.EnvVar{{Name: "MODE", Value: "prod"}},
			}},
		},
		Status: corev1.PodStatus{Phase: corev1.PodRunning, PodIP: "10.0.0.7"},
	}
}

// protoObject encodes obj the way the API server does: k8s\x00 + Unknown.
func protoObject(t testing.TB, apiVersion, kind string, obj interface{ Marshal() ([]byte, error) }) []byte {
	t.Helper()
	raw, err := obj.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, err := u.Marshal()
	if err != nil {
		t.Fatal(err)
	}
	return append([]byte("k8s\x00"), b...)
}

type testEvent struct {
	typ string
	obj any // *corev1.Pod or *metav1.Status
}

// protoStream encodes events as a protobuf watch stream.
func protoStream(t testing.TB, events ...testEvent) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, e := range events {
		var raw []byte
		switch o := e.obj.(type) {
		case *corev1.Pod:
			raw = protoObject(t, "v1", "Pod", o)
		case *metav1.Status:
			raw = protoObject(t, "v1", "Status", o)
		}
		we := metav1.WatchEvent{Type: e.typ, Object: runtime.RawExtension{Raw: raw}}
		b, err := we.Marshal()
		if err != nil {
			t.Fatal(err)
		}
		var l [4]byte
		binary.BigEndian.PutUint32(l[:], uint32(len(b)))
		out.Write(l[:])
		out.Write(b)
	}
	return out.Bytes()
}

// jsonStream encodes events as a JSON watch stream.
func jsonStream(t testing.TB, events ...testEvent) []byte {
	t.Helper()
	var out bytes.Buffer
	for _, e := range events {
		raw, err := json.Marshal(e.obj)
		if err != nil {
			t.Fatal(err)
		}
		b, err := json.Marshal(metav1.WatchEvent{Type: e.typ, Object: runtime.RawExtension{Raw: raw}})
		if err != nil {
			t.Fatal(err)
		}
		out.Write(b)
		out.WriteByte('\n')
	}
	return out.Bytes()
}

func protoObjectRaw(apiVersion, kind string, raw []byte) []byte {
	u := runtime.Unknown{TypeMeta: runtime.TypeMeta{APIVersion: apiVersion, Kind: kind}, Raw: raw}
	b, _ := u.Marshal()
	return append([]byte("k8s\x00"), b...)
}

func writeJSON(w http.ResponseWriter, v any) {
	b, _ := json.Marshal(v)
	w.Write(b)
}

func jsonMarshal(v any) ([]byte, error) { return json.Marshal(v) }

func itoa(i int) string { return strconv.Itoa(i) }

// yield lets other goroutines run while a test waits for the code under
// test to arm a fake-clock timer.
func yield() { runtime2.Gosched() }

func httptestServer(t testing.TB, h http.Handler) string {
	srv := httptest.NewServer(h)
	t.Cleanup(srv.Close)
	return srv.URL
}
