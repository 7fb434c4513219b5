package cache_test

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

// TestStoreReader reads a store filled by hand through StoreReader:
// lists by namespace and selector, and gets that find an object or fail
// with NotFound.
func TestStoreReader(t *testing.T) {
	store := cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{})
	for _, o := range []*corev1.ConfigMap{
		cmIn("a", "web", "1", map[string]string{"app": "web", "tier": "front"}),
		cmIn("a", "db", "2", map[string]string{"app": "db", "tier": "back"}),
		cmIn("b", "web", "3", map[string]string{"app": "web", "tier": "front"}),
		cmIn("b", "cache", "4", nil),
	} {
		if err := store.Add(o); err != nil {
			t.Fatal(err)
		}
	}
	nodes := cache.NewStore(cache.StoreOptions[*corev1.Node]{})
	if err := nodes.Add(&corev1.Node{ObjectMeta: metav1.ObjectMeta{Name: "n1"}}); err != nil {
		t.Fatal(err)
	}
	l := cache.StoreReader(store)
	sel := func(s string) labels.Selector {
		t.Helper()
		p, err := labels.Parse(s)
		if err != nil {
			t.Fatal(err)
		}
		return p
	}
	list := []struct {
		name      string
		namespace string
		selector  labels.Selector
		want      []string
	}{
		{"everything, nil selector", "", nil, []string{"a/db", "a/web", "b/cache", "b/web"}},
		{"everything, Everything()", "", labels.Everything(), []string{"a/db", "a/web", "b/cache", "b/web"}},
		{"by label, all namespaces", "", sel("app=web"), []string{"a/web", "b/web"}},
		{"set-based", "", sel("tier in (front,back),app!=db"), []string{"a/web", "b/web"}},
		{"label absent", "", sel("!app"), []string{"b/cache"}},
		{"one namespace", "a", nil, []string{"a/db", "a/web"}},
		{"one namespace, by label", "b", sel("tier=front"), []string{"b/web"}},
		{"no match", "a", sel("app=nope"), nil},
	}
	for _, tt := range list {
		t.Run("List "+tt.name, func(t *testing.T) {
			got, err := l.List(t.Context(), tt.namespace, tt.selector)
			if err != nil {
				t.Fatal(err)
			}
			var keys []string
			for _, o := range got {
				keys = append(keys, o.Namespace+"/"+o.Name)
			}
			slices.Sort(keys)
			if !slices.Equal(keys, tt.want) {
				t.Errorf("got %v, want %v", keys, tt.want)
			}
		})
	}
	get := []struct {
		namespace, name string
		wantRV          string // "" for absent
	}{
		{"a", "web", "1"},
		{"b", "web", "3"},
		{"c", "web", ""},
		{"", "web", ""}, // a namespaced object is not found in the cluster scope
	}
	for _, tt := range get {
		o, err := l.Get(t.Context(), tt.namespace, tt.name)
		switch {
		case tt.wantRV == "" && !apierrors.IsNotFound(err):
			t.Errorf("Get(%q, %q) = %v, %v; want NotFound", tt.namespace, tt.name, o, err)
		case tt.wantRV != "" && (err != nil || o.ResourceVersion != tt.wantRV):
			t.Errorf("Get(%q, %q) = %v, %v; want rv %q", tt.namespace, tt.name, o, err, tt.wantRV)
		}
	}
	if n, err := cache.StoreReader(nodes).Get(t.Context(), "", "n1"); err != nil || n.Name != "n1" {
		t.Errorf("cluster-scoped Get: %v %v", n, err)
	}
}
