package main

import (
	"strconv"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
	"github.com/loom-k8s/loom/testenv"
)

// TestSmall runs every implementation once on a small cluster (200
// Secrets of 2 KB in 4 namespaces) and checks what does not depend on
// the machine: every change reached its reconciler, and the requests per
// steady-state reconcile are 0 for the caches that hold what is read and
// 1 for those that GET it.
func TestSmall(t *testing.T) {
	*secrets, *namespaces, *size, *passes = 200, 4, 2048, 1
	env := testenv.New(t, testenv.Options{})
	cs, err := benchenv.Clientset(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := populate(t.Context(), cs); err != nil {
		t.Fatal(err)
	}
	for impl, reqs := range map[string]string{"loom": "0.000", "loom-strip": "0.000", "loom-meta-get": "1.000", "client-go": "0.000", "cr-meta": "1.000"} {
		line, err := runMode(impl, env.KubeconfigPath)
		if err != nil {
			t.Fatalf("%s: %v", impl, err)
		}
		kv := map[string]string{}
		for _, f := range strings.Fields(line) {
			k, v, _ := strings.Cut(f, "=")
			kv[k] = v
		}
		if kv["missed"] != "0" || kv["changes"] != strconv.Itoa(*namespaces**passes) || kv["reqs_per_reconcile"] != reqs {
			t.Errorf("%s: %s; want missed=0 changes=%d reqs_per_reconcile=%s", impl, line, *namespaces**passes, reqs)
		}
		t.Log(line)
	}
}
