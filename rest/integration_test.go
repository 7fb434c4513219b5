package rest_test

import (
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"net/http/httputil"
	"net/url"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// One control plane serves every integration test in the package; it is
// started on first use and stopped by TestMain.
// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{}

func TestMain(m *testing.M) { shared.Main(m) }

func env(t *testing.T) *testenv.Env { return shared.Env(t) }

func adminClient(t *testing.T, ct rest.ContentType, opts ...func(*rest.Options)) *rest.Client {
	t.Helper()
	e := env(t)
	cfg, err := config.Load(config.LoadOptions{Path: e.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	o := rest.Options{ContentType: ct}
	for _, f := range opts {
		f(&o)
	}
	c, err := rest.New(cfg, o)
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func tokenConfig(e *testenv.Env, token string) config.Config {
	return config.Config{Host: e.URL, TLS: config.TLS{CAData: e.CAPEM}, Auth: config.Auth{BearerToken: token}}
}

func createNamespace(t *testing.T, c *rest.Client) string {
	t.Helper()
	name := fmt.Sprintf("t-%d", time.Now().UnixNano())
	ns := &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}
	if err := c.Post().Resource("namespaces").Body(ns).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	return name
}

func TestIntegrationAuth(t *testing.T) {
	e := env(t)
	t.Run("client certificate from the kubeconfig", func(t *testing.T) {
		c := adminClient(t, rest.JSON)
		var ns corev1.Namespace
		if err := c.Get().Resource("namespaces").Name("default").Do(t.Context(), &ns); err != nil {
			t.Fatal(err)
		}
		if ns.Name != "default" {
			t.Errorf("got %q", ns.Name)
		}
	})
	t.Run("bearer token", func(t *testing.T) {
		c, err := rest.New(tokenConfig(e, e.AdminToken), rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		var ns corev1.Namespace
		if err := c.Get().Resource("namespaces").Name("default").Do(t.Context(), &ns); err != nil {
			t.Fatal(err)
		}
	})
	t.Run("wrong token is Unauthorized", func(t *testing.T) {
		c, err := rest.New(tokenConfig(e, "not-the-token"), rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil)
		var se *rest.StatusError
		if !apierrors.IsUnauthorized(err) || !errors.As(err, &se) || se.Code != 401 {
			t.Fatalf("err = %v, want a 401 StatusError", err)
		}
	})
	t.Run("user without RBAC is Forbidden", func(t *testing.T) {
		cert, key, err := e.UserCert("nobody")
		if err != nil {
			t.Fatal(err)
		}
		c, err := rest.New(config.Config{Host: e.URL, TLS: config.TLS{CAData: e.CAPEM, CertData: cert, KeyData: key}}, rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		if err := c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil); !apierrors.IsForbidden(err) {
			t.Fatalf("err = %v, want Forbidden", err)
		}
	})
	t.Run("impersonation", func(t *testing.T) {
		cfg := tokenConfig(e, e.AdminToken)
		cfg.Impersonate = config.Impersonation{User: "somebody", Groups: []string{"some-group"}}
		c, err := rest.New(cfg, rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil)
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `"somebody"`) {
			t.Fatalf("err = %v, want Forbidden for the impersonated user", err)
		}
	})
	t.Run("wrong CA fails TLS verification", func(t *testing.T) {
		other := httptest.NewTLSServer(http.NotFoundHandler()) // a CA the API server did not use
		defer other.Close()
		otherCA := other.Certificate()
		cfg := tokenConfig(e, e.AdminToken)
		cfg.TLS.CAData = pemCert(otherCA.Raw)
		c, err := rest.New(cfg, rest.Options{})
		if err != nil {
			t.Fatal(err)
		}
		err = c.Get().Resource("namespaces").Name("default").Do(t.Context(), nil)
		var tv *rest.TLSVerificationError
		if !errors.As(err, &tv) || !strings.Contains(err.Error(), "TLS verification") {
			t.Fatalf("err = %v, want a TLSVerificationError", err)
		}
		if strings.Contains(err.Error(), e.AdminToken) {
			t.Fatal("token in error string")
		}
	})
}

func TestIntegrationPodRoundTrip(t *testing.T) {
	jc, pc := adminClient(t, rest.JSON), adminClient(t, rest.Protobuf)
	ns := createNamespace(t, jc)
	for _, tc := range []struct {
		name    string
		creator *rest.Client
	}{{"created-with-json", jc}, {"created-with-protobuf", pc}} {
		t.Run(tc.name, func(t *testing.T) {
			pod := &corev1.Pod{
				TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
				ObjectMeta: metav1.ObjectMeta{Name: tc.name, Labels: map[string]string{"app": "x"}, Annotations: map[string]string{"a": "b"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{
					Name: "c", Image: "registry.example/app:v1", Args: []string{"--x"},
					Env: []corev1.EnvVar{{Name: "K", Value: "V"}},
				}}},
			}
			var created corev1.Pod
			if err := tc.creator.Post().Namespace(ns).Resource("pods").Body(pod).Do(t.Context(), &created); err != nil {
				t.Fatal(err)
			}
			var viaJSON, viaProto corev1.Pod
			get := func(c *rest.Client, into *corev1.Pod) {
				if err := c.Get().Namespace(ns).Resource("pods").Name(pod.Name).Do(t.Context(), into); err != nil {
					t.Fatal(err)
				}
			}
			get(jc, &viaJSON)
			get(pc, &viaProto)
			if !equality.Semantic.DeepEqual(&viaJSON, &viaProto) {
				t.Errorf("JSON and protobuf reads differ:\nJSON  %+v\nproto %+v", viaJSON, viaProto)
			}
			if !equality.Semantic.DeepEqual(&created, &viaJSON) {
				t.Errorf("create response and read differ")
			}
			if viaProto.Kind != "Pod" || viaProto.APIVersion != "v1" || viaProto.Spec.Containers[0].Env[0].Value != "V" {
				t.Errorf("protobuf read = %+v", viaProto)
			}
			// Unstructured through the protobuf client falls back to JSON.
			var u unstructured.Unstructured
			if err := pc.Get().Namespace(ns).Resource("pods").Name(pod.Name).Do(t.Context(), &u); err != nil {
				t.Fatal(err)
			}
			if u.GetUID() != viaJSON.UID {
				t.Errorf("unstructured uid %q", u.GetUID())
			}
			// Lists decode too.
			var list corev1.PodList
			if err := pc.Get().Namespace(ns).Resource("pods").Options(&metav1.ListOptions{LabelSelector: "app=x"}).Do(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			if len(list.Items) == 0 {
				t.Error("empty list")
			}
		})
	}
}

func TestIntegrationConflictAndAlreadyExists(t *testing.T) {
	c := adminClient(t, rest.Protobuf)
	ns := createNamespace(t, c)
	cm := &corev1.ConfigMap{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"}, ObjectMeta: metav1.ObjectMeta{Name: "cm"}, Data: map[string]string{"k": "1"}}
	var v1 corev1.ConfigMap
	if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(t.Context(), &v1); err != nil {
		t.Fatal(err)
	}
	if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(t.Context(), nil); !apierrors.IsAlreadyExists(err) {
		t.Fatalf("second create: %v, want AlreadyExists", err)
	}
	stale := v1.DeepCopy()
	v1.Data["k"] = "2"
	if err := c.Put().Namespace(ns).Resource("configmaps").Name("cm").Body(&v1).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	stale.Data["k"] = "3"
	err := c.Put().Namespace(ns).Resource("configmaps").Name("cm").Body(stale).Do(t.Context(), nil)
	if !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want Conflict", err)
	}
	if err := c.Patch(string(types.MergePatchType)).Namespace(ns).Resource("configmaps").Name("cm").Body([]byte(`{"data":{"k":"4"}}`)).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if err := c.Get().Namespace(ns).Resource("configmaps").Name("nope").Do(t.Context(), nil); !apierrors.IsNotFound(err) {
		t.Fatalf("missing: %v, want NotFound", err)
	}
}

func TestIntegrationWatch(t *testing.T) {
	for _, ct := range []rest.ContentType{rest.JSON, rest.Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			c := adminClient(t, ct)
			ns := createNamespace(t, c)
			var list corev1.PodList
			if err := c.Get().Namespace(ns).Resource("pods").Do(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			w, err := rest.Watch[corev1.Pod](t.Context(), c.Get().Namespace(ns).Resource("pods").
				Options(&metav1.ListOptions{ResourceVersion: list.ResourceVersion, AllowWatchBookmarks: true}))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()

			pod := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{Name: "w"},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "i"}}}}
			var created corev1.Pod
			if err := c.Post().Namespace(ns).Resource("pods").Body(pod).Do(t.Context(), &created); err != nil {
				t.Fatal(err)
			}
			if err := c.Patch(string(types.MergePatchType)).Namespace(ns).Resource("pods").Name("w").Body([]byte(`{"metadata":{"labels":{"x":"y"}}}`)).Do(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			if err := c.Delete().Namespace(ns).Resource("pods").Name("w").Options(&metav1.DeleteOptions{GracePeriodSeconds: new(int64)}).Do(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			// Deleting sets deletionTimestamp first (a MODIFIED), then the
			// object goes (DELETED).
			var got []string
			for len(got) == 0 || got[len(got)-1] != "DELETED" {
				ev, err := w.Next()
				if err != nil {
					t.Fatalf("after %v: %v", got, err)
				}
				if ev.Type == watch.Bookmark {
					continue
				}
				if ev.Object.Name != "w" || ev.Object.Namespace != ns {
					t.Errorf("event %s for %s/%s", ev.Type, ev.Object.Namespace, ev.Object.Name)
				}
				got = append(got, string(ev.Type))
				if ev.Type == watch.Modified && ev.Object.Labels["x"] != "y" {
					t.Errorf("MODIFIED object lacks the new label: %v", ev.Object.Labels)
				}
			}
			if s := strings.Join(got, ","); s != "ADDED,MODIFIED,DELETED" && s != "ADDED,MODIFIED,MODIFIED,DELETED" {
				t.Errorf("events %v, want ADDED, MODIFIED (label), [MODIFIED (deletion)], DELETED", got)
			}
			w.Stop()
			if _, err := w.Next(); err != io.EOF {
				t.Errorf("after Stop: %v, want io.EOF", err)
			}
		})
	}
}

// TestIntegrationWatchBookmarks asks for the initial state as events
// (sendInitialEvents) with bookmarks: the server ends the initial events
// with a BOOKMARK annotated k8s.io/initial-events-end.
func TestIntegrationWatchBookmarks(t *testing.T) {
	for _, ct := range []rest.ContentType{rest.JSON, rest.Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			c := adminClient(t, ct)
			ns := createNamespace(t, c)
			for i := 0; i < 3; i++ {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}
				if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
			}
			yes := true
			w, err := rest.Watch[metav1.PartialObjectMetadata](t.Context(), c.Get().Namespace(ns).Resource("configmaps").
				Header("Accept", acceptMeta(ct)).
				Options(&metav1.ListOptions{AllowWatchBookmarks: true, SendInitialEvents: &yes, ResourceVersionMatch: metav1.ResourceVersionMatchNotOlderThan}))
			if err != nil {
				t.Fatal(err)
			}
			defer w.Stop()
			added := 0
			for {
				ev, err := w.Next()
				if err != nil {
					t.Fatal(err)
				}
				if ev.Type == watch.Added {
					added++
					continue
				}
				if ev.Type != watch.Bookmark {
					t.Fatalf("unexpected %s", ev.Type)
				}
				if ev.Object.Annotations[metav1.InitialEventsAnnotationKey] != "true" || ev.Object.ResourceVersion == "" {
					t.Fatalf("bookmark = %+v", ev.Object.ObjectMeta)
				}
				break
			}
			if added != 3 {
				t.Errorf("%d initial ADDED events, want 3", added)
			}
		})
	}
}

