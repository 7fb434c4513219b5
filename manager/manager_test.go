package manager_test

import (
	"context"
	"encoding/json"
	"fmt"
	"io"
	"maps"
	"math/rand/v2"
	"net/http"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{Controllers: true}}

func TestMain(m *testing.M) {
	if id := os.Getenv(candidateEnv); id != "" {
		os.Exit(runCandidate(id)) // a re-executed fencing candidate
	}
	shared.Main(m)
}

func cfg(t *testing.T) config.Config {
	t.Helper()
	c, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

var widgetRes = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "test.loom.dev", Version: "v1", Resource: "widgets"},
	Kind:       schema.GroupVersionKind{Group: "test.loom.dev", Version: "v1", Kind: "Widget"},
	Namespaced: true,
}

var crdRes = client.Resource{
	Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

const widgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"widgets.test.loom.dev"},
 "spec":{"group":"test.loom.dev","scope":"Namespaced","names":{"plural":"widgets","singular":"widget","kind":"Widget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

func installWidgets(t *testing.T, rc *rest.Client) { installCRD(t, rc, widgetCRD, widgetRes) }

// installCRD installs a CRD from its JSON and waits until res (one of its
// resources) is served.
func installCRD(t *testing.T, rc *rest.Client, crdJSON string, res client.Resource) {
	t.Helper()
	crds, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: crdRes})
	var obj unstructured.Unstructured
	if err := json.Unmarshal([]byte(crdJSON), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	c, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: res})
	eventually(t, "the "+res.Kind.Kind+" CRD to serve", func() bool {
		_, err := c.List(t.Context(), metav1.ListOptions{Limit: 1})
		return err == nil
	})
}

// ensureNamespace creates the namespace ns unless it exists.
func ensureNamespace(t *testing.T, rc *rest.Client, ns string) {
	t.Helper()
	nsc, _ := client.For[corev1.Namespace](rc, client.Options{})
	if _, err := nsc.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
}

func eventually(t *testing.T, what string, cond func() bool) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for !cond() {
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// widgetReconciler keeps a ConfigMap "widget-<name>" whose data is the
// widget's spec.data, owned by the widget. A finalizer on the widget lets
// it delete the ConfigMap before the widget goes. It reads the ConfigMaps
// from the cache and writes to the server.
type widgetReconciler struct {
	widgets    client.Writer[*unstructured.Unstructured]
	cms        client.ReadWriter[*corev1.ConfigMap]
	reconciles atomic.Int64
}

const widgetFinalizer = "loom.dev/widget-configmap"

func (r *widgetReconciler) Reconcile(ctx context.Context, w *unstructured.Unstructured) (controller.Result, error) {
	r.reconciles.Add(1)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: w.GetNamespace(), Name: "widget-" + w.GetName()}}
	if w.GetDeletionTimestamp() != nil {
		if !controller.HasFinalizer(w, widgetFinalizer) {
			return controller.Result{}, nil
		}
		if err := r.cms.Delete(ctx, cm, metav1.DeleteOptions{}); err != nil && !apierrors.IsNotFound(err) {
			return controller.Result{}, err
		}
		next := w.DeepCopy() // cached objects are shared: copy before changing
		controller.RemoveFinalizer(next, widgetFinalizer)
		_, err := r.widgets.Update(ctx, next, metav1.UpdateOptions{})
		return controller.Result{}, err
	}
	if !controller.HasFinalizer(w, widgetFinalizer) {
		next := w.DeepCopy()
		controller.AddFinalizer(next, widgetFinalizer)
		_, err := r.widgets.Update(ctx, next, metav1.UpdateOptions{})
		return controller.Result{}, err // the update brings the widget back
	}
	data, _, _ := unstructured.NestedStringMap(w.Object, "spec", "data")
	_, err := controller.CreateOrUpdate(ctx, r.cms, cm, func(cm *corev1.ConfigMap) error {
		cm.Labels = map[string]string{"loom.dev/widget": w.GetName()}
		cm.Data = data
		return controller.SetControllerReference(w, cm)
	})
	return controller.Result{}, err // a 409 is retried from a fresh cache read
}

