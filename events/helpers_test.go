package events_test

import (
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/testenv"
)

func execKubectl(t *testing.T, args ...string) (string, error) {
	out, err := exec.CommandContext(t.Context(), filepath.Join(testenv.AssetsDir(), "kubectl"), append([]string{"--kubeconfig", shared.Env(t).KubeconfigPath}, args...)...).CombinedOutput()
	return string(out), err
}

func contains(s, sub string) bool { return strings.Contains(s, sub) }
