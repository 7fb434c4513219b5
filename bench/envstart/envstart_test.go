// Package envstart measures what a test pays for a real control plane:
// Loom's testenv beside controller-runtime's envtest, on the same
// binaries. compare.sh runs one implementation per process.
package envstart

import (
	"context"
	"fmt"
	"os"
	"slices"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	crclient "sigs.k8s.io/controller-runtime/pkg/client"
	"sigs.k8s.io/controller-runtime/pkg/envtest"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// tests is how many tests share one control plane in a run.
const tests = 20

// TestStartAndPerTest starts the control plane that LOOM_BENCH_IMPL
// names ("loom" or "envtest"; skipped when unset), runs tests tests on it
// that each make their own namespace, client and ConfigMap, as a test
// sharing a control plane does, stops it, and prints one line:
//
//	impl=loom start_ms=... per_test_ms=... first_test_ms=... stop_ms=...
//
// per_test_ms is the median over the tests after the first, which also
// pays for the first connections.
func TestStartAndPerTest(t *testing.T) {
	impl := os.Getenv("LOOM_BENCH_IMPL")
	if impl == "" {
		t.Skip("LOOM_BENCH_IMPL is not set: run bench/envstart/compare.sh")
	}
	var p plane
	switch impl {
	case "loom":
		p = &loomPlane{}
	case "envtest":
		p = &envtestPlane{}
	default:
		t.Fatalf("LOOM_BENCH_IMPL=%q: want loom or envtest", impl)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
	defer cancel()

	began := time.Now()
	if err := p.start(ctx); err != nil {
		t.Fatal(err)
	}
	start := time.Since(began)
	stopped := false
	defer func() {
		if !stopped {
			_ = p.stop()
		}
	}()

	var took []time.Duration
	for i := range tests {
		began := time.Now()
		t.Run(fmt.Sprint("test", i), func(t *testing.T) { p.test(t) })
		took = append(took, time.Since(began))
	}
	if t.Failed() {
		return
	}
	began = time.Now()
	err := p.stop()
	stopped = true
	if err != nil {
		t.Fatal(err)
	}
	stop := time.Since(began)
	rest := took[1:]
	fmt.Printf("impl=%s start_ms=%.1f per_test_ms=%.2f first_test_ms=%.1f stop_ms=%.1f\n",
		impl, ms(start), ms(median(rest)), ms(took[0]), ms(stop))
}

// plane is one implementation: start a control plane, run a test on it,
// stop it.
type plane interface {
	start(ctx context.Context) error
	test(t *testing.T)
	stop() error
}

// loomPlane is testenv, used as its documentation shows: Env.Namespace
// for the test's namespace, Env.REST and client.For for its client.
type loomPlane struct{ env *testenv.Env }

func (p *loomPlane) start(ctx context.Context) (err error) {
	p.env, err = testenv.Start(ctx, testenv.Options{})
	return err
}

func (p *loomPlane) stop() error { return p.env.Stop() }

func (p *loomPlane) test(t *testing.T) {
	ns := p.env.Namespace(t)
	rc, err := p.env.REST(rest.Options{}) // shared by the tests; Stop closes it
	if err != nil {
		t.Fatal(err)
	}
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	if _, err := cms.Create(t.Context(), configMap(ns), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Get(t.Context(), "c", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// envtestPlane is envtest on the same binaries, used as its
// documentation shows: a client per test from the Environment's
// rest.Config, a namespace made and deleted by the test.
type envtestPlane struct{ env *envtest.Environment }

func (p *envtestPlane) start(context.Context) error {
	p.env = &envtest.Environment{BinaryAssetsDirectory: testenv.AssetsDir()}
	_, err := p.env.Start()
	return err
}

func (p *envtestPlane) stop() error { return p.env.Stop() }

func (p *envtestPlane) test(t *testing.T) {
	c, err := crclient.New(p.env.Config, crclient.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{GenerateName: "test-"}}
	if err := c.Create(t.Context(), ns); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		if err := c.Delete(context.Background(), ns); err != nil {
			t.Error(err)
		}
	})
	if err := c.Create(t.Context(), configMap(ns.Name)); err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := c.Get(t.Context(), crclient.ObjectKey{Namespace: ns.Name, Name: "c"}, &got); err != nil {
		t.Fatal(err)
	}
}

func configMap(ns string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "c"}, Data: map[string]string{"k": "v"}}
}

func ms(d time.Duration) float64 { return float64(d) / float64(time.Millisecond) }

func median(ds []time.Duration) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	return s[len(s)/2]
}
