package main

import (
	"bufio"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loom-k8s/loom/testenv"
)

// buildLoom builds this command into a temporary folder.
func buildLoom(t *testing.T) string {
	t.Helper()
	bin := filepath.Join(t.TempDir(), "loom")
	out, err := exec.CommandContext(t.Context(), "go", "build", "-o", bin, ".").CombinedOutput()
	if err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	return bin
}

// TestDevUpStatusDown runs the real binary as a user would: up in the
// background, status --wait, kubectl through the written kubeconfig, then
// stop it with `down` (SIGTERM) or with Ctrl-C (SIGINT), and checks that no
// server is left.
func TestDevUpStatusDown(t *testing.T) {
	kubectl := filepath.Join(testenv.AssetsDir(), "kubectl")
	for _, stop := range []string{"down", "interrupt"} {
		t.Run(stop, func(t *testing.T) {
			loom := buildLoom(t)
			dir := t.TempDir()
			up := exec.Command(loom, "dev", "up", "--with-controllers", "--nodes", "2", "--state-dir", dir)
			stdout, err := up.StdoutPipe()
			if err != nil {
				t.Fatal(err)
			}
			up.Stderr = os.Stderr
			if err := up.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			lines := make(chan string, 100)
			go func() {
				sc := bufio.NewScanner(stdout)
				for sc.Scan() {
					lines <- sc.Text()
				}
				close(lines)
				exited <- up.Wait()
			}()
			t.Cleanup(func() { _ = up.Process.Kill() })

			// Rebuilding loom while `dev up` runs must not confuse status
			// and down: run them from a copy, with up's binary deleted.
			ctl := filepath.Join(t.TempDir(), "loom-ctl")
			if b, err := os.ReadFile(loom); err != nil || os.WriteFile(ctl, b, 0o755) != nil {
				t.Fatal(err)
			}
			if stop == "down" {
				if err := os.Remove(loom); err != nil {
					t.Fatal(err)
				}
			}
			out, err := exec.CommandContext(t.Context(), ctl, "dev", "status", "--state-dir", dir, "--wait", "2m").CombinedOutput()
			if err != nil {
				t.Fatalf("status: %v\n%s", err, out)
			}
			if !strings.Contains(string(out), "(ready)") || !strings.Contains(string(out), "kwok") {
				t.Fatalf("status printed:\n%s", out)
			}
			st, err := readState(dir)
			if err != nil {
				t.Fatal(err)
			}
			if len(st.Processes) != 5 {
				t.Fatalf("want 5 servers, state has %v", st.Processes)
			}
			out, err = exec.CommandContext(t.Context(), kubectl, "--kubeconfig", filepath.Join(dir, "kubeconfig"), "get", "nodes", "--no-headers").CombinedOutput()
			if err != nil || strings.Count(string(out), " Ready ") != 2 {
				t.Fatalf("kubectl get nodes: %v\n%s", err, out)
			}

			if stop == "down" {
				out, err = exec.CommandContext(t.Context(), ctl, "dev", "down", "--state-dir", dir).CombinedOutput()
				if err != nil || !strings.Contains(string(out), "Stopped") {
					t.Fatalf("down: %v\n%s", err, out)
				}
			} else {
				if err := up.Process.Signal(syscall.SIGINT); err != nil {
					t.Fatal(err)
				}
			}
			var printed []string
			for l := range lines {
				printed = append(printed, l)
			}
			select {
			case err := <-exited:
				if err != nil {
					t.Fatalf("loom dev up exited with %v", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("loom dev up did not exit")
			}
			all := strings.Join(printed, "\n")
			if !strings.Contains(all, "export KUBECONFIG="+filepath.Join(dir, "kubeconfig")) || !strings.Contains(all, "Stopped.") {
				t.Fatalf("loom dev up printed:\n%s", all)
			}
			for name, pid := range st.Processes {
				if syscall.Kill(pid, 0) == nil {
					t.Errorf("%s (pid %d) still running", name, pid)
				}
			}
			if _, err := os.Stat(filepath.Join(dir, stateFile)); !os.IsNotExist(err) {
				t.Errorf("state file left behind: %v", err)
			}
		})
	}
}
