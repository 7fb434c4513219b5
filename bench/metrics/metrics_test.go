// Package metrics checks that Loom's manager exposes the metric families
// controller-runtime exposes for controllers, workqueues, the REST client,
// leader election and webhooks, with the same names, types, label names
// and histogram buckets, so that dashboards and alerts written for
// controller-runtime work on Loom.
//
// One controller-runtime manager and one Loom manager run on one test API
// server, each with leader election on and a trivial ConfigMap reconciler,
// and each webhook server answers one request; then both registries are
// gathered and compared. A subtest also checks that every metric queried
// by kubebuilder's Grafana dashboards has a series in Loom's scrape.
//
// Run with: cd bench && go test -race -run TestMetricFamiliesMatchControllerRuntime ./metrics
package metrics

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"net/http"
	"net/http/httptest"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"sort"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/go-logr/logr"
	dto "github.com/prometheus/client_model/go"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/tools/clientcmd"
	ctrl "sigs.k8s.io/controller-runtime"
	crlog "sigs.k8s.io/controller-runtime/pkg/log"
	crmetrics "sigs.k8s.io/controller-runtime/pkg/metrics"
	metricsserver "sigs.k8s.io/controller-runtime/pkg/metrics/server"
	"sigs.k8s.io/controller-runtime/pkg/reconcile"
	crwebhook "sigs.k8s.io/controller-runtime/pkg/webhook"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/testenv"
)

// compared are the prefixes of the families compared: controllers and
// webhooks (controller_runtime_), workqueues, the REST client and leader
// election. certwatcher_ is left out: Loom's certificates are its own.
var compared = []string{"controller_runtime_", "workqueue_", "rest_client_", "leader_election_"}

// mustSee are the families controller-runtime's scrape must hold for the
// comparison to mean anything: if one is missing, the test's setup did not
// exercise what it should.
var mustSee = []string{
	"controller_runtime_reconcile_total",
	"controller_runtime_reconcile_errors_total",
	"controller_runtime_terminal_reconcile_errors_total",
	"controller_runtime_reconcile_panics_total",
	"controller_runtime_reconcile_timeouts_total",
	"controller_runtime_reconcile_time_seconds",
	"controller_runtime_max_concurrent_reconciles",
	"controller_runtime_active_workers",
	"workqueue_depth",
	"workqueue_adds_total",
	"workqueue_queue_duration_seconds",
	"workqueue_work_duration_seconds",
	"workqueue_unfinished_work_seconds",
	"workqueue_longest_running_processor_seconds",
	"workqueue_retries_total",
	"rest_client_requests_total",
	"leader_election_master_status",
	"controller_runtime_webhook_latency_seconds",
	"controller_runtime_webhook_requests_total",
	"controller_runtime_webhook_requests_in_flight",
	"controller_runtime_webhook_panics_total",
	"controller_runtime_conversion_webhook_panics_total",
}

// shape is what must match: type, label names and bucket bounds.
type shape struct {
	Type    dto.MetricType
	Labels  []string
	Buckets []float64
}

func (s shape) String() string {
	return fmt.Sprintf("%v %v buckets %v", s.Type, s.Labels, s.Buckets)
}

// shapes returns the shape of every family whose name starts with one of
// compared; series must all have the same label names.
func shapes(t *testing.T, mfs []*dto.MetricFamily) map[string]shape {
	t.Helper()
	out := map[string]shape{}
	for _, mf := range mfs {
		if !slices.ContainsFunc(compared, func(p string) bool { return strings.HasPrefix(mf.GetName(), p) }) {
			continue
		}
		s := shape{Type: mf.GetType()}
		for i, m := range mf.GetMetric() {
			var labels []string
			for _, l := range m.GetLabel() {
				labels = append(labels, l.GetName())
			}
			sort.Strings(labels)
			var buckets []float64
			for _, b := range m.GetHistogram().GetBucket() {
				buckets = append(buckets, b.GetUpperBound())
			}
			if i == 0 {
				s.Labels, s.Buckets = labels, buckets
			} else if !slices.Equal(labels, s.Labels) || !slices.Equal(buckets, s.Buckets) {
				t.Errorf("%s: series differ in labels or buckets: %v %v and %v %v", mf.GetName(), s.Labels, s.Buckets, labels, buckets)
			}
		}
		out[mf.GetName()] = s
	}
	return out
}