// acceptMeta asks for objects as PartialObjectMetadata.
func acceptMeta(ct rest.ContentType) string {
	if ct == rest.Protobuf {
		return "application/vnd.kubernetes.protobuf;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
	}
	return "application/json;as=PartialObjectMetadata;g=meta.k8s.io;v=v1"
}

// TestIntegrationCompaction compacts etcd and restarts kube-apiserver (so
// its watch cache starts after the compaction): a watch from the old
// resourceVersion then ends with 410 Expired.
func TestIntegrationCompaction(t *testing.T) {
	e := env(t)
	for _, ct := range []rest.ContentType{rest.JSON, rest.Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			c := adminClient(t, ct, func(o *rest.Options) { o.Retry = rest.RetryPolicy{MaxRetries: 20, Backoff: 100 * time.Millisecond} })
			ns := createNamespace(t, c)
			var list corev1.ConfigMapList
			if err := c.Get().Namespace(ns).Resource("configmaps").Do(t.Context(), &list); err != nil {
				t.Fatal(err)
			}
			old := list.ResourceVersion
			for i := 0; i < 3; i++ {
				cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("cm-%d", i)}}
				if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(t.Context(), nil); err != nil {
					t.Fatal(err)
				}
			}
			if err := e.CompactEtcd(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			if err := e.RestartAPIServer(t.Context()); err != nil {
				t.Fatal(err)
			}
			// Old connections died with the server: idempotent requests are
			// retried, so this works without special handling.
			w, err := rest.Watch[corev1.ConfigMap](t.Context(), c.Get().Namespace(ns).Resource("configmaps").
				Options(&metav1.ListOptions{ResourceVersion: old}))
			if err != nil {
				if !apierrors.IsResourceExpired(err) {
					t.Fatalf("watch from a compacted RV: %v, want 410 Expired", err)
				}
				return
			}
			defer w.Stop()
			ev, err := w.Next()
			if err != nil {
				t.Fatal(err)
			}
			if ev.Type != watch.Error || !apierrors.IsResourceExpired(ev.Err()) || ev.Status.Code != 410 {
				t.Fatalf("first event %s %v, want ERROR 410 Expired", ev.Type, ev.Err())
			}
			t.Logf("watch from compacted RV %s: %v", old, ev.Err())
			// A list at the old exact resourceVersion also fails with 410.
			err = c.Get().Namespace(ns).Resource("configmaps").
				Options(&metav1.ListOptions{ResourceVersion: old, ResourceVersionMatch: metav1.ResourceVersionMatchExact}).Do(t.Context(), nil)
			if !apierrors.IsResourceExpired(err) && !apierrors.IsGone(err) {
				t.Fatalf("exact list at a compacted RV: %v, want 410", err)
			}
		})
	}
}

