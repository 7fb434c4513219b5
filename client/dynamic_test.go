package client_test

import (
	"context"
	"encoding/json"
	"fmt"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

var crdResource = client.Resource{
	Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
	Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
}

var fooResource = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "test.loom.dev", Version: "v1", Resource: "foos"},
	Kind:       schema.GroupVersionKind{Group: "test.loom.dev", Version: "v1", Kind: "Foo"},
	Namespaced: true,
}

const fooCRD = `{
 "apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
 "metadata": {"name": "foos.test.loom.dev"},
 "spec": {
  "group": "test.loom.dev", "scope": "Namespaced",
  "names": {"plural": "foos", "singular": "foo", "kind": "Foo", "shortNames": ["fo"]},
  "versions": [{
   "name": "v1", "served": true, "storage": true,
   "subresources": {"status": {}, "scale": {"specReplicasPath": ".spec.replicas", "statusReplicasPath": ".status.replicas"}},
   "schema": {"openAPIV3Schema": {"type": "object", "properties": {
     "spec": {"type": "object", "properties": {"replicas": {"type": "integer"}, "color": {"type": "string"}}},
     "status": {"type": "object", "properties": {"replicas": {"type": "integer"}, "phase": {"type": "string"}}}}}}
  }]
 }
}`

// installFoo installs the Foo CRD (once per test binary) with the dynamic
// client and waits until it is Established.
func installFoo(t *testing.T, rc *rest.Client) {
	t.Helper()
	crds, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: crdResource})
	if err != nil {
		t.Fatal(err)
	}
	var obj unstructured.Unstructured
	if err := json.Unmarshal([]byte(fooCRD), &obj.Object); err != nil {
		t.Fatal(err)
	}
	if _, err := crds.Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil && !isAlreadyExists(err) {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		crd, err := crds.Get(ctx, "foos.test.loom.dev", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		conds, _, _ := unstructured.NestedSlice(crd.Object, "status", "conditions")
		for _, c := range conds {
			if m, _ := c.(map[string]any); m["type"] == "Established" && m["status"] == "True" {
				// Discovery can lag a moment behind Established.
				d := discovery.New(rc, discovery.Options{})
				for {
					if _, err := d.ServerResourcesForGroupVersion(ctx, "test.loom.dev/v1"); err == nil {
						return
					}
					select {
					case <-ctx.Done():
						t.Fatal("foos never appeared in discovery")
					case <-time.After(100 * time.Millisecond):
					}
				}
			}
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD not Established: %v", crd.Object["status"])
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func foo(name string, replicas int64, color string) *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.loom.dev/v1", "kind": "Foo",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"replicas": replicas, "color": color},
	}}
}

