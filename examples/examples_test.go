// Package examples_test runs every example program against a real control
// plane, as a user would run it with a kubeconfig.
package examples_test

import (
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/testenv"
)

func TestExamples(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	if err := env.AppendPodLog("line 1", "line 2", "line 3"); err != nil {
		t.Fatal(err)
	}
	bin := t.TempDir()
	tests := []struct {
		name string
		want []string // lines the output must contain, in order
	}{
		{"typed", []string{"created default/loom-typed-example", `updated greeting to "hello, loom"`, "listed 1 configmap(s)", "watch: ADDED loom-typed-example", "watch: MODIFIED", "watch: DELETED"}},
		{"dynamic", []string{"installed CRD gadgets.examples.loom.dev", "gdg is examples.loom.dev/v1, Resource=gadgets (namespaced: true)", "patched sprocket: 16 teeth", "listed 1 gadget(s)", "deleted sprocket"}},
		{"discovery", []string{"server version: " + testenv.PinnedVersions().Kube, "aggregated discovery: true", "deploy ", "deployments.apps v1", "kind Deployment"}},
		{"scale", []string{"has 1 replica(s)", "scaled to 3 replicas", "spec.replicas is now 3"}},
		{"logs", []string{"following its log", "log: line 1", "log: line 2", "log: line 3"}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			exe := filepath.Join(bin, tt.name)
			if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "./"+tt.name).CombinedOutput(); err != nil {
				t.Fatalf("build: %v\n%s", err, out)
			}
			out, err := exec.CommandContext(t.Context(), exe, "--kubeconfig", env.KubeconfigPath).CombinedOutput()
			if err != nil {
				t.Fatalf("run: %v\n%s", err, out)
			}
			rest := string(out)
			for _, w := range tt.want {
				i := strings.Index(rest, w)
				if i < 0 {
					t.Fatalf("output lacks %q (in order):\n%s", w, out)
				}
				rest = rest[i+len(w):]
			}
		})
	}
}

// TestExampleWithoutKubeconfig runs an example where no kubeconfig exists:
// it starts its own local control plane, as `loom dev up` would.
func TestExampleWithoutKubeconfig(t *testing.T) {
	exe := filepath.Join(t.TempDir(), "typed")
	if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", exe, "./typed").CombinedOutput(); err != nil {
		t.Fatalf("build: %v\n%s", err, out)
	}
	cmd := exec.CommandContext(t.Context(), exe)
	cmd.Env = append(os.Environ(), "HOME="+t.TempDir(), "KUBECONFIG=", "LOOM_ASSETS="+testenv.AssetsDir())
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("run: %v\n%s", err, out)
	}
	for _, w := range []string{"starting a local control plane", "created default/loom-typed-example", "watch: DELETED"} {
		if !strings.Contains(string(out), w) {
			t.Fatalf("output lacks %q:\n%s", w, out)
		}
	}
}