// faultProxy is an in-process reverse proxy in front of the real API
// server. It answers the first `fail` requests to a path with 429 (with
// Retry-After: 0) and passes the rest through.
type faultProxy struct {
	proxy *httputil.ReverseProxy
	fail  atomic.Int32
	seen  atomic.Int32
}

func (f *faultProxy) ServeHTTP(w http.ResponseWriter, r *http.Request) {
	f.seen.Add(1)
	if f.fail.Add(-1) >= 0 {
		w.Header().Set("Retry-After", "0")
		w.Header().Set("Content-Type", "application/json")
		w.WriteHeader(http.StatusTooManyRequests)
		io.WriteString(w, `{"kind":"Status","apiVersion":"v1","status":"Failure","reason":"TooManyRequests","code":429,"message":"injected"}`)
		return
	}
	f.proxy.ServeHTTP(w, r)
}

func TestIntegrationRetry429(t *testing.T) {
	e := env(t)
	target, _ := url.Parse(e.URL)
	hc, err := e.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	fp := &faultProxy{proxy: httputil.NewSingleHostReverseProxy(target)}
	fp.proxy.Transport = hc.Transport
	srv := httptest.NewServer(fp)
	defer srv.Close()

	var attempts []rest.RequestInfo
	var mu sync.Mutex
	obs := rest.ObserverFunc(func(_ context.Context, i rest.RequestInfo) { mu.Lock(); attempts = append(attempts, i); mu.Unlock() })
	c, err := rest.New(config.Config{Host: srv.URL, Auth: config.Auth{BearerToken: e.AdminToken}}, rest.Options{Observer: obs, ContentType: rest.Protobuf})
	if err != nil {
		t.Fatal(err)
	}
	fp.fail.Store(2)
	var ns corev1.Namespace
	if err := c.Get().Resource("namespaces").Name("default").Do(t.Context(), &ns); err != nil {
		t.Fatalf("GET through a proxy that sends 429 twice: %v", err)
	}
	if ns.Name != "default" || fp.seen.Load() != 3 {
		t.Errorf("name %q after %d proxied requests, want 3", ns.Name, fp.seen.Load())
	}
	mu.Lock()
	if len(attempts) != 3 || attempts[0].Code != 429 || !attempts[0].Retrying || attempts[2].Code != 200 || attempts[2].Attempt != 2 {
		t.Errorf("observed attempts: %+v", attempts)
	}
	mu.Unlock()

	// POST is not retried: the 429 reaches the caller, typed.
	fp.fail.Store(1)
	fp.seen.Store(0)
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("r-%d", time.Now().UnixNano())}}
	err = c.Post().Namespace("default").Resource("configmaps").Body(cm).Do(t.Context(), nil)
	if !apierrors.IsTooManyRequests(err) || fp.seen.Load() != 1 {
		t.Fatalf("POST: %v after %d requests, want one 429", err, fp.seen.Load())
	}
}

