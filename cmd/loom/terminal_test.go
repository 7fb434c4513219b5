//go:build unix

package main

import (
	"bytes"
	"encoding/base64"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/internal/termtest"
	"github.com/loom-k8s/loom/testenv"
)

// TestGetGivesTheTerminalToExecPlugins runs the loom binary with a
// kubeconfig whose exec plugin (interactiveMode Always) asks for the token
// on the terminal. With a pseudo-terminal as loom's standard input, the
// plugin gets it, the test types the token, and kube-apiserver accepts it.
// Without a terminal, loom says the plugin needs one.
func TestGetGivesTheTerminalToExecPlugins(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	loom := buildLoom(t)
	dir := t.TempDir()
	plugin := filepath.Join(dir, "plugin.sh")
	if err := os.WriteFile(plugin, []byte(`#!/bin/sh
[ -t 0 ] || { echo "standard input is not a terminal" >&2; exit 3; }
printf 'token: ' >&2
read tok
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$tok"
`), 0o755); err != nil {
		t.Fatal(err)
	}
	kubeconfig := filepath.Join(dir, "kubeconfig")
	if err := os.WriteFile(kubeconfig, []byte(fmt.Sprintf(`apiVersion: v1
kind: Config
current-context: x
clusters:
- name: c
  cluster: {server: %q, certificate-authority-data: %s}
users:
- name: prompted
  user:
    exec: {apiVersion: client.authentication.k8s.io/v1, command: %q, interactiveMode: Always}
contexts:
- name: x
  context: {cluster: c, user: prompted}
`, env.URL, base64.StdEncoding.EncodeToString(env.CAPEM), plugin)), 0o600); err != nil {
		t.Fatal(err)
	}
	args := []string{"get", "namespace", "default", "-o", "name", "--kubeconfig", kubeconfig}

	t.Run("with a terminal", func(t *testing.T) {
		term := termtest.Open(t, "token: ", env.AdminToken+"\n")
		cmd := exec.CommandContext(t.Context(), loom, args...)
		var out bytes.Buffer
		cmd.Stdin, cmd.Stdout, cmd.Stderr = term.TTY, &out, term.TTY
		if err := cmd.Run(); err != nil {
			t.Fatalf("loom get: %v", err)
		}
		if out.String() != "namespace/default\n" {
			t.Errorf("loom get printed %q", out.String())
		}
	})
	t.Run("without a terminal", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), loom, args...)
		var stderr bytes.Buffer
		cmd.Stderr = &stderr // standard input is /dev/null
		err := cmd.Run()
		var ee *exec.ExitError
		if !errors.As(err, &ee) || ee.ExitCode() != 1 || !strings.Contains(stderr.String(), `users["prompted"].exec.interactiveMode`) ||
			!strings.Contains(stderr.String(), "needs a terminal") {
			t.Fatalf("loom get without a terminal: %v\n%s", err, stderr.String())
		}
	})
}
