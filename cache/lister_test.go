package cache_test

import (
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

func TestLister(t *testing.T) {
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
	l := cache.NewLister[*corev1.ConfigMap](store)
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
		namespace string // "*" for Lister.List
		selector  labels.Selector
		want      []string
	}{
		{"everything, nil selector", "*", nil, []string{"a/db", "a/web", "b/cache", "b/web"}},
		{"everything, Everything()", "*", labels.Everything(), []string{"a/db", "a/web", "b/cache", "b/web"}},
		{"by label, all namespaces", "*", sel("app=web"), []string{"a/web", "b/web"}},
		{"set-based", "*", sel("tier in (front,back),app!=db"), []string{"a/web", "b/web"}},
		{"label absent", "*", sel("!app"), []string{"b/cache"}},
		{"one namespace", "a", nil, []string{"a/db", "a/web"}},
		{"one namespace, by label", "b", sel("tier=front"), []string{"b/web"}},
		{"Namespace(\"\") lists all", "", sel("app"), []string{"a/db", "a/web", "b/web"}},
		{"no match", "a", sel("app=nope"), nil},
	}
	for _, tt := range list {
		t.Run("List "+tt.name, func(t *testing.T) {
			var got []*corev1.ConfigMap
			var err error
			if tt.namespace == "*" {
				got, err = l.List(tt.selector)
			} else {
				got, err = l.Namespace(tt.namespace).List(tt.selector)
			}
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
		o, ok := l.Namespace(tt.namespace).Get(tt.name)
		if ok != (tt.wantRV != "") || ok && o.ResourceVersion != tt.wantRV {
			t.Errorf("Namespace(%q).Get(%q) = %v, %v; want rv %q", tt.namespace, tt.name, o, ok, tt.wantRV)
		}
	}
	nl := cache.NewLister[*corev1.Node](nodes)
	if n, ok := nl.Get("n1"); !ok || n.Name != "n1" {
		t.Errorf("cluster-scoped Get: %v %v", n, ok)
	}
	if _, ok := nl.Namespace("").Get("n1"); !ok {
		t.Error(`Namespace("").Get of a cluster-scoped object failed`)
	}
}