// TestIntegrationUnstructured reads and watches through the unstructured
// (JSON) path, as a dynamic client would, with a protobuf client: the
// requests fall back to JSON.
func TestIntegrationUnstructured(t *testing.T) {
	c := adminClient(t, rest.Protobuf)
	ns := createNamespace(t, c)
	var list unstructured.UnstructuredList
	if err := c.Get().Namespace(ns).Resource("configmaps").Do(t.Context(), &list); err != nil {
		t.Fatal(err)
	}
	w, err := rest.Watch[unstructured.Unstructured](t.Context(), c.Get().Namespace(ns).Resource("configmaps").
		Options(&metav1.ListOptions{ResourceVersion: list.GetResourceVersion()}))
	if err != nil {
		t.Fatal(err)
	}
	defer w.Stop()
	cm := &unstructured.Unstructured{Object: map[string]interface{}{
		"apiVersion": "v1", "kind": "ConfigMap",
		"metadata": map[string]interface{}{"name": "u", "labels": map[string]interface{}{"n": "1"}},
		"data":     map[string]interface{}{"text": "héllo \"quoted\"\n", "num": "42"},
	}}
	if err := c.Post().Namespace(ns).Resource("configmaps").Body(cm).Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	ev, err := w.Next()
	if err != nil {
		t.Fatal(err)
	}
	if ev.Type != watch.Added || ev.Object.GetName() != "u" || ev.Object.GetKind() != "ConfigMap" {
		t.Fatalf("event %s %v", ev.Type, ev.Object.Object)
	}
	data, _, _ := unstructured.NestedStringMap(ev.Object.Object, "data")
	if data["text"] != "héllo \"quoted\"\n" || data["num"] != "42" {
		t.Errorf("data = %q", data)
	}
}
