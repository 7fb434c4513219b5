// Command dynamic shows the dynamic client: it installs a CustomResourceDefinition,
// resolves the new resource by its short name through discovery, and creates,
// patches, lists and deletes custom objects as unstructured data.
//
//	go run ./examples/dynamic [--kubeconfig FILE] [-n NAMESPACE]
package main

import (
	"context"
	"fmt"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/internal/cluster"
	"github.com/loom-k8s/loom/testenv"
)

func main() { cluster.Main("dynamic", testenv.Options{}, run) }

var crd = &unstructured.Unstructured{Object: map[string]any{
	"apiVersion": "apiextensions.k8s.io/v1", "kind": "CustomResourceDefinition",
	"metadata": map[string]any{"name": "gadgets.examples.loom.dev"},
	"spec": map[string]any{
		"group": "examples.loom.dev", "scope": "Namespaced",
		"names": map[string]any{"plural": "gadgets", "singular": "gadget", "kind": "Gadget", "shortNames": []any{"gdg"}},
		"versions": []any{map[string]any{
			"name": "v1", "served": true, "storage": true,
			"schema": map[string]any{"openAPIV3Schema": map[string]any{
				"type": "object", "x-kubernetes-preserve-unknown-fields": true}},
		}},
	},
}}

func run(ctx context.Context, conn *cluster.Conn) error {

	// CRDs are not in k8s.io/api, so they too go through the dynamic client.
	crds, err := client.For[unstructured.Unstructured](conn.REST, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	}})
	if err != nil {
		return err
	}
	if _, err := crds.Apply(ctx, crd, client.ApplyOptions{FieldManager: "loom-example", Force: true}); err != nil {
		return err
	}
	defer crds.Delete(context.Background(), crd.GetName(), metav1.DeleteOptions{})
	fmt.Println("installed CRD", crd.GetName())

	// The mapper finds the new resource by short name, refreshing discovery
	// when the name is not known yet.
	mapper := discovery.NewMapper(discovery.NewCached(discovery.New(conn.REST, discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	var m discovery.Mapping
	for {
		if m, err = mapper.ResourceFor(ctx, "gdg"); err == nil {
			break
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Printf("gdg is %s (namespaced: %v)\n", m.Resource, m.Namespaced)

	gadgets, err := client.For[unstructured.Unstructured](conn.REST, client.Options{Resource: m})
	if err != nil {
		return err
	}
	gadgets = gadgets.Namespace(conn.Namespace)
	g := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "examples.loom.dev/v1", "kind": "Gadget",
		"metadata": map[string]any{"name": "sprocket"},
		"spec":     map[string]any{"teeth": int64(12)},
	}}
	if _, err := gadgets.Create(ctx, g, metav1.CreateOptions{}); err != nil {
		return err
	}
	patched, err := gadgets.Patch(ctx, "sprocket", types.MergePatchType, []byte(`{"spec":{"teeth":16}}`), metav1.PatchOptions{})
	if err != nil {
		return err
	}
	teeth, _, _ := unstructured.NestedInt64(patched.Object, "spec", "teeth")
	fmt.Printf("patched sprocket: %d teeth\n", teeth)
	list, err := gadgets.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("listed %d gadget(s)\n", len(list.Items))
	if err := gadgets.Delete(ctx, "sprocket", metav1.DeleteOptions{}); err != nil {
		return err
	}
	fmt.Println("deleted sprocket")
	return nil
}
