package main

import (
	"bufio"
	"context"
	"crypto/tls"
	"crypto/x509"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/server"
)

const group = restaurant.GroupName

// restaurantServer is the custom API server running in the test process.
type restaurantServer struct {
	opts    server.Options
	port    int
	cancel  context.CancelFunc
	done    chan error
	CAPEM   []byte // the self-signed serving certificate's bundle
	stopped bool
}

// start runs the server on 127.0.0.1:port (0: a free port) until stop.
func start(t *testing.T, opts server.Options, port int) *restaurantServer {
	t.Helper()
	l, err := net.Listen("tcp", fmt.Sprintf("127.0.0.1:%d", port))
	if err != nil {
		t.Fatal(err)
	}
	opts.Listener = l
	s, err := server.New(opts)
	if err != nil {
		l.Close()
		t.Fatal(err)
	}
	ca, err := os.ReadFile(server.ServingCertFile(opts.CertDir))
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	rs := &restaurantServer{opts: opts, port: l.Addr().(*net.TCPAddr).Port, cancel: cancel, done: make(chan error, 1), CAPEM: ca}
	go func() { rs.done <- s.Run(ctx) }()
	t.Cleanup(func() { rs.stop(t) })
	return rs
}

// stop shuts the server down and waits for it, with a deadline.
func (rs *restaurantServer) stop(t *testing.T) {
	t.Helper()
	if rs.stopped {
		return
	}
	rs.stopped = true
	rs.cancel()
	select {
	case err := <-rs.done:
		if err != nil {
			t.Errorf("server: %v", err)
		}
	case <-time.After(2 * time.Minute):
		t.Fatal("the server did not stop within 2 minutes")
	}
}

