package testenv

import (
	"context"
	"encoding/json"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// helperEnv tells a re-executed test binary to act as a test that starts a
// control plane and then dies.
const helperEnv = "LOOM_TESTENV_HELPER"

// TestHelperDies is not a test on its own: run with LOOM_TESTENV_HELPER set,
// it starts a control plane, writes the server PIDs to the given file, then
// panics or waits to be killed.
func TestHelperDies(t *testing.T) {
	mode := os.Getenv(helperEnv)
	if mode == "" {
		t.Skip("helper for TestNoProcessOutlivesItsTest")
	}
	env := New(t, Options{})
	b, _ := json.Marshal(env.Processes())
	if err := os.WriteFile(os.Getenv(helperEnv+"_PIDS"), b, 0o600); err != nil {
		t.Fatal(err)
	}
	if mode == "panic" {
		panic("a test that panics")
	}
	select {} // wait for SIGKILL
}

// TestNoProcessOutlivesItsTest runs a test binary that starts servers and
// then panics, or is killed with SIGKILL, and checks that its servers die
// with it.
func TestNoProcessOutlivesItsTest(t *testing.T) {
	if os.Getenv(helperEnv) != "" {
		t.Skip("inside the helper")
	}
	for _, mode := range []string{"panic", "sigkill"} {
		t.Run(mode, func(t *testing.T) {
			pidFile := filepath.Join(t.TempDir(), "pids.json")
			cmd := exec.Command(os.Args[0], "-test.run=^TestHelperDies$", "-test.count=1")
			cmd.Env = append(os.Environ(), helperEnv+"="+mode, helperEnv+"_PIDS="+pidFile)
			if err := cmd.Start(); err != nil {
				t.Fatal(err)
			}
			exited := make(chan error, 1)
			go func() { exited <- cmd.Wait() }()
			t.Cleanup(func() { _ = cmd.Process.Kill() })

			var pids map[string]int
			ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
			defer cancel()
			for pids == nil {
				if b, err := os.ReadFile(pidFile); err == nil && json.Unmarshal(b, &pids) == nil {
					break
				}
				pids = nil
				select {
				case err := <-exited:
					t.Fatalf("helper exited before starting servers: %v", err)
				case <-ctx.Done():
					t.Fatal("helper did not start servers")
				case <-time.After(50 * time.Millisecond):
				}
			}
			if mode == "sigkill" {
				_ = cmd.Process.Signal(syscall.SIGKILL)
			}
			if err := <-exited; err == nil {
				t.Fatal("helper exited cleanly; want a panic or a kill")
			}
			for name, pid := range pids {
				for alive(pid) {
					select {
					case <-ctx.Done():
						t.Fatalf("%s (pid %d) outlived its test (%s)", name, pid, mode)
					case <-time.After(50 * time.Millisecond):
					}
				}
			}
		})
	}
}

func TestStopAndStartEtcd(t *testing.T) {
	if err := shared.StopEtcd(t.Context()); err != nil {
		t.Fatal(err)
	}
	hc, err := shared.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	// kube-apiserver notices that etcd is gone: /readyz fails.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		code, _, err := shared.get(ctx, hc, "/readyz")
		if err == nil && code != http.StatusOK {
			break
		}
		select {
		case <-ctx.Done():
			t.Fatalf("/readyz still answers 200 with etcd stopped")
		case <-time.After(100 * time.Millisecond):
		}
	}
	if err := shared.StartEtcd(t.Context()); err != nil {
		t.Fatal(err)
	}
	if err := shared.waitAPIServer(t.Context(), shared.apiserver); err != nil {
		t.Fatal(err)
	}
	if code := do(t, shared, http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap("after-etcd-restart", nil), nil); code != http.StatusCreated {
		t.Fatalf("create after etcd restart: status %d", code)
	}
}
