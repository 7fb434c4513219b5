//go:build unix

package rest

import (
	"context"
	"errors"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/internal/termtest"
)

// blockingPlugin writes an exec plugin that, while dir/block exists,
// writes its PID to the FIFO dir/started and then waits to read a line
// from the FIFO dir/release before printing a credential for token "tok".
func blockingPlugin(t *testing.T) (dir, script string) {
	t.Helper()
	dir = t.TempDir()
	for _, f := range []string{"started", "release"} {
		if err := syscall.Mkfifo(filepath.Join(dir, f), 0o600); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(dir, "block"), nil, 0o600); err != nil {
		t.Fatal(err)
	}
	script = filepath.Join(dir, "plugin.sh")
	body := `#!/bin/sh
echo x >> "` + dir + `/count"
if [ -e "` + dir + `/block" ]; then
  echo $$ > "` + dir + `/started"
  read line < "` + dir + `/release"
fi
echo '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"tok"}}'
`
	if err := os.WriteFile(script, []byte(body), 0o755); err != nil {
		t.Fatal(err)
	}
	return dir, script
}

// waitStarted blocks until the plugin has started (it opens the FIFO for
// writing) and returns its PID.
func waitStarted(t *testing.T, dir string) int {
	t.Helper()
	b, err := os.ReadFile(filepath.Join(dir, "started"))
	if err != nil {
		t.Fatal(err)
	}
	pid, err := strconv.Atoi(strings.TrimSpace(string(b)))
	if err != nil {
		t.Fatalf("plugin PID %q: %v", b, err)
	}
	return pid
}

// release lets a blocked plugin print its credential.
func release(t *testing.T, dir string) {
	t.Helper()
	os.Remove(filepath.Join(dir, "block"))
	if err := os.WriteFile(filepath.Join(dir, "release"), []byte("go\n"), 0o600); err != nil {
		t.Fatal(err)
	}
}

// TestExecWaitRespectsContext starts a request that runs a plugin that
// does not finish, then sends a second request whose context ends: the
// second returns at once with its context's error, while the plugin keeps
// running for the first, which succeeds once the plugin prints its
// credential. (A plugin run under a plain mutex would keep the second
// request waiting for as long as the plugin runs.)
func TestExecWaitRespectsContext(t *testing.T) {
	dir, script := blockingPlugin(t)
	var want atomic.Value
	want.Store("tok")
	c, _ := newTestClient(t, echoAuth(&want), Options{}, func(cfg *config.Config) {
		cfg.Auth.Exec = &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1"}
		cfg.Auth.User, cfg.Auth.Origin = "alice", "/kc"
	})
	first := make(chan error, 1)
	go func() { first <- c.Get().AbsPath("first").Do(t.Context(), nil) }()
	waitStarted(t, dir)

	ctx, cancel := context.WithTimeout(t.Context(), 100*time.Millisecond)
	defer cancel()
	second := make(chan error, 1)
	go func() { second <- c.Get().AbsPath("second").Do(ctx, nil) }()
	select {
	case err := <-second:
		if !errors.Is(err, context.DeadlineExceeded) {
			t.Errorf("second request: %v, want its context's deadline", err)
		}
	case <-time.After(30 * time.Second):
		t.Error("a request whose context ended stayed blocked behind the running plugin")
	}
	select {
	case err := <-first:
		t.Fatalf("the first request ended before the plugin did: %v", err)
	default:
	}
	release(t, dir)
	if err := <-first; err != nil {
		t.Fatalf("first request: %v", err)
	}
	if n := runs(dir); n != 1 {
		t.Errorf("the plugin ran %d times, want 1", n)
	}
}

// TestExecLastWaiterStopsPlugin checks that a plugin nobody waits for any
// more is stopped, and that the next request runs it again.
func TestExecLastWaiterStopsPlugin(t *testing.T) {
	dir, script := blockingPlugin(t)
	var want atomic.Value
	want.Store("tok")
	c, _ := newTestClient(t, echoAuth(&want), Options{}, func(cfg *config.Config) {
		cfg.Auth.Exec = &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1"}
	})
	ctx, cancel := context.WithCancel(t.Context())
	done := make(chan error, 1)
	go func() { done <- c.Get().AbsPath("x").Do(ctx, nil) }()
	pid := waitStarted(t, dir)
	cancel()
	if err := <-done; !errors.Is(err, context.Canceled) {
		t.Fatalf("cancelled request: %v", err)
	}
	deadline := time.Now().Add(30 * time.Second)
	for syscall.Kill(pid, 0) == nil {
		if time.Now().After(deadline) {
			t.Fatalf("plugin %d still runs with nobody waiting for it", pid)
		}
		time.Sleep(10 * time.Millisecond) // polls the process table
	}
	os.Remove(filepath.Join(dir, "block"))
	if err := c.Get().AbsPath("x").Do(t.Context(), nil); err != nil {
		t.Fatal(err)
	}
	if n := runs(dir); n != 2 {
		t.Errorf("the plugin ran %d times, want 2", n)
	}
}

