package testenv_test

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// TestCRDsAtStart starts a control plane with a CRD folder: the custom
// resource can be written as soon as Start returns, through the REST
// client the Env hands back.
func TestCRDsAtStart(t *testing.T) {
	env := testenv.New(t, testenv.Options{CRDs: []string{"../examples/foo/config/crd"}})
	rc, err := env.REST(rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	foos, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: client.Resource{
		Resource:   schema.GroupVersionResource{Group: "samplecontroller.k8s.io", Version: "v1alpha1", Resource: "foos"},
		Namespaced: true,
	}})
	if err != nil {
		t.Fatal(err)
	}
	foo := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "samplecontroller.k8s.io/v1alpha1", "kind": "Foo",
		"metadata": map[string]any{"namespace": "default", "name": "right-away"},
		"spec":     map[string]any{"deploymentName": "right-away", "replicas": int64(1)},
	}}
	if _, err := foos.Create(t.Context(), foo, metav1.CreateOptions{}); err != nil {
		t.Fatalf("creating a Foo right after Start: %v", err)
	}
	if _, err := env.Config(); err != nil {
		t.Fatal(err)
	}
}

// TestCRDsAtStartRefusesABadFile starts with a file that holds no CRD:
// Start fails, naming the file, and leaves nothing running.
func TestCRDsAtStartRefusesABadFile(t *testing.T) {
	bad := filepath.Join(t.TempDir(), "not-a-crd.yaml")
	if err := os.WriteFile(bad, []byte("kind: ConfigMap\napiVersion: v1\nmetadata: {name: x}\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{CRDs: []string{bad}})
	if err == nil {
		env.Stop()
		t.Fatal("Start with a file holding no CRD succeeded")
	}
	if !errors.Is(err, crd.ErrNoCRDs) && !errors.As(err, new(*crd.ReadError)) {
		t.Errorf("Start = %v; want an error from reading the CRDs", err)
	}
	t.Logf("Start: %v", err)
}