func TestConfigMapPerWidgetConvergesUnderChurn(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t)), HealthAddr: "127.0.0.1:0", MetricsAddr: "127.0.0.1:0",
		Metrics: manager.MetricsServing{Insecure: true}}) // scraped below over plain HTTP
	if err != nil {
		t.Fatal(err)
	}
	rc := mgr.REST()
	installWidgets(t, rc)
	ctx := t.Context()
	cmClient, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	liveWidgets, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: widgetRes})
	cms := manager.CachedClient[corev1.ConfigMap](mgr)
	rec := &widgetReconciler{widgets: liveWidgets.ReadWriter(), cms: cms}
	controller.New(mgr, rec.Reconcile, controller.Options{Name: "widgets", Workers: 4,
		For: cache.InformerForOptions{Resource: widgetRes}}).Owns(cms)
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	// Churn: writers create, update and delete 20 widgets at random.
	widgets, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: widgetRes})
	widgets = widgets.Namespace("default")
	var writes atomic.Int64
	var wg sync.WaitGroup
	for w := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rnd := rand.New(rand.NewPCG(uint64(w), 42))
			for range 40 {
				name := fmt.Sprint("w", rnd.IntN(20))
				var err error
				switch rnd.IntN(3) {
				case 0:
					_, err = widgets.Create(ctx, widget(name, rnd.IntN(1000)), metav1.CreateOptions{})
				case 1:
					_, err = widgets.Mutate(ctx, name, func(u *unstructured.Unstructured) error {
						return unstructured.SetNestedField(u.Object, fmt.Sprint(rnd.IntN(1000)), "spec", "data", "v")
					})
				case 2:
					err = widgets.Delete(ctx, name, metav1.DeleteOptions{})
				}
				switch {
				case err == nil:
					writes.Add(1)
				case apierrors.IsNotFound(err), apierrors.IsAlreadyExists(err):
				default:
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()

	// Converged: exactly one configmap per widget, with its data, and none
	// for deleted widgets.
	eventually(t, "configmaps to match widgets", func() bool {
		ws, err := widgets.List(ctx, metav1.ListOptions{})
		if err != nil {
			return false
		}
		cl, err := cmClient.Namespace("default").List(ctx, metav1.ListOptions{LabelSelector: "loom.dev/widget"})
		if err != nil {
			return false
		}
		want := map[string]string{}
		for _, w := range ws.Items {
			if w.GetDeletionTimestamp() != nil {
				return false
			}
			d, _, _ := unstructured.NestedStringMap(w.Object, "spec", "data")
			want["widget-"+w.GetName()] = d["v"] + "/" + string(w.GetUID())
		}
		got := map[string]string{}
		for _, cm := range cl.Items {
			if cm.DeletionTimestamp != nil {
				return false
			}
			got[cm.Name] = cm.Data["v"] + "/" + string(cm.OwnerReferences[0].UID)
		}
		return maps.Equal(want, got)
	})
	n, w := rec.reconciles.Load(), writes.Load()
	t.Logf("%d widget writes, %d reconciles (%.2f per write)", w, n, float64(n)/float64(w))
	// Our own configmap writes come back as events too (Owns); still, merged
	// events must keep reconciles within a small factor of the changes.
	if n > 3*w+40 {
		t.Errorf("%d reconciles for %d writes: events are not being merged", n, w)
	}

	// Probes and metrics answer over HTTP.
	get := func(server, path string) (int, string) {
		resp, err := http.Get("http://" + mgr.Addr(server).String() + path)
		if err != nil {
			t.Fatal(err)
		}
		defer resp.Body.Close()
		b, _ := io.ReadAll(resp.Body)
		return resp.StatusCode, string(b)
	}
	if code, _ := get("health", "/healthz"); code != 200 {
		t.Errorf("/healthz %d", code)
	}
	if code, body := get("health", "/readyz"); code != 200 {
		t.Errorf("/readyz %d: %s", code, body)
	}
	_, metrics := get("metrics", "/metrics")
	for _, want := range []string{
		`controller_runtime_reconcile_total{controller="widgets",result="success"}`,
		`controller_runtime_reconcile_time_seconds_bucket{controller="widgets"`,
		`controller_runtime_max_concurrent_reconciles{controller="widgets"}`,
		`workqueue_adds_total{controller="widgets",name="widgets"}`,
		`rest_client_requests_total{code="201",host="`,
		`loom_rest_requests_total{code="201",method="POST",resource="configmaps"}`,
	} {
		if !strings.Contains(metrics, want) {
			t.Errorf("/metrics lacks %s", want)
		}
	}
}

func widget(name string, v int) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.loom.dev/v1", "kind": "Widget",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"data": map[string]any{"v": fmt.Sprint(v)}},
	}}
}