func TestDynamicCRUDOnCRD(t *testing.T) {
	rc := newREST(t, rest.Protobuf) // unstructured falls back to JSON by itself
	installFoo(t, rc)
	ns := namespace(t, rc)
	ctx := t.Context()
	foos, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: fooResource})
	if err != nil {
		t.Fatal(err)
	}
	foos = foos.Namespace(ns)
	created, err := foos.Create(ctx, foo("a", 1, "red"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if created.GetUID() == "" {
		t.Fatalf("created %v", created)
	}
	got, err := foos.Get(ctx, "a", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	unstructured.SetNestedField(got.Object, "blue", "spec", "color")
	upd, err := foos.Update(ctx, got, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if c, _, _ := unstructured.NestedString(upd.Object, "spec", "color"); c != "blue" {
		t.Fatalf("color %q", c)
	}
	if _, err := foos.Patch(ctx, "a", types.MergePatchType, []byte(`{"spec":{"color":"green"}}`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, err := foos.Patch(ctx, "a", types.JSONPatchType, []byte(`[{"op":"replace","path":"/spec/replicas","value":4}]`), metav1.PatchOptions{}); err != nil {
		t.Fatal(err)
	}
	applied, err := foos.Apply(ctx, &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "test.loom.dev/v1", "kind": "Foo", "metadata": map[string]any{"name": "b"}, "spec": map[string]any{"color": "teal"}}},
		client.ApplyOptions{FieldManager: "test"})
	if err != nil {
		t.Fatal(err)
	}
	if applied.GetName() != "b" {
		t.Fatalf("applied %v", applied)
	}
	// A strategic merge patch is for built-in types only: the server refuses it.
	if _, err := foos.Patch(ctx, "a", types.StrategicMergePatchType, []byte(`{"spec":{"color":"x"}}`), metav1.PatchOptions{}); err == nil {
		t.Fatal("strategic merge patch on a custom resource succeeded")
	}
	list, err := foos.List(ctx, metav1.ListOptions{})
	if err != nil || len(list.Items) != 2 {
		t.Fatalf("list: %v %v", list, err)
	}
	if err := foos.Delete(ctx, "a", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	if _, ok, err := client.Optional(foos.Get(ctx, "a", metav1.GetOptions{})); ok || err != nil {
		t.Fatalf("after delete: %v %v", ok, err)
	}
}

func TestStatusSubresourceSeparatesSpecAndStatus(t *testing.T) {
	rc := newREST(t, rest.JSON)
	installFoo(t, rc)
	ns := namespace(t, rc)
	ctx := t.Context()
	foos, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: fooResource})
	foos = foos.Namespace(ns)
	f, err := foos.Create(ctx, foo("s", 1, "red"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	// UpdateStatus changes status, not spec.
	unstructured.SetNestedField(f.Object, "Running", "status", "phase")
	unstructured.SetNestedField(f.Object, "purple", "spec", "color")
	f, err = foos.UpdateStatus(ctx, f, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(f.Object, "status", "phase"); p != "Running" {
		t.Fatalf("status.phase %q after UpdateStatus", p)
	}
	if c, _, _ := unstructured.NestedString(f.Object, "spec", "color"); c != "red" {
		t.Fatalf("UpdateStatus changed spec.color to %q", c)
	}
	// Update changes spec, not status.
	unstructured.SetNestedField(f.Object, "Failed", "status", "phase")
	unstructured.SetNestedField(f.Object, "gold", "spec", "color")
	f, err = foos.Update(ctx, f, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if p, _, _ := unstructured.NestedString(f.Object, "status", "phase"); p != "Running" {
		t.Fatalf("Update changed status.phase to %q", p)
	}
	if c, _, _ := unstructured.NestedString(f.Object, "spec", "color"); c != "gold" {
		t.Fatalf("spec.color %q after Update", c)
	}
}

func TestScaleClient(t *testing.T) {
	rc := newREST(t, rest.JSON)
	installFoo(t, rc)
	ns := namespace(t, rc)
	ctx := t.Context()
	foos, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: fooResource})
	if _, err := foos.Namespace(ns).Create(ctx, foo("scaled", 1, "red"), metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deployWeb(t, rc, ns, "web", 1)
	sc := client.NewScaler(rc, discovery.NewCached(discovery.New(rc, discovery.Options{}), discovery.CacheOptions{}))
	for _, target := range []struct{ resource, name string }{{"deploy", "web"}, {"foos.test.loom.dev", "scaled"}, {"fo", "scaled"}} {
		t.Run(target.resource, func(t *testing.T) {
			before, err := sc.Get(ctx, target.resource, ns, target.name)
			if err != nil {
				t.Fatal(err)
			}
			want := before.Spec.Replicas + 2
			after, err := sc.SetReplicas(ctx, target.resource, ns, target.name, want, "")
			if err != nil {
				t.Fatal(err)
			}
			if after.Spec.Replicas != want {
				t.Fatalf("replicas %d, want %d", after.Spec.Replicas, want)
			}
			again, err := sc.Get(ctx, target.resource, ns, target.name)
			if err != nil || again.Spec.Replicas != want {
				t.Fatalf("re-read: %v %v", again, err)
			}
			if _, err := sc.SetReplicas(ctx, target.resource, ns, target.name, 1, before.ResourceVersion); !isConflict(err) {
				t.Fatalf("stale resourceVersion: want 409, got %v", err)
			}
		})
	}
	if _, err := sc.Get(ctx, "configmaps", ns, "x"); err == nil || fmt.Sprint(err) != "client: configmaps has no scale subresource" {
		t.Fatalf("configmaps: %v", err)
	}
}

// The API server leaves apiVersion and kind out of the items of lists of
// built-in resources; the dynamic client fills them in from the list.
func TestDynamicListOfBuiltinResource(t *testing.T) {
	ctx := t.Context()
	rc := newREST(t, rest.JSON)
	ns := namespace(t, rc)
	cmRes := client.Resource{
		Resource:   schema.GroupVersionResource{Version: "v1", Resource: "configmaps"},
		Kind:       schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"},
		Namespaced: true,
	}
	cms, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: cmRes})
	if err != nil {
		t.Fatal(err)
	}
	cms = cms.Namespace(ns)
	for i := range 3 {
		obj := &unstructured.Unstructured{Object: map[string]any{"apiVersion": "v1", "kind": "ConfigMap",
			"metadata": map[string]any{"name": fmt.Sprintf("cm-%d", i)}, "data": map[string]any{"i": fmt.Sprint(i)}}}
		if _, err := cms.Create(ctx, obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	l, err := cms.List(ctx, metav1.ListOptions{Limit: 2})
	if err != nil {
		t.Fatal(err)
	}
	all, err := cms.ListAll(ctx, metav1.ListOptions{Limit: 2})
	if err != nil || len(all.Items) < 3 {
		t.Fatalf("ListAll: %v items, %v", len(all.Items), err)
	}
	if len(l.Items) != 2 || l.Continue == "" || l.ResourceVersion == "" || l.RemainingItemCount == nil || *l.RemainingItemCount != int64(len(all.Items)-2) {
		t.Fatalf("first page: %d items, continue %q, rv %q, remaining %v", len(l.Items), l.Continue, l.ResourceVersion, l.RemainingItemCount)
	}
	for _, it := range l.Items {
		if it.GetKind() != "ConfigMap" || it.GetAPIVersion() != "v1" || it.GetNamespace() != ns {
			t.Fatalf("item %s: apiVersion %q kind %q namespace %q", it.GetName(), it.GetAPIVersion(), it.GetKind(), it.GetNamespace())
		}
	}
}
