package crd

import (
	"context"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"sync/atomic"
	"testing"
	"time"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// lateDiscovery serves legacy discovery in which the group gadgets.example
// appears only from the after-th request for /apis on, as an API server's
// discovery follows a CRD some time after it is Established.
func lateDiscovery(t *testing.T, after int64) *rest.Client {
	t.Helper()
	var asked atomic.Int64
	write := func(w http.ResponseWriter, v any) {
		w.Header().Set("Content-Type", "application/json")
		_ = json.NewEncoder(w).Encode(v)
	}
	srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		switch r.URL.Path {
		case "/api":
			write(w, metav1.APIVersions{Versions: []string{"v1"}})
		case "/api/v1":
			write(w, metav1.APIResourceList{GroupVersion: "v1", APIResources: []metav1.APIResource{{Name: "pods", Kind: "Pod", Namespaced: true}}})
		case "/apis":
			l := metav1.APIGroupList{}
			if asked.Add(1) >= after {
				gv := metav1.GroupVersionForDiscovery{GroupVersion: "gadgets.example/v1", Version: "v1"}
				l.Groups = append(l.Groups, metav1.APIGroup{Name: "gadgets.example", Versions: []metav1.GroupVersionForDiscovery{gv}, PreferredVersion: gv})
			}
			write(w, l)
		case "/apis/gadgets.example/v1":
			write(w, metav1.APIResourceList{GroupVersion: "gadgets.example/v1", APIResources: []metav1.APIResource{{Name: "gadgets", Kind: "Gadget", Namespaced: true}}})
		default:
			http.NotFound(w, r)
		}
	}))
	t.Cleanup(srv.Close)
	rc, err := rest.New(config.Config{Host: srv.URL}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	return rc
}

func gadgetCRD() *unstructured.Unstructured {
	return &unstructured.Unstructured{Object: map[string]any{
		"metadata": map[string]any{"name": "gadgets.gadgets.example"},
		"spec": map[string]any{
			"group": "gadgets.example",
			"names": map[string]any{"plural": "gadgets", "kind": "Gadget"},
			"versions": []any{
				map[string]any{"name": "v1", "served": true},
				map[string]any{"name": "v0", "served": false}, // not served: not waited for
			},
		},
	}}
}

// TestWaitDiscoverable: the wait ends once discovery lists the served
// version, and fails with a NotEstablishedError naming the CRD when the
// context ends first.
func TestWaitDiscoverable(t *testing.T) {
	rc := lateDiscovery(t, 4)
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	if err := waitDiscoverable(ctx, rc, []*unstructured.Unstructured{gadgetCRD()}); err != nil {
		t.Fatalf("waitDiscoverable: %v", err)
	}

	never := lateDiscovery(t, 1<<40)
	ctx, cancel = context.WithTimeout(t.Context(), 300*time.Millisecond)
	defer cancel()
	err := waitDiscoverable(ctx, never, []*unstructured.Unstructured{gadgetCRD()})
	var ne *NotEstablishedError
	if !errors.As(err, &ne) || ne.Name != "gadgets.gadgets.example" || ne.Condition != "Discoverable" || !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("waitDiscoverable with a group that never comes: %v, want a NotEstablishedError (Discoverable) wrapping the deadline", err)
	}
}
