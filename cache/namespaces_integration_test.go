package cache_test

import (
	"bufio"
	"context"
	"errors"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/testenv"
)

// serverLists returns how many LIST requests for namespaced ConfigMaps
// kube-apiserver has served, from its own metrics.
func serverLists(t *testing.T, env *testenv.Env) int {
	t.Helper()
	hc, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Get(env.URL + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	n := 0
	sc := bufio.NewScanner(resp.Body)
	sc.Buffer(make([]byte, 1<<20), 1<<20)
	for sc.Scan() {
		line := sc.Text()
		if !strings.HasPrefix(line, "apiserver_request_total{") || !strings.Contains(line, `resource="configmaps"`) ||
			!strings.Contains(line, `verb="LIST"`) || !strings.Contains(line, `scope="namespace"`) {
			continue
		}
		v, err := strconv.ParseFloat(line[strings.LastIndexByte(line, ' ')+1:], 64)
		if err != nil {
			t.Fatalf("metrics line %q: %v", line, err)
		}
		n += int(v)
	}
	if err := sc.Err(); err != nil {
		t.Fatal(err)
	}
	return n
}

// namespacesOf returns the sorted namespaces of the cached ConfigMaps
// named "cm".
func namespacesOf(inf *cache.Informer[*corev1.ConfigMap], name string) []string {
	var out []string
	for _, cm := range inf.Indexer().List() {
		if cm.Name == name {
			out = append(out, cm.Namespace)
		}
	}
	slices.Sort(out)
	return out
}

// TestFactoryNamespacesWithNamespacedRBAC caches ConfigMaps in a set of
// namespaces as a user whom RBAC lets read ConfigMaps in those namespaces
// only, then changes the set while the informer runs: an added namespace
// costs exactly one LIST at the API server, and a removed one none; the
// cache follows both, and the watch goes on in the namespaces kept.
func TestFactoryNamespacesWithNamespacedRBAC(t *testing.T) {
	ctx := t.Context()
	env := testenv.New(t, testenv.Options{})
	admin := restFrom(t, env.KubeconfigPath)
	nss, _ := client.For[corev1.Namespace](admin, client.Options{})
	cms, _ := client.For[corev1.ConfigMap](admin, client.Options{})
	roles, _ := client.For[rbacv1.Role](admin, client.Options{})
	bindings, _ := client.For[rbacv1.RoleBinding](admin, client.Options{})
	create := func(ns, name string) {
		t.Helper()
		if _, err := cms.Namespace(ns).Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for _, ns := range []string{"ns-a", "ns-b", "ns-c", "ns-secret"} {
		if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		create(ns, "cm")
		create(ns, "cm2")
		if ns == "ns-secret" {
			continue // the reader may not read here
		}
		if _, err := roles.Namespace(ns).Create(ctx, &rbacv1.Role{
			ObjectMeta: metav1.ObjectMeta{Name: "read-configmaps"},
			Rules:      []rbacv1.PolicyRule{{APIGroups: []string{""}, Resources: []string{"configmaps"}, Verbs: []string{"get", "list", "watch"}}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if _, err := bindings.Namespace(ns).Create(ctx, &rbacv1.RoleBinding{
			ObjectMeta: metav1.ObjectMeta{Name: "reader"},
			RoleRef:    rbacv1.RoleRef{APIGroup: "rbac.authorization.k8s.io", Kind: "Role", Name: "read-configmaps"},
			Subjects:   []rbacv1.Subject{{APIGroup: "rbac.authorization.k8s.io", Kind: "User", Name: "reader"}},
		}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	kc, err := env.UserKubeconfig("reader")
	if err != nil {
		t.Fatal(err)
	}
	kcPath := filepath.Join(t.TempDir(), "reader.kubeconfig")
	if err := os.WriteFile(kcPath, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	reader := restFrom(t, kcPath)

	// Pages of one object: each namespace's list takes pages of its own,
	// then goes on with the next namespace.
	f := cache.NewFactory(reader, cache.FactoryOptions{Namespaces: []string{"ns-b", "ns-a"}, Reflector: cache.ReflectorOptions{PageSize: 1}})
	defer f.Shutdown()
	inf, err := cache.InformerFor[corev1.ConfigMap](f, cache.InformerForOptions{})
	if err != nil {
		t.Fatal(err)
	}
	go func() { _ = f.Start(ctx) }()
	if err := f.WaitForCacheSync(ctx); err != nil {
		t.Fatal(err)
	}
	if got, got2 := namespacesOf(inf, "cm"), namespacesOf(inf, "cm2"); !slices.Equal(got, []string{"ns-a", "ns-b"}) || !slices.Equal(got2, got) {
		t.Fatalf("cached cm in %v and cm2 in %v, want both in ns-a and ns-b", got, got2)
	}
	wait := func(what string, ok func() bool) {
		t.Helper()
		ctx, cancel := context.WithTimeout(ctx, time.Minute)
		defer cancel()
		for !ok() {
			select {
			case <-ctx.Done():
				t.Fatalf("waiting for %s: %v; cached: %v", what, ctx.Err(), namespacesOf(inf, "cm"))
			case <-time.After(10 * time.Millisecond):
			}
		}
	}

	// Add ns-c: one LIST, for ns-c alone.
	before := serverLists(t, env)
	if err := f.SetNamespaces(ctx, "ns-a", "ns-b", "ns-c"); err != nil {
		t.Fatal(err)
	}
	wait("ns-c's ConfigMap", func() bool { return slices.Equal(namespacesOf(inf, "cm"), []string{"ns-a", "ns-b", "ns-c"}) })
	if got := serverLists(t, env) - before; got != 1 {
		t.Errorf("adding a namespace made %d LISTs at the API server, want 1", got)
	}
	create("ns-c", "later")
	wait("a ConfigMap made in ns-c after it joined", func() bool { return slices.Equal(namespacesOf(inf, "later"), []string{"ns-c"}) })

	// Remove ns-a: its objects go, nothing is listed, the others watch on.
	before = serverLists(t, env)
	if err := f.SetNamespaces(ctx, "ns-b", "ns-c"); err != nil {
		t.Fatal(err)
	}
	if got := namespacesOf(inf, "cm"); !slices.Equal(got, []string{"ns-b", "ns-c"}) {
		t.Errorf("after removing ns-a, cached in %v; want ns-b and ns-c", got)
	}
	create("ns-b", "after-removal")
	wait("a ConfigMap made in ns-b after ns-a left", func() bool { return slices.Equal(namespacesOf(inf, "after-removal"), []string{"ns-b"}) })
	if got := serverLists(t, env) - before; got != 0 {
		t.Errorf("removing a namespace made %d LISTs at the API server, want 0", got)
	}
	create("ns-a", "unseen")
	create("ns-b", "seen")
	wait("a ConfigMap made in ns-b", func() bool { return slices.Equal(namespacesOf(inf, "seen"), []string{"ns-b"}) })
	if got := namespacesOf(inf, "unseen"); len(got) != 0 {
		t.Errorf("a ConfigMap made in the removed ns-a was cached: %v", got)
	}

	// A namespace the user may not read: the informer reports the denial
	// and keeps what it has.
	if err := f.SetNamespaces(ctx, "ns-b", "ns-c", "ns-secret"); err != nil {
		t.Fatal(err)
	}
	wait("the denial of ns-secret", func() bool {
		err := inf.LastError()
		return err != nil && strings.Contains(err.Error(), "forbidden")
	})
	if got := namespacesOf(inf, "cm"); !slices.Equal(got, []string{"ns-b", "ns-c"}) {
		t.Errorf("with ns-secret denied, cached in %v; want ns-b and ns-c", got)
	}
	// The denied namespace is tried again in the background; the others'
	// events keep coming.
	create("ns-c", "while-denied")
	wait("a ConfigMap made in ns-c while ns-secret is denied", func() bool { return slices.Equal(namespacesOf(inf, "while-denied"), []string{"ns-c"}) })
	if err := f.SetNamespaces(ctx); err != nil {
		t.Fatal(err)
	}
	if got := namespacesOf(inf, "cm"); len(got) != 0 {
		t.Errorf("with no namespaces, cached in %v", got)
	}
}

// TestSetNamespacesNeedsASet checks the error of a factory without a set.
func TestSetNamespacesNeedsASet(t *testing.T) {
	f := cache.NewFactory(nil, cache.FactoryOptions{})
	if err := f.SetNamespaces(t.Context(), "a"); !errors.Is(err, cache.ErrNoNamespaceSet) {
		t.Fatalf("SetNamespaces = %v, want ErrNoNamespaceSet", err)
	}
}
