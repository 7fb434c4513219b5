package manager_test

import (
	"context"
	"encoding/json"
	"sync/atomic"
	"testing"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

var gadgetRes = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "gate.loom.dev", Version: "v1", Resource: "gadgets"},
	Kind:       schema.GroupVersionKind{Group: "gate.loom.dev", Version: "v1", Kind: "Gadget"},
	Namespaced: true,
}

const gadgetCRD = `{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
 "metadata":{"name":"gadgets.gate.loom.dev"},
 "spec":{"group":"gate.loom.dev","scope":"Namespaced","names":{"plural":"gadgets","singular":"gadget","kind":"Gadget"},
  "versions":[{"name":"v1","served":true,"storage":true,"schema":{"openAPIV3Schema":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}]}}`

// TestControllerWaitsForItsCRD: a controller whose CRD is not installed
// waits idle (no informer, no error loop), starts when the CRD is
// Established, stops cleanly when it is deleted, and starts again when it
// comes back.
func TestControllerWaitsForItsCRD(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	var reconciled atomic.Int64
	var builds atomic.Int64
	gate := manager.WhenCRDEstablished(mgr, "gadgets.gate.loom.dev", func(m controller.Manager) error {
		builds.Add(1)
		controller.New(m, func(context.Context, *unstructured.Unstructured) (controller.Result, error) {
			reconciled.Add(1)
			return controller.Result{}, nil
		}, controller.Options{Name: "gadgets", For: cache.InformerForOptions{Resource: gadgetRes}})
		return nil
	})
	if err := mgr.Add(gate); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- mgr.Start(ctx) }()
	defer func() {
		cancel()
		if err := <-done; err != nil {
			t.Errorf("manager: %v", err)
		}
	}()

	if gate.State() != manager.GateWaiting || builds.Load() != 0 {
		t.Fatalf("before the CRD: state %s, %d builds", gate.State(), builds.Load())
	}
	rc := mgr.REST()
	crds, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"}}})
	install := func() {
		var obj unstructured.Unstructured
		if err := json.Unmarshal([]byte(gadgetCRD), &obj.Object); err != nil {
			t.Fatal(err)
		}
		if _, err := crds.Create(ctx, &obj, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	gadgets, _ := client.For[unstructured.Unstructured](rc, client.Options{Resource: gadgetRes})
	for round := 1; round <= 2; round++ {
		install()
		eventually(t, "the controller to start", func() bool { return gate.State() == manager.GateRunning })
		before := reconciled.Load()
		eventually(t, "a gadget to be reconciled", func() bool {
			_, err := gadgets.Namespace("default").Create(ctx, &unstructured.Unstructured{Object: map[string]any{
				"apiVersion": "gate.loom.dev/v1", "kind": "Gadget", "metadata": map[string]any{"name": "g"}}}, metav1.CreateOptions{})
			return (err == nil || apierrors.IsAlreadyExists(err)) && reconciled.Load() > before
		})
		if err := crds.Delete(ctx, "gadgets.gate.loom.dev", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "the controller to stop", func() bool { return gate.State() == manager.GateWaiting })
		eventually(t, "the CRD to be gone", func() bool {
			_, ok, err := client.Optional(crds.Get(ctx, "gadgets.gate.loom.dev", metav1.GetOptions{}))
			return !ok && err == nil
		})
	}
	// Two installs, two runs; a run may restart once if the resource was
	// not served yet the instant the CRD became Established.
	if gate.Runs() < 2 {
		t.Fatalf("gated controller ran %d times, want at least 2", gate.Runs())
	}
	select {
	case err := <-done:
		t.Fatalf("manager stopped: %v", err)
	default:
	}
}