// TestExecInteractive runs a plugin with each interactiveMode, with a
// pseudo-terminal, a pipe or nothing as ExecOptions.Stdin. The plugin
// reports whether its standard input is a terminal and what
// spec.interactive said; with a terminal it prompts on standard error and
// reads its token from the terminal, where the test types it.
func TestExecInteractive(t *testing.T) {
	const typed, plain = "typed-token", "plain-token"
	tests := []struct {
		name, mode string
		stdin      string // "tty", "pipe" or ""
		wantReport string
		wantErr    error
	}{
		{name: "Never with a terminal", mode: "Never", stdin: "tty", wantReport: "interactive=false tty=false"},
		{name: "IfAvailable with a terminal", mode: "IfAvailable", stdin: "tty", wantReport: "interactive=true tty=true"},
		{name: "IfAvailable without stdin", mode: "IfAvailable", wantReport: "interactive=false tty=false"},
		{name: "IfAvailable with a pipe", mode: "IfAvailable", stdin: "pipe", wantReport: "interactive=false tty=false"},
		{name: "Always with a terminal", mode: "Always", stdin: "tty", wantReport: "interactive=true tty=true"},
		{name: "Always without stdin", mode: "Always", wantErr: ErrExecNeedsTerminal},
		{name: "Always with a pipe", mode: "Always", stdin: "pipe", wantErr: ErrExecNeedsTerminal},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			dir := t.TempDir()
			script := filepath.Join(dir, "plugin.sh")
			os.WriteFile(script, []byte(`#!/bin/sh
case "$KUBERNETES_EXEC_INFO" in *'"interactive":true'*) i=true;; *) i=false;; esac
if [ -t 0 ]; then tty=true; else tty=false; fi
echo "interactive=$i tty=$tty" > "`+dir+`/report"
tok=`+plain+`
if [ $tty = true ]; then
  printf 'token: ' >&2
  read tok
fi
printf '{"apiVersion":"client.authentication.k8s.io/v1","kind":"ExecCredential","status":{"token":"%s"}}' "$tok"
`), 0o755)

			var opts ExecOptions
			wantToken := plain
			switch tt.stdin {
			case "tty":
				term := termtest.Open(t, "token: ", typed+"\n")
				opts = ExecOptions{Stdin: term.TTY, Stderr: term.TTY}
				if strings.HasSuffix(tt.wantReport, "tty=true") {
					wantToken = typed
				}
			case "pipe":
				r, w, err := os.Pipe()
				if err != nil {
					t.Fatal(err)
				}
				t.Cleanup(func() { r.Close(); w.Close() })
				opts = ExecOptions{Stdin: r}
			}
			var want atomic.Value
			want.Store(wantToken)
			c, _ := newTestClient(t, echoAuth(&want), Options{Exec: opts}, func(cfg *config.Config) {
				cfg.Auth.Exec = &config.ExecConfig{Command: script, APIVersion: "client.authentication.k8s.io/v1", InteractiveMode: tt.mode}
				cfg.Auth.User, cfg.Auth.Origin = "alice", "/kc"
			})
			err := c.Get().AbsPath("x").Do(t.Context(), nil)
			if tt.wantErr != nil {
				var ce *config.Error
				if !errors.Is(err, tt.wantErr) || !errors.As(err, &ce) || ce.Field != `users["alice"].exec.interactiveMode` || ce.File != "/kc" {
					t.Fatalf("err = %v, want %v as a config.Error on the interactiveMode", err, tt.wantErr)
				}
				if _, err := os.Stat(filepath.Join(dir, "report")); err == nil {
					t.Error("the plugin ran although it cannot get a terminal")
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			report, _ := os.ReadFile(filepath.Join(dir, "report"))
			if got := strings.TrimSpace(string(report)); got != tt.wantReport {
				t.Errorf("plugin saw %q, want %q", got, tt.wantReport)
			}
		})
	}
}
