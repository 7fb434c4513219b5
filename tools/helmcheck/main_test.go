package main

import (
	"os"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/testenv"
)

// The chart sees the Kubernetes version Loom pins, not a copy of it.
func TestRenderChartKubeVersion(t *testing.T) {
	dir := t.TempDir()
	files := map[string]string{
		"Chart.yaml": "apiVersion: v2\nname: c\nversion: 0.1.0\n",
		"templates/cm.yaml": "apiVersion: v1\nkind: ConfigMap\nmetadata:\n  name: c\n" +
			"data:\n  kube: {{ .Capabilities.KubeVersion.Version | quote }}\n",
	}
	for name, body := range files {
		path := filepath.Join(dir, filepath.FromSlash(name))
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	out, err := renderChart(dir, "r", "ns", nil)
	if err != nil {
		t.Fatal(err)
	}
	if want := `kube: "` + testenv.PinnedVersions().Kube + `"`; !strings.Contains(out, want) {
		t.Errorf("rendered chart has no %s:\n%s", want, out)
	}
}
