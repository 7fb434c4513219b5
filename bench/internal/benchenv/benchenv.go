// Package benchenv holds what the benchmarks that run against a control
// plane share: a client-go clientset without a client-side rate limit,
// many objects made at once, and an environment process that lives
// until its parent closes its standard input.
package benchenv

import (
	"bufio"
	"context"
	"net/http"
	"net/http/httptest"
	"os"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"
	"k8s.io/client-go/tools/clientcmd"

	"github.com/loom-k8s/loom/testenv"
)

// Start starts a control plane with testenv's defaults and returns it
// with a clientset for it (see Clientset). The caller stops it.
func Start(ctx context.Context) (*testenv.Env, *kubernetes.Clientset, error) {
	return StartWith(ctx, testenv.Options{})
}

// StartWith is Start with opts, such as CRDs to install.
func StartWith(ctx context.Context, opts testenv.Options) (*testenv.Env, *kubernetes.Clientset, error) {
	env, err := testenv.Start(ctx, opts)
	if err != nil {
		return nil, nil, err
	}
	cs, err := Clientset(env.KubeconfigPath)
	if err != nil {
		_ = env.Stop()
		return nil, nil, err
	}
	return env, cs, nil
}

// Clientset returns a clientset for kubeconfig with client-go's
// client-side rate limit off.
func Clientset(kubeconfig string) (*kubernetes.Clientset, error) {
	cfg, err := clientcmd.BuildConfigFromFlags("", kubeconfig)
	if err != nil {
		return nil, err
	}
	cfg.QPS, cfg.Burst = -1, 1000
	return kubernetes.NewForConfig(cfg)
}

// CreateConfigMaps creates namespace (if it is not there) and the n
// ConfigMaps that configMap makes, 32 at a time; one that exists already
// is left as it is.
func CreateConfigMaps(ctx context.Context, cs kubernetes.Interface, namespace string, n int, configMap func(i int) *corev1.ConfigMap) error {
	_, err := cs.CoreV1().Namespaces().Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: namespace}}, metav1.CreateOptions{})
	if err != nil && !apierrors.IsAlreadyExists(err) {
		return err
	}
	return Parallel(ctx, n, func(i int) error {
		_, err := cs.CoreV1().ConfigMaps(namespace).Create(ctx, configMap(i), metav1.CreateOptions{})
		if apierrors.IsAlreadyExists(err) {
			return nil
		}
		return err
	})
}

// Parallel calls do for 0..n-1, 32 at a time, and returns the first
// error any call returned once all are done.
func Parallel(ctx context.Context, n int, do func(i int) error) error {
	jobs := make(chan int)
	var wg sync.WaitGroup
	var firstErr atomic.Value
	for range 32 {
		wg.Go(func() {
			for i := range jobs {
				if err := do(i); err != nil {
					firstErr.CompareAndSwap(nil, err)
				}
			}
		})
	}
	for i := range n {
		jobs <- i
	}
	close(jobs)
	wg.Wait()
	if err, ok := firstErr.Load().(error); ok {
		return err
	}
	return nil
}

// UntilStdinCloses returns once standard input closes (the parent script
// is done with the environment) or ctx ends.
func UntilStdinCloses(ctx context.Context) {
	done := make(chan struct{})
	go func() { bufio.NewReader(os.Stdin).ReadString(0); close(done) }()
	select {
	case <-done:
	case <-ctx.Done():
	}
}

// LoomRequests sums loom_rest_requests_total, the API requests a Loom
// manager has sent, from its metrics handler (Manager.MetricsHandler).
func LoomRequests(metrics http.Handler) int64 {
	w := httptest.NewRecorder()
	metrics.ServeHTTP(w, httptest.NewRequest("GET", "/metrics", nil))
	var n float64
	for line := range strings.Lines(w.Body.String()) {
		if !strings.HasPrefix(line, "loom_rest_requests_total{") {
			continue
		}
		f := strings.Fields(line)
		v, _ := strconv.ParseFloat(f[len(f)-1], 64)
		n += v
	}
	return int64(n)
}
