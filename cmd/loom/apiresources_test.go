package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"testing"

	"github.com/loom-k8s/loom/testenv"
)

// TestAPIResourcesMatchKubectl runs `loom api-resources` and `loom
// api-versions` and kubectl's against the same server, with the same flags,
// and wants the same bytes.
func TestAPIResourcesMatchKubectl(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	kubectl := filepath.Join(testenv.AssetsDir(), "kubectl")
	tests := [][]string{
		{"api-resources"},
		{"api-resources", "-o", "wide"},
		{"api-resources", "-o", "name"},
		{"api-resources", "--sort-by=kind"},
		{"api-resources", "--sort-by=name", "--no-headers"},
		{"api-resources", "--namespaced=false"},
		{"api-resources", "--api-group=apps"},
		{"api-resources", "--api-group="},
		{"api-resources", "--verbs=list,watch", "--categories=all"},
		{"api-versions"},
	}
	for _, args := range tests {
		t.Run(fmtArgs(args), func(t *testing.T) {
			want, err := exec.CommandContext(t.Context(), kubectl, append([]string{"--kubeconfig", env.KubeconfigPath}, args...)...).Output()
			if err != nil {
				t.Fatalf("kubectl: %v", err)
			}
			var got bytes.Buffer
			if err := run(t.Context(), append(args, "--kubeconfig", env.KubeconfigPath), &got, &got); err != nil {
				t.Fatalf("loom: %v", err)
			}
			if got.String() != string(want) {
				t.Fatalf("loom printed:\n%s\nkubectl printed:\n%s", got.String(), want)
			}
			if bytes.Count(want, []byte("\n")) < 2 {
				t.Fatalf("suspiciously short output:\n%s", want)
			}
		})
	}
}

func fmtArgs(args []string) string {
	var b bytes.Buffer
	for i, a := range args {
		if i > 0 {
			b.WriteByte(' ')
		}
		b.WriteString(a)
	}
	return b.String()
}
