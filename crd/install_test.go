package crd_test

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"testing"
	"testing/fstest"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

var shared = testenv.Shared{}

func TestMain(m *testing.M) { shared.Main(m) }

func restClient(t *testing.T) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

// testCRD makes a CRD of group g with the given plural and short names.
func testCRD(t *testing.T, group, kind, plural string, shortNames ...string) *unstructured.Unstructured {
	t.Helper()
	short := ""
	if len(shortNames) > 0 {
		short = ", shortNames: [" + strings.Join(shortNames, ", ") + "]"
	}
	doc := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: ` + plural + `.` + group + `
spec:
  group: ` + group + `
  names: {kind: ` + kind + `, plural: ` + plural + `, singular: ` + strings.ToLower(kind) + short + `}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              size: {type: integer, minimum: 1}
`
	crds, err := crd.Read(fstest.MapFS{"crd.yaml": {Data: []byte(doc)}})
	if err != nil {
		t.Fatal(err)
	}
	return crds[0]
}

func TestInstallUseUninstall(t *testing.T) {
	ctx := t.Context()
	rc := restClient(t)
	w := testCRD(t, "install.example.com", "Widget", "widgets", "wd")
	if err := crd.Install(ctx, rc, []*unstructured.Unstructured{w}, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	// Established means served: a custom resource can be made at once.
	res := client.Resource{
		Resource:   schema.GroupVersionResource{Group: "install.example.com", Version: "v1", Resource: "widgets"},
		Kind:       schema.GroupVersionKind{Group: "install.example.com", Version: "v1", Kind: "Widget"},
		Namespaced: true,
	}
	widgets, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: res})
	if err != nil {
		t.Fatal(err)
	}
	obj := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "install.example.com/v1", "kind": "Widget",
		"metadata": map[string]any{"name": "w1"}, "spec": map[string]any{"size": int64(2)},
	}}
	if _, err := widgets.Namespace("default").Create(ctx, obj, metav1.CreateOptions{}); err != nil {
		t.Fatalf("create a Widget right after Install: %v", err)
	}
	// The schema from the manifest is enforced.
	bad := obj.DeepCopy()
	bad.SetName("w2")
	_ = unstructured.SetNestedField(bad.Object, int64(0), "spec", "size")
	if _, err := widgets.Namespace("default").Create(ctx, bad, metav1.CreateOptions{}); !apierrors.IsInvalid(err) {
		t.Fatalf("create with size 0 = %v, want Invalid", err)
	}

	// Installing again updates in place (here: a new short name).
	w2 := testCRD(t, "install.example.com", "Widget", "widgets", "wd", "wdg")
	if err := crd.Install(ctx, rc, []*unstructured.Unstructured{w2}, crd.Options{}); err != nil {
		t.Fatalf("install again: %v", err)
	}

	if err := crd.Uninstall(ctx, rc, []*unstructured.Unstructured{w2}, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	crds, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: crd.Resource()})
	if err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Get(ctx, w.GetName(), metav1.GetOptions{}); !apierrors.IsNotFound(err) {
		t.Fatalf("CRD after Uninstall: %v, want NotFound", err)
	}
	// Uninstalling what is absent is fine.
	if err := crd.Uninstall(ctx, rc, []*unstructured.Unstructured{w2}, crd.Options{}); err != nil {
		t.Fatalf("uninstall again: %v", err)
	}
}

func TestInstallNamesConflict(t *testing.T) {
	ctx := t.Context()
	rc := restClient(t)
	a := testCRD(t, "conflict.example.com", "Apple", "apples", "fruit")
	b := testCRD(t, "conflict.example.com", "Banana", "bananas", "fruit")
	t.Cleanup(func() {
		_ = crd.Uninstall(context.Background(), rc, []*unstructured.Unstructured{a, b}, crd.Options{})
	})
	if err := crd.Install(ctx, rc, []*unstructured.Unstructured{a}, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	err := crd.Install(ctx, rc, []*unstructured.Unstructured{b}, crd.Options{})
	var ne *crd.NotEstablishedError
	if !errors.As(err, &ne) || ne.Condition != "NamesAccepted" || ne.Status != "False" || ne.Name != b.GetName() {
		t.Fatalf("install a CRD whose short name is taken = %v, want NotEstablishedError for NamesAccepted=False", err)
	}
	if ne.Err != nil || !strings.Contains(err.Error(), "fruit") {
		t.Fatalf("error %q should name the clashing short name and not be a timeout", err)
	}
}

func TestWaitEstablishedContextEnds(t *testing.T) {
	rc := restClient(t)
	ctx, cancel := context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := crd.WaitEstablished(ctx, rc, crd.Options{}, "nothings.missing.example.com")
	var ne *crd.NotEstablishedError
	if !errors.As(err, &ne) || ne.Condition != "Established" || ne.Reason != "NotFound" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("WaitEstablished for a missing CRD = %v, want NotEstablishedError (Established, NotFound) wrapping DeadlineExceeded", err)
	}
}

func TestInstallInvalid(t *testing.T) {
	rc := restClient(t)
	bad := testCRD(t, "invalid.example.com", "Thing", "things")
	_ = unstructured.SetNestedField(bad.Object, "Everywhere", "spec", "scope")
	err := crd.Install(t.Context(), rc, []*unstructured.Unstructured{bad}, crd.Options{})
	if !apierrors.IsInvalid(err) || !strings.Contains(err.Error(), bad.GetName()) {
		t.Fatalf("install with a bad scope = %v, want Invalid naming the CRD", err)
	}
}

// TestInstallThenMap: right after Install, a Mapper made then maps the new
// kind, with no retry: Install waited for the server's discovery as well
// as for Established. Each round installs a CRD of a new group, the case
// where discovery lags the most.
func TestInstallThenMap(t *testing.T) {
	ctx := t.Context()
	rc := restClient(t)
	for i := range 8 {
		group := fmt.Sprintf("map%d.example.com", i)
		c := testCRD(t, group, "Gadget", "gadgets")
		if err := crd.Install(ctx, rc, []*unstructured.Unstructured{c}, crd.Options{}); err != nil {
			t.Fatal(err)
		}
		// A long refresh interval: the mapper discovers once, when first
		// asked, and does not get a second chance.
		m := discovery.NewMapper(discovery.New(rc, discovery.Options{}), discovery.MapperOptions{MinRefreshInterval: time.Hour})
		got, err := m.RESTMapping(ctx, schema.GroupKind{Group: group, Kind: "Gadget"})
		if err != nil {
			t.Fatalf("round %d: RESTMapping right after Install: %v", i, err)
		}
		if got.Resource.Resource != "gadgets" || got.Resource.Version != "v1" {
			t.Fatalf("round %d: mapped to %v", i, got.Resource)
		}
		t.Cleanup(func() {
			_ = crd.Uninstall(context.WithoutCancel(ctx), rc, []*unstructured.Unstructured{c}, crd.Options{})
		})
	}
}