func TestMetricFamiliesMatchControllerRuntime(t *testing.T) {
	crlog.SetLogger(logr.Discard())
	env := testenv.New(t, testenv.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()

	// controller-runtime: leader election on, a ConfigMap controller, and
	// one request through its webhook server's instrumented handler.
	restCfg, err := clientcmd.BuildConfigFromFlags("", env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	crMgr, err := ctrl.NewManager(restCfg, ctrl.Options{
		LeaderElection: true, LeaderElectionID: "cr-metrics", LeaderElectionNamespace: "default",
		Metrics: metricsserver.Options{BindAddress: "0"}, HealthProbeBindAddress: "0",
	})
	if err != nil {
		t.Fatal(err)
	}
	var crReconciles atomic.Int64
	if err := ctrl.NewControllerManagedBy(crMgr).For(&corev1.ConfigMap{}).Named("cr-metrics").
		Complete(reconcile.Func(func(context.Context, reconcile.Request) (reconcile.Result, error) {
			crReconciles.Add(1)
			return reconcile.Result{}, nil
		})); err != nil {
		t.Fatal(err)
	}
	crHook := crwebhook.NewServer(crwebhook.Options{})
	crHook.Register("/validate", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	// Loom: the same.
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	loomMgr, err := manager.New(manager.Options{Config: new(cfg), ShutdownTimeout: 5 * time.Second,
		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "default", Name: "loom-metrics"}})
	if err != nil {
		t.Fatal(err)
	}
	var loomReconciles atomic.Int64
	controller.New(loomMgr, func(context.Context, *corev1.ConfigMap) (controller.Result, error) {
		loomReconciles.Add(1)
		return controller.Result{}, nil
	}, controller.Options{Name: "loom-metrics"})
	loomHook, err := loomMgr.Webhooks(t.Context(), manager.WebhookOptions{LocalURL: true, Addr: "127.0.0.1:0", CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	loomHook.Register("/validate", http.HandlerFunc(func(http.ResponseWriter, *http.Request) {}))

	errc := make(chan error, 2)
	go func() { errc <- crMgr.Start(ctx) }()
	go func() { errc <- loomMgr.Start(ctx) }()
	defer func() {
		cancel()
		for range 2 {
			if err := <-errc; err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("manager: %v", err)
			}
		}
	}()

	cms, err := client.For[corev1.ConfigMap](loomMgr.REST(), client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "metrics"}},
		metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	wait(t, ctx, "both managers to lead and reconcile", func() bool {
		select {
		case <-crMgr.Elected():
		default:
			return false
		}
		return loomMgr.IsLeader() && crReconciles.Load() > 0 && loomReconciles.Load() > 0
	})

	// One request to each webhook server.
	rec := httptest.NewRecorder()
	crHook.WebhookMux().ServeHTTP(rec, httptest.NewRequest(http.MethodPost, "/validate", nil))
	if rec.Code != http.StatusOK {
		t.Fatalf("controller-runtime webhook: %d", rec.Code)
	}
	hc := &http.Client{Transport: &http.Transport{TLSClientConfig: &tls.Config{InsecureSkipVerify: true}}}
	defer hc.CloseIdleConnections()
	wait(t, ctx, "Loom's webhook server to answer", func() bool {
		resp, err := hc.Post("https://"+loomHook.Addr().String()+"/validate", "application/json", nil)
		if err != nil {
			return false
		}
		resp.Body.Close()
		return resp.StatusCode == http.StatusOK
	})

	crFamilies, err := crmetrics.Registry.Gather()
	if err != nil {
		t.Fatal(err)
	}
	loomFamilies, err := loomMgr.Registry().Gather()
	if err != nil {
		t.Fatal(err)
	}
	cr, loom := shapes(t, crFamilies), shapes(t, loomFamilies)
	for _, name := range mustSee {
		if _, ok := cr[name]; !ok {
			t.Errorf("controller-runtime's scrape lacks %s: the setup did not exercise it", name)
		}
	}
	names := make([]string, 0, len(cr))
	for name := range cr {
		names = append(names, name)
	}
	sort.Strings(names)
	for _, name := range names {
		want := cr[name]
		got, ok := loom[name]
		switch {
		case !ok:
			t.Errorf("%s (%v) missing from Loom's registry", name, want)
		case got.Type != want.Type || !slices.Equal(got.Labels, want.Labels) || !slices.Equal(got.Buckets, want.Buckets):
			t.Errorf("%s: Loom %v, controller-runtime %v", name, got, want)
		default:
			t.Logf("%s: %v", name, want.Type)
		}
	}
	t.Run("kubebuilder dashboards", func(t *testing.T) { checkDashboards(t, loomFamilies) })

	// The series that mean "this manager leads" say so on both sides.
	for side, mfs := range map[string][]*dto.MetricFamily{"controller-runtime": crFamilies, "Loom": loomFamilies} {
		lease := map[string]string{"controller-runtime": "cr-metrics", "Loom": "loom-metrics"}[side]
		if v, ok := gauge(mfs, "leader_election_master_status", "name", lease); !ok || v != 1 {
			t.Errorf("%s: leader_election_master_status{name=%s} = %v (present %v), want 1", side, lease, v, ok)
		}
	}
}

// kubebuilderGrafana is where kubebuilder keeps the Grafana dashboards
// its grafana plugin scaffolds, inside the module cache.
const kubebuilderGrafana = "sigs.k8s.io/kubebuilder/v4@v4.16.0/pkg/plugins/optional/grafana/v1alpha/scaffolds/internal/templates"

var (
	exprRE     = regexp.MustCompile(`"expr":\s*"((?:[^"\\]|\\.)*)"`)
	selectorRE = regexp.MustCompile(`([a-zA-Z_:][a-zA-Z0-9_:]*)\{`)
)

// checkDashboards reads the PromQL of kubebuilder's Grafana dashboards and
// fails if a metric one queries has no series in Loom's scrape. It needs
// the kubebuilder module in the module cache (go mod download
// sigs.k8s.io/kubebuilder/v4@v4.16.0) and is skipped without it.
func checkDashboards(t *testing.T, mfs []*dto.MetricFamily) {
	out, err := exec.Command("go", "env", "GOMODCACHE").Output()
	if err != nil {
		t.Fatal(err)
	}
	dir := filepath.Join(strings.TrimSpace(string(out)), kubebuilderGrafana)
	files, _ := filepath.Glob(filepath.Join(dir, "*.go"))
	if len(files) == 0 {
		t.Skipf("kubebuilder's dashboards are not in the module cache (%s): run go mod download sigs.k8s.io/kubebuilder/v4@v4.16.0", dir)
	}
	queried := map[string][]string{} // metric -> files
	for _, f := range files {
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		for _, e := range exprRE.FindAllStringSubmatch(string(b), -1) {
			for _, m := range selectorRE.FindAllStringSubmatch(e[1], -1) {
				queried[m[1]] = append(queried[m[1]], filepath.Base(f))
			}
		}
	}
	if len(queried) < 5 {
		t.Fatalf("found only %d metrics in the dashboards' queries (%v): has their format changed?", len(queried), queried)
	}
	have := map[string]bool{}
	for _, mf := range mfs {
		if len(mf.GetMetric()) == 0 {
			continue
		}
		have[mf.GetName()] = true
		if mf.GetType() == dto.MetricType_HISTOGRAM {
			for _, suffix := range []string{"_bucket", "_sum", "_count"} {
				have[mf.GetName()+suffix] = true
			}
		}
	}
	for name, where := range queried {
		if !have[name] {
			t.Errorf("%s, queried by kubebuilder's dashboard (%s), has no series in Loom's scrape", name, where[0])
		} else {
			t.Logf("%s: present", name)
		}
	}
}

// gauge returns the value of the series of family name whose label has
// value v.
func gauge(mfs []*dto.MetricFamily, name, label, v string) (float64, bool) {
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			for _, l := range m.GetLabel() {
				if l.GetName() == label && l.GetValue() == v {
					return m.GetGauge().GetValue(), true
				}
			}
		}
	}
	return 0, false
}

// wait polls cond until it holds, failing the test when ctx ends first.
func wait(t *testing.T, ctx context.Context, what string, cond func() bool) {
	t.Helper()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}
