//go:build linux

package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/loom-k8s/loom/testenv"
)

// helloServer is the program of the test image (../../testenv/testdata/hello/main.go): an HTTP
// server on :8080 that logs a line at start and one per request.
func helloServer(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile("../../testenv/testdata/hello/main.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

const helloPod = `apiVersion: v1
kind: Pod
metadata:
  name: hello
spec:
  nodeName: real-node-0
  containers:
  - name: hello
    image: loom.local/hello:test
    imagePullPolicy: Never
`

// TestDevRealNodeLogs is the real-node path as a user takes it: loom dev up
// --real-nodes 1, an image made by loom build image --tarball and loaded by
// loom dev import, a Pod that runs it and answers HTTP at its Pod IP, and
// loom logs printing what kubectl logs prints. After loom dev down, no
// node process, bridge, mount or machine-wide record is left.
func TestDevRealNodeLogs(t *testing.T) {
	if runtime.GOOS != "linux" || os.Geteuid() != 0 {
		skipOrFailRealNodes(t, errors.New("real nodes need Linux and root"))
	}
	for _, p := range []string{"containerd", "containerd-shim-runc-v2", "ctr", "runc", "/usr/lib/cni/bridge", "/usr/lib/cni/host-local"} {
		if _, err := exec.LookPath(p); err != nil {
			skipOrFailRealNodes(t, fmt.Errorf("%s missing (bash tools/node-deps.sh installs it)", p))
		}
	}
	kubectl := filepath.Join(testenv.AssetsDir(), "kubectl")
	if _, err := os.Stat(filepath.Join(testenv.AssetsDir(), "kubelet")); err != nil {
		skipOrFailRealNodes(t, fmt.Errorf("no kubelet in %s (make assets builds it)", testenv.AssetsDir()))
	}
	// Real-node tests of every package take turns (see testenv's
	// lockRealNodeTests): each compares the machine before and after.
	lock, err := os.Open(filepath.Join(testenv.AssetsDir(), "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(lock.Fd()), syscall.LOCK_EX); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { lock.Close() })
	before := nodeFootprint(t)
	loom := buildLoom(t)
	dir := t.TempDir()

	t.Run("up", func(t *testing.T) {
		up := exec.Command(loom, "dev", "up", "--real-nodes", "1", "--registry=false", "--state-dir", dir)
		stdout, err := up.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		up.Stderr = os.Stderr
		start := time.Now()
		if err := up.Start(); err != nil {
			t.Fatal(err)
		}
		exited := make(chan error, 1)
		ready := make(chan struct{})
		go func() {
			sc := bufio.NewScanner(stdout)
			for sc.Scan() {
				if strings.HasPrefix(sc.Text(), "Press Ctrl-C") {
					close(ready)
				}
			}
			exited <- up.Wait()
		}()
		t.Cleanup(func() {
			_ = up.Process.Signal(os.Interrupt)
			select {
			case <-exited:
			case <-time.After(time.Minute):
				_ = up.Process.Kill()
			}
		})
		select {
		case <-ready:
			t.Logf("loom dev up --real-nodes 1 ready in %s", time.Since(start).Round(time.Millisecond))
		case err := <-exited:
			t.Fatalf("loom dev up exited: %v", err)
		case <-time.After(3 * time.Minute):
			t.Fatal("loom dev up not ready after 3 minutes")
		}
		ctx, cancel := context.WithTimeout(t.Context(), 3*time.Minute)
		defer cancel()
		kc := filepath.Join(dir, "kubeconfig")
		runOut := func(name string, stdin string, args ...string) string {
			t.Helper()
			cmd := exec.CommandContext(ctx, name, args...)
			cmd.Stdin = strings.NewReader(stdin)
			out, err := cmd.CombinedOutput()
			if err != nil {
				t.Fatalf("%s %s: %v\n%s", filepath.Base(name), strings.Join(args, " "), err, out)
			}
			return string(out)
		}

		src := t.TempDir()
		for name, body := range map[string]string{"go.mod": "module loom.local/hello\n\ngo 1.21\n", "main.go": helloServer(t)} {
			if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
				t.Fatal(err)
			}
		}
		tar := filepath.Join(t.TempDir(), "hello.tar")
		build := exec.CommandContext(ctx, loom, "build", "image", "--tag", "loom.local/hello:test", "--tarball", tar, ".")
		build.Dir = src
		if out, err := build.CombinedOutput(); err != nil {
			t.Fatalf("loom build image: %v\n%s", err, out)
		}
		t.Log(strings.TrimSpace(runOut(loom, "", "dev", "import", "--state-dir", dir, tar)))
		runOut(kubectl, helloPod, "--kubeconfig", kc, "apply", "-f", "-")

		var ip string
		for {
			out := runOut(kubectl, "", "--kubeconfig", kc, "get", "pod", "hello", "-o", "jsonpath={.status.phase} {.status.podIP}")
			if phase, podIP, _ := strings.Cut(out, " "); phase == "Running" && podIP != "" {
				ip = podIP
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("pod not running: %s\n%s", out, runOut(kubectl, "", "--kubeconfig", kc, "describe", "pod", "hello"))
			case <-time.After(200 * time.Millisecond):
			}
		}
		hc := &http.Client{Timeout: 5 * time.Second}
		for {
			resp, err := hc.Get("http://" + net.JoinHostPort(ip, "8080") + "/hi")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				if string(b) != "hello from hello\n" {
					t.Fatalf("the pod answered %q", b)
				}
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("GET the pod at %s: %v", ip, err)
			case <-time.After(200 * time.Millisecond):
			}
		}

		want := "hello: listening on :8080\nhello: served /hi\n"
		var got string
		for {
			var out bytes.Buffer
			err := run(ctx, []string{"logs", "hello", "--kubeconfig", kc}, &out, &out)
			got = out.String()
			if err == nil && got == want {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("loom logs: %v %q, want %q", err, got, want)
			case <-time.After(200 * time.Millisecond):
			}
		}
		if k := runOut(kubectl, "", "--kubeconfig", kc, "logs", "hello"); k != got {
			t.Fatalf("kubectl logs printed %q, loom logs %q", k, got)
		}
		var tail bytes.Buffer
		if err := run(ctx, []string{"logs", "hello", "--tail", "1", "--kubeconfig", kc}, &tail, &tail); err != nil || tail.String() != "hello: served /hi\n" {
			t.Fatalf("loom logs --tail 1: %v %q", err, tail.String())
		}
		out, err := exec.CommandContext(ctx, loom, "dev", "down", "--state-dir", dir).CombinedOutput()
		if err != nil {
			t.Fatalf("loom dev down: %v\n%s", err, out)
		}
	})
	if after := nodeFootprint(t); after != before {
		t.Fatalf("real nodes left something behind:\nbefore %s\nafter  %s", before, after)
	}
}

func skipOrFailRealNodes(t *testing.T, err error) {
	t.Helper()
	if os.Getenv("CI") == "true" {
		t.Fatalf("real nodes unavailable with CI=true: %v", err)
	}
	t.Skipf("real nodes unavailable here: %v", err)
}

// nodeFootprint summarizes what real nodes add to the machine while they
// run: their processes, the mount table, the network links, and the
// machine-wide record testenv keeps.
func nodeFootprint(t *testing.T) string {
	t.Helper()
	procs := map[string]int{}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		if _, err := strconv.Atoi(e.Name()); err != nil {
			continue
		}
		stat, err := os.ReadFile(filepath.Join("/proc", e.Name(), "stat"))
		if err != nil || bytes.Contains(stat, []byte(") Z ")) {
			continue
		}
		comm, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		switch c := strings.TrimSpace(string(comm)); c {
		case "containerd", "kubelet", "containerd-shim", "manager":
			procs[c]++
		}
	}
	mi, _ := os.ReadFile("/proc/self/mountinfo")
	links, _ := exec.Command("ip", "-o", "link").Output()
	_, recErr := os.Stat("/run/loom-testenv-nodes.json")
	return fmt.Sprintf("processes %v, %d mounts, %d links, record present %v",
		procs, bytes.Count(mi, []byte("\n")), bytes.Count(links, []byte("\n")), recErr == nil)
}