// kubectl runs kubectl with stdin (may be empty) and returns its stdout,
// and stderr in the error.
func kubectl(t *testing.T, kubeconfig, stdin string, args ...string) (string, error) {
	t.Helper()
	cmd := exec.CommandContext(t.Context(), filepath.Join(testenv.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", kubeconfig}, args...)...)
	cmd.Stdin = strings.NewReader(stdin)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return string(out), fmt.Errorf("kubectl %s: %w: %s", strings.Join(args, " "), err, stderr.String())
	}
	return string(out), nil
}

func mustKubectl(t *testing.T, kubeconfig, stdin string, args ...string) string {
	t.Helper()
	out, err := kubectl(t, kubeconfig, stdin, args...)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func writeFile(t *testing.T, dir, name string, b []byte) string {
	t.Helper()
	p := filepath.Join(dir, name)
	if err := os.WriteFile(p, b, 0o600); err != nil {
		t.Fatal(err)
	}
	return p
}

// eventually polls check until it returns nil or the deadline passes.
func eventually(t *testing.T, what string, timeout time.Duration, check func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := check()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: still failing after %s: %v", what, timeout, err)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

var pizzasV1beta1 = client.Resource{
	Resource:   schema.GroupVersionResource{Group: group, Version: "v1beta1", Resource: "pizzas"},
	Kind:       schema.GroupVersionKind{Group: group, Version: "v1beta1", Kind: "Pizza"},
	Namespaced: true,
}

// TestRestaurant runs the restaurant server behind a real kube-apiserver
// and uses it through the aggregator with kubectl, Loom's dynamic client,
// an informer and loom get, and directly to check delegated authorization.
func TestRestaurant(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	dir := t.TempDir()
	admin := env.KubeconfigPath

	// The server's own identity, with the RBAC it needs (config/rbac.yaml).
	rbac, err := os.ReadFile("config/rbac.yaml")
	if err != nil {
		t.Fatal(err)
	}
	mustKubectl(t, admin, string(rbac), "apply", "-f", "-")
	kc, err := env.UserKubeconfig("restaurant-apiserver")
	if err != nil {
		t.Fatal(err)
	}
	opts := server.Options{
		Kubeconfig:   writeFile(t, dir, "server.kubeconfig", kc),
		Storage:      "file:" + filepath.Join(dir, "state.json"),
		CertDir:      filepath.Join(dir, "certs"),
		ServingHosts: []string{testenv.LocalAPIServiceHost(group), serviceHost},
	}
	srv := start(t, opts, 0)
	for _, v := range []string{"v1beta1", "v1alpha1"} {
		if err := env.RegisterLocalAPIService(t.Context(), group, v, srv.port, srv.CAPEM); err != nil {
			t.Fatal(err)
		}
	}
	for _, v := range []string{"v1beta1", "v1alpha1"} {
		if err := env.WaitAPIServiceAvailable(t.Context(), group, v); err != nil {
			t.Fatal(err)
		}
	}

	// The menu.
	mustKubectl(t, admin, `
apiVersion: restaurant.programming-kubernetes.info/v1beta1
kind: Topping
metadata: {name: tomato}
spec: {cost: 0.5}
---
apiVersion: restaurant.programming-kubernetes.info/v1beta1
kind: Topping
metadata: {name: mozzarella}
spec: {cost: 1.25}
---
apiVersion: restaurant.programming-kubernetes.info/v1alpha1
kind: Topping
metadata: {name: salami}
spec: {cost: 2}
`, "apply", "-f", "-")

	t.Run("kubectl versions, defaulting and conversion", func(t *testing.T) {
		// v1alpha1: a name per portion; no toppings means a margherita.
		mustKubectl(t, admin, `
apiVersion: restaurant.programming-kubernetes.info/v1alpha1
kind: Pizza
metadata: {name: double-mozzarella}
spec: {toppings: [tomato, mozzarella, salami, mozzarella]}
---
apiVersion: restaurant.programming-kubernetes.info/v1alpha1
kind: Pizza
metadata: {name: margherita}
spec: {}
---
apiVersion: restaurant.programming-kubernetes.info/v1beta1
kind: Pizza
metadata: {name: salami}
spec: {toppings: [{name: tomato}, {name: salami, quantity: 3}]}
`, "create", "-f", "-")
		got := mustKubectl(t, admin, "", "get", "pizzas.v1beta1."+group, "double-mozzarella", "-o", "jsonpath={.spec.toppings}")
		if want := `[{"name":"tomato","quantity":1},{"name":"mozzarella","quantity":2},{"name":"salami","quantity":1}]`; got != want {
			t.Errorf("v1beta1 view of a v1alpha1 pizza: %s, want %s", got, want)
		}
		got = mustKubectl(t, admin, "", "get", "pizzas.v1alpha1."+group, "double-mozzarella", "-o", "jsonpath={.spec.toppings}")
		if want := `["tomato","mozzarella","mozzarella","salami"]`; got != want {
			t.Errorf("v1alpha1 round trip: %s, want %s", got, want)
		}
		got = mustKubectl(t, admin, "", "get", "pizzas.v1beta1."+group, "margherita", "-o", "jsonpath={.spec.toppings}")
		if want := `[{"name":"tomato","quantity":1},{"name":"mozzarella","quantity":1}]`; got != want {
			t.Errorf("v1alpha1 default toppings: %s, want %s", got, want)
		}
		got = mustKubectl(t, admin, "", "get", "pizzas.v1alpha1."+group, "salami", "-o", "jsonpath={.spec.toppings}")
		if want := `["tomato","salami","salami","salami"]`; got != want {
			t.Errorf("v1beta1 quantity default and conversion: %s, want %s", got, want)
		}
		// The preferred version is v1beta1, and the table has our columns.
		table := mustKubectl(t, admin, "", "get", "pizzas")
		if !strings.Contains(table, "TOPPINGS") || !strings.Contains(table, "tomato, mozzarella×2, salami") {
			t.Errorf("kubectl get pizzas:\n%s", table)
		}
		got = mustKubectl(t, admin, "", "get", "pizza", "margherita", "-o", "jsonpath={.apiVersion}")
		if got != group+"/v1beta1" {
			t.Errorf("preferred version: %s", got)
		}
		// Validation: a quantity out of range.
		_, err := kubectl(t, admin, `{"apiVersion":"`+group+`/v1beta1","kind":"Pizza","metadata":{"name":"greedy"},"spec":{"toppings":[{"name":"salami","quantity":11}]}}`, "create", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), "must be from 1 to 10 portions") {
			t.Errorf("quantity 11 accepted or wrong error: %v", err)
		}
	})

	t.Run("admission refuses unknown toppings", func(t *testing.T) {
		_, err := kubectl(t, admin, `{"apiVersion":"`+group+`/v1alpha1","kind":"Pizza","metadata":{"name":"hawaii"},"spec":{"toppings":["tomato","pineapple","ham"]}}`, "create", "-f", "-")
		if err == nil || !strings.Contains(err.Error(), `not on the menu: "ham", "pineapple"`) {
			t.Fatalf("kubectl: a pizza with unknown toppings: %v", err)
		}
		// The same through Loom, as a typed 403.
		pizzas := loomPizzas(t, env)
		_, err = pizzas.Namespace("default").Create(t.Context(), pizza("hawaii", "pineapple"), metav1.CreateOptions{})
		if !apierrors.IsForbidden(err) || !strings.Contains(err.Error(), `not on the menu: "pineapple"`) {
			t.Fatalf("Loom: %v", err)
		}
		// Removing a topping from the menu does not block changes to
		// pizzas that already have it, only new uses.
		mustKubectl(t, admin, `{"apiVersion":"`+group+`/v1beta1","kind":"Topping","metadata":{"name":"olive"},"spec":{"cost":0.3}}`, "create", "-f", "-")
		mustKubectl(t, admin, `{"apiVersion":"`+group+`/v1beta1","kind":"Pizza","metadata":{"name":"olives"},"spec":{"toppings":[{"name":"olive"}]}}`, "create", "-f", "-")
		mustKubectl(t, admin, "", "delete", "topping", "olive")
		mustKubectl(t, admin, "", "label", "pizza", "olives", "table=7")
		mustKubectl(t, admin, "", "delete", "pizza", "olives")
	})

	t.Run("price subresource", func(t *testing.T) {
		raw := mustKubectl(t, admin, "", "get", "--raw", "/apis/"+group+"/v1beta1/namespaces/default/pizzas/double-mozzarella/price")
		var price struct {
			Kind  string
			Total float64
			Lines []struct {
				Topping  string
				Quantity int
			}
		}
		if err := json.Unmarshal([]byte(raw), &price); err != nil {
			t.Fatal(err)
		}
		if price.Kind != "PizzaPrice" || price.Total != 0.5+2*1.25+2 || len(price.Lines) != 3 {
			t.Fatalf("price: %s", raw)
		}
		// The price follows the toppings' current cost.
		mustKubectl(t, admin, "", "patch", "topping", "salami", "--type=merge", "-p", `{"spec":{"cost":3}}`)
		raw = mustKubectl(t, admin, "", "get", "--raw", "/apis/"+group+"/v1alpha1/namespaces/default/pizzas/double-mozzarella/price")
		if err := json.Unmarshal([]byte(raw), &price); err != nil {
			t.Fatal(err)
		}
		if price.Total != 0.5+2*1.25+3 {
			t.Fatalf("price after a cost change: %s", raw)
		}
	})

	t.Run("Loom dynamic client create list watch", func(t *testing.T) {
		pizzas := loomPizzas(t, env).Namespace("default")
		ctx := t.Context()
		list, err := pizzas.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		before := len(list.Items)
		w, err := pizzas.Watch(ctx, metav1.ListOptions{ResourceVersion: list.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		created, err := pizzas.Create(ctx, pizza("loom", "salami", "tomato"), metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		created.Object["spec"] = map[string]any{"toppings": []any{map[string]any{"name": "salami", "quantity": int64(2)}}}
		if _, err := pizzas.Update(ctx, created, metav1.UpdateOptions{}); err != nil {
			t.Fatal(err)
		}
		// A stale update conflicts.
		if _, err := pizzas.Update(ctx, created, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
			t.Fatalf("stale update: %v, want 409", err)
		}
		if err := pizzas.Delete(ctx, "loom", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		var seen []string
		for len(seen) < 3 {
			ev, err := w.Next()
			if err != nil {
				t.Fatalf("watch after %v: %v", seen, err)
			}
			seen = append(seen, fmt.Sprintf("%s %s gen=%d", ev.Type, ev.Object.GetName(), ev.Object.GetGeneration()))
		}
		if want := []string{"ADDED loom gen=1", "MODIFIED loom gen=2", "DELETED loom gen=2"}; !slices.Equal(seen, want) {
			t.Fatalf("watch saw %v, want %v", seen, want)
		}
		list, err = pizzas.List(ctx, metav1.ListOptions{LabelSelector: "nothing=here"})
		if err != nil || len(list.Items) != 0 {
			t.Fatalf("selector list: %v, %v", list, err)
		}
		list, err = pizzas.List(ctx, metav1.ListOptions{})
		if err != nil || len(list.Items) != before {
			t.Fatalf("list after delete: %d items (was %d), %v", len(list.Items), before, err)
		}
	})

	t.Run("kubectl watch", func(t *testing.T) {
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cmd := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"), "--kubeconfig", admin,
			"get", "pizzas", "--watch-only", "-o", "name")
		lines := startLines(t, cmd)
		defer func() { cancel(); _ = cmd.Wait() }()
		// kubectl may not be watching yet: create pizzas until one shows up.
		deadline := time.After(time.Minute)
		for i := 0; ; i++ {
			name := fmt.Sprintf("watched-%d", i)
			mustKubectl(t, admin, `{"apiVersion":"`+group+`/v1beta1","kind":"Pizza","metadata":{"name":"`+name+`"},"spec":{"toppings":[{"name":"tomato"}]}}`, "create", "-f", "-")
			select {
			case l := <-lines:
				if !strings.HasPrefix(l, "pizza."+group+"/watched-") {
					t.Fatalf("kubectl -w printed %q", l)
				}
				return
			case <-deadline:
				t.Fatal("kubectl get -w printed nothing in a minute")
			case <-time.After(2 * time.Second):
			}
		}
	})

	t.Run("delegated authorization", func(t *testing.T) {
		// Through the aggregator, kube-apiserver's own RBAC refuses first.
		mallory, err := env.UserKubeconfig("mallory")
		if err != nil {
			t.Fatal(err)
		}
		_, err = kubectl(t, writeFile(t, t.TempDir(), "kubeconfig", mallory), "", "get", "pizzas")
		if err == nil || !strings.Contains(err.Error(), "forbidden") {
			t.Fatalf("mallory listed pizzas through kube-apiserver: %v", err)
		}
		// Straight to the restaurant server, its delegated authenticator
		// accepts mallory's certificate (kube-apiserver's client CA, read
		// from kube-system/extension-apiserver-authentication) and its
		// delegated authorizer asks kube-apiserver, which says no.
		code, body := direct(t, env, srv, "mallory", "/apis/"+group+"/v1beta1/namespaces/default/pizzas")
		if code != http.StatusForbidden || !strings.Contains(body, `User \"mallory\" cannot list resource \"pizzas\"`) {
			t.Fatalf("mallory straight to the server: %d %s", code, body)
		}
		// Bound to restaurant-editor, alice may.
		mustKubectl(t, admin, "", "create", "clusterrolebinding", "alice-restaurant", "--clusterrole=restaurant-editor", "--user=alice")
		eventually(t, "alice allowed (authorization decisions are cached for a short while)", time.Minute, func() error {
			code, body := direct(t, env, srv, "alice", "/apis/"+group+"/v1beta1/namespaces/default/pizzas")
			if code != http.StatusOK || !strings.Contains(body, `"kind":"PizzaList"`) {
				return fmt.Errorf("%d %s", code, body)
			}
			return nil
		})
		// Without a certificate: no identity at all.
		code, _ = direct(t, env, srv, "", "/apis/"+group+"/v1beta1/namespaces/default/pizzas")
		if code != http.StatusUnauthorized && code != http.StatusForbidden {
			t.Fatalf("anonymous straight to the server: %d", code)
		}
	})

	t.Run("register as main --register does", func(t *testing.T) {
		if err := register(t.Context(), admin, srv.port, opts.CertDir); err != nil {
			t.Fatal(err)
		}
		if got := mustKubectl(t, admin, "", "get", "apiservice", "v1beta1."+group, "-o", "jsonpath={.spec.service.name}"); got != serviceName {
			t.Fatalf("APIService points to %q", got)
		}
		for _, v := range []string{"v1beta1", "v1alpha1"} {
			if err := env.WaitAPIServiceAvailable(t.Context(), group, v); err != nil {
				t.Fatal(err)
			}
		}
		eventually(t, "pizzas through the new Service", time.Minute, func() error {
			out, err := kubectl(t, admin, "", "get", "pizza", "double-mozzarella", "-o", "name")
			if err != nil || !strings.Contains(out, "double-mozzarella") {
				return fmt.Errorf("%q %v", out, err)
			}
			return nil
		})
	})

	t.Run("loom get", func(t *testing.T) {
		bin := filepath.Join(t.TempDir(), "loom")
		build := exec.CommandContext(t.Context(), "go", "build", "-o", bin, "github.com/loom-k8s/loom/cmd/loom")
		build.Dir = "../.." // the core module, with its own dependency versions
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("go build loom: %v\n%s", err, out)
		}
		loom := func(args ...string) string {
			out, err := exec.CommandContext(t.Context(), bin, append([]string{"get", "--kubeconfig", admin}, args...)...).CombinedOutput()
			if err != nil {
				t.Fatalf("loom get %v: %v\n%s", args, err, out)
			}
			return string(out)
		}
		for _, args := range [][]string{{"pizzas"}, {"toppings"}, {"pizzas.v1alpha1." + group, "margherita"}, {"pizzas", "-o", "name"}} {
			want := dropAge(mustKubectl(t, admin, "", append([]string{"get"}, args...)...))
			if got := dropAge(loom(args...)); got != want {
				t.Errorf("loom get %v:\n%s\nkubectl:\n%s", args, got, want)
			}
		}
		// loom get -w follows the group through the aggregator.
		ctx, cancel := context.WithCancel(t.Context())
		defer cancel()
		cmd := exec.CommandContext(ctx, bin, "get", "--kubeconfig", admin, "pizzas", "-w")
		lines := startLines(t, cmd)
		defer func() { cancel(); _ = cmd.Wait() }()
		seen := map[string]bool{}
		deadline := time.After(time.Minute)
		for i := 0; !seen[fmt.Sprintf("loom-watched-%d", i-1)] || i == 0; i++ {
			name := fmt.Sprintf("loom-watched-%d", i)
			mustKubectl(t, admin, `{"apiVersion":"`+group+`/v1alpha1","kind":"Pizza","metadata":{"name":"`+name+`"},"spec":{"toppings":["salami","salami"]}}`, "create", "-f", "-")
			wait := time.After(2 * time.Second)
		read:
			for {
				select {
				case l, ok := <-lines:
					if !ok {
						t.Fatal("loom get -w ended")
					}
					if f := strings.Fields(l); len(f) >= 2 && strings.HasPrefix(f[0], "loom-watched-") {
						if f[1] != "salami×2" {
							t.Fatalf("loom get -w printed %q", l)
						}
						seen[f[0]] = true
					}
				case <-wait:
					break read
				case <-deadline:
					t.Fatalf("loom get -w printed no new pizza in a minute (saw %v)", seen)
				}
			}
		}
	})

	t.Run("informer across a server restart", func(t *testing.T) {
		ctx := t.Context()
		pizzas := loomPizzas(t, env).Namespace("default")
		inf := cache.NewInformer(cache.ListWatch(pizzas, cache.ListWatchOptions{}), cache.InformerOptions[*unstructured.Unstructured]{
			Reflector: cache.ReflectorOptions{InitialBackoff: 50 * time.Millisecond, MaxBackoff: time.Second},
		})
		ictx, stopInf := context.WithCancel(ctx)
		var wg sync.WaitGroup
		wg.Go(func() {
			if err := inf.Start(ictx); err != nil && !errors.Is(err, context.Canceled) {
				t.Errorf("informer: %v", err)
			}
		})
		defer func() { stopInf(); wg.Wait() }()
		converged := func() error { return sameAsList(ctx, pizzas, inf) }
		eventually(t, "informer synced", time.Minute, converged)

		// Stop the server, and while it is down change its file as a
		// restore from a backup would: one pizza gone, the
		// resourceVersion moved on. No watch event can tell the informer;
		// only a relist can.
		srv.stop(t)
		dropPizza(t, strings.TrimPrefix(opts.Storage, "file:"), "margherita")
		srv = start(t, opts, srv.port)
		eventually(t, "informer converged after the restart", 2*time.Minute, func() error {
			if _, ok := inf.Indexer().Get("default/margherita"); ok {
				return errors.New("margherita is still cached")
			}
			return converged()
		})
		// And it keeps following new changes.
		if _, err := pizzas.Create(ctx, pizza("after-restart", "tomato"), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
		if err := pizzas.Delete(ctx, "salami", metav1.DeleteOptions{}); err != nil {
			t.Fatal(err)
		}
		eventually(t, "informer follows writes after the restart", time.Minute, func() error {
			if _, ok := inf.Indexer().Get("default/after-restart"); !ok {
				return errors.New("after-restart not cached yet")
			}
			return converged()
		})
		// The file storage kept everything else across the restart.
		got := mustKubectl(t, admin, "", "get", "pizzas", "-o", "name")
		if !strings.Contains(got, "/double-mozzarella") || strings.Contains(got, "/margherita") {
			t.Fatalf("after the restart: %s", got)
		}
	})
}

// loomPizzas is a Loom dynamic client for pizzas in v1beta1, through
// kube-apiserver as the admin.
func loomPizzas(t *testing.T, env *testenv.Env) *client.Client[*unstructured.Unstructured] {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	c, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: pizzasV1beta1})
	if err != nil {
		t.Fatal(err)
	}
	return c
}

func pizza(name string, toppings ...string) *unstructured.Unstructured {
	var ts []any
	for _, t := range toppings {
		ts = append(ts, map[string]any{"name": t})
	}
	return &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": group + "/v1beta1", "kind": "Pizza",
		"metadata": map[string]any{"name": name},
		"spec":     map[string]any{"toppings": ts},
	}}
}

// sameAsList compares the informer's cache with a fresh list: the same
// names at the same resourceVersions.
func sameAsList(ctx context.Context, c *client.Client[*unstructured.Unstructured], inf *cache.Informer[*unstructured.Unstructured]) error {
	if !inf.HasSynced() {
		return errors.New("not synced")
	}
	list, err := c.List(ctx, metav1.ListOptions{})
	if err != nil {
		return err
	}
	want := map[string]string{}
	for _, p := range list.Items {
		want[p.GetName()] = p.GetResourceVersion()
	}
	cached, err := inf.Indexer().Select("", nil)
	if err != nil {
		return err
	}
	got := map[string]string{}
	for _, p := range cached {
		got[p.GetName()] = p.GetResourceVersion()
	}
	if fmt.Sprint(got) != fmt.Sprint(want) {
		return fmt.Errorf("cache %v, server %v", got, want)
	}
	return nil
}

// dropPizza removes a pizza from a stopped server's storage file and
// moves the resourceVersion on.
func dropPizza(t *testing.T, path, name string) {
	t.Helper()
	raw, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	var f struct {
		ResourceVersion string            `json:"resourceVersion"`
		Objects         []json.RawMessage `json:"objects"`
	}
	if err := json.Unmarshal(raw, &f); err != nil {
		t.Fatal(err)
	}
	var kept []json.RawMessage
	for _, o := range f.Objects {
		var m struct {
			Kind     string
			Metadata struct{ Name string }
		}
		if err := json.Unmarshal(o, &m); err != nil {
			t.Fatal(err)
		}
		if m.Kind == "Pizza" && m.Metadata.Name == name {
			continue
		}
		kept = append(kept, o)
	}
	if len(kept) == len(f.Objects) {
		t.Fatalf("no pizza %s in %s", name, path)
	}
	var rv int
	fmt.Sscan(f.ResourceVersion, &rv)
	f.ResourceVersion, f.Objects = fmt.Sprint(rv+1), kept
	out, err := json.Marshal(f)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(path, out, 0o600); err != nil {
		t.Fatal(err)
	}
}

// direct sends a GET straight to the restaurant server (not through
// kube-apiserver) as user, with a client certificate from kube-apiserver's
// CA; user "" sends none.
func direct(t *testing.T, env *testenv.Env, srv *restaurantServer, user, path string) (int, string) {
	t.Helper()
	pool := x509.NewCertPool()
	pool.AppendCertsFromPEM(srv.CAPEM)
	tc := &tls.Config{RootCAs: pool, MinVersion: tls.VersionTLS12}
	if user != "" {
		cert, key, err := env.UserCert(user)
		if err != nil {
			t.Fatal(err)
		}
		pair, err := tls.X509KeyPair(cert, key)
		if err != nil {
			t.Fatal(err)
		}
		tc.Certificates = []tls.Certificate{pair}
	}
	hc := &http.Client{Timeout: 30 * time.Second, Transport: &http.Transport{TLSClientConfig: tc}}
	defer hc.CloseIdleConnections()
	req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, fmt.Sprintf("https://127.0.0.1:%d%s", srv.port, path), nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(b)
}

// startLines starts cmd and sends each line of its output.
func startLines(t *testing.T, cmd *exec.Cmd) <-chan string {
	t.Helper()
	out, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	lines := make(chan string, 100)
	go func() {
		defer close(lines)
		sc := bufio.NewScanner(out)
		for sc.Scan() {
			lines <- sc.Text()
		}
	}()
	return lines
}

// dropAge removes the AGE column (the last one) of a table, which differs
// between two runs a second apart.
func dropAge(s string) string {
	var out []string
	for _, l := range strings.Split(strings.TrimSpace(s), "\n") {
		if i := strings.LastIndex(strings.TrimRight(l, " "), " "); i > 0 && strings.Contains(s, "AGE") {
			l = strings.TrimRight(l[:i], " ")
		}
		out = append(out, l)
	}
	return strings.Join(out, "\n")
}
