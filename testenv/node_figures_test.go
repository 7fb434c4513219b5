//go:build linux

package testenv

import (
	"bytes"
	"context"
	"fmt"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/internal/ociimage"
)

// TestNodeFigures measures a control plane with one real node against one
// with one fake (kwok) node: start until the node is Ready, the first Pod
// Running, and the node's memory and CPU at idle over 30 seconds. It runs
// only when LOOM_NODE_FIGURES names the file to append the figures to
// (make real-nodes sets it).
func TestNodeFigures(t *testing.T) {
	out := os.Getenv("LOOM_NODE_FIGURES")
	if out == "" {
		t.Skip("set LOOM_NODE_FIGURES=FILE to measure real and fake nodes")
	}
	requireRealNodes(t)
	idle := 30 * time.Second
	if s := os.Getenv("LOOM_NODE_FIGURES_IDLE"); s != "" {
		d, err := time.ParseDuration(s)
		if err != nil {
			t.Fatal(err)
		}
		idle = d
	}
	var report bytes.Buffer
	commit, _ := exec.Command("git", "rev-parse", "--short", "HEAD").Output()
	cpuModel := ""
	if b, err := os.ReadFile("/proc/cpuinfo"); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "model name"); ok {
				cpuModel = strings.TrimSpace(strings.TrimPrefix(strings.TrimSpace(v), ":"))
				break
			}
		}
	}
	var uts strings.Builder
	if b, err := os.ReadFile("/proc/sys/kernel/osrelease"); err == nil {
		uts.Write(bytes.TrimSpace(b))
	}
	fmt.Fprintf(&report, "# real nodes vs fake nodes, %s\n# commit %s (plus uncommitted changes), %s, Linux %s, %d CPUs (%s)\n",
		time.Now().UTC().Format(time.RFC3339), strings.TrimSpace(string(commit)), runtime.Version(), uts.String(), runtime.NumCPU(), cpuModel)
	loadavg := func() string {
		b, _ := os.ReadFile("/proc/loadavg")
		return strings.Join(strings.Fields(string(b))[:3], " ")
	}
	fmt.Fprintf(&report, "# load average at start %s (other work on the machine skews the CPU figures)\n", loadavg())
	defer func() { t.Logf("load average at end %s", loadavg()) }()
	fmt.Fprintf(&report, "# each: Start(Controllers, Scheduler, 1 node) until the node is Ready; then a Pod (scheduled, not bound by hand) until Running; then %s idle\n", idle)

	img := buildTestImage(t)
	for _, kind := range []string{"real", "fake"} {
		opts := Options{Controllers: true, Scheduler: true}
		nodeProcs := []string{"kwok"}
		if kind == "real" {
			opts.RealNodes = 1
			nodeProcs = []string{RealNodeName(0) + "-kubelet", RealNodeName(0) + "-containerd"}
		} else {
			opts.Nodes = 1
		}
		ctx, cancel := context.WithTimeout(t.Context(), 5*time.Minute)
		start := time.Now()
		env, err := Start(ctx, opts)
		if err != nil {
			cancel()
			t.Fatal(err)
		}
		startTook := time.Since(start)
		image := "loom.local/hello:test"
		if kind == "real" {
			if err := env.ImportImage(ctx, image, img); err != nil {
				t.Fatal(err)
			}
		}
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "first"},
			"spec": map[string]any{"containers": []any{map[string]any{"name": "c", "image": image, "imagePullPolicy": "Never"}}}}
		created := time.Now()
		if code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/pods", pod, nil); code != http.StatusCreated {
			t.Fatalf("create pod: %d", code)
		}
		var p corev1.Pod
		for p.Status.Phase != corev1.PodRunning {
			select {
			case <-ctx.Done():
				t.Fatalf("%s: pod not Running: %s\n%s", kind, p.Status.Phase, env.LogTails(20))
			case <-time.After(20 * time.Millisecond):
			}
			do(t, env, http.MethodGet, "/api/v1/namespaces/default/pods/first", nil, &p)
		}
		podTook := time.Since(created)
		time.Sleep(5 * time.Second) // let start-up work settle
		pids := env.Processes()
		var node []int
		for _, n := range nodeProcs {
			node = append(node, pids[n])
		}
		// Everything of the node: its processes, and for a real node the
		// shims and the Pod's processes (in the env's cgroup).
		extra := func() []int { return nil }
		if kind == "real" {
			extra = func() []int { return nodeChildren(t, env) }
		}
		cpu0 := cpuTicks(append(node, extra()...))
		time.Sleep(idle)
		all := append(node, extra()...)
		cpu1 := cpuTicks(all)
		ticks := float64(cpu1 - cpu0)
		cpuPct := ticks / 100 / idle.Seconds() * 100 // USER_HZ is 100
		fmt.Fprintf(&report, "%s node: start to node Ready %.2fs; first Pod Running %.2fs after create; idle %s: node processes %s RSS %.1f MiB (with shims and Pod processes %.1f MiB), CPU %.2f%% of one core\n",
			kind, startTook.Seconds(), podTook.Seconds(), idle, strings.Join(nodeProcs, "+"), float64(rssKiB(node))/1024, float64(rssKiB(all))/1024, cpuPct)
		for _, n := range nodeProcs {
			fmt.Fprintf(&report, "  %s: RSS %.1f MiB\n", n, float64(rssKiB([]int{pids[n]}))/1024)
		}
		var cp []int
		for _, n := range []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"} {
			cp = append(cp, pids[n])
		}
		fmt.Fprintf(&report, "  control plane (etcd, kube-apiserver, kube-controller-manager, kube-scheduler): RSS %.1f MiB\n", float64(rssKiB(cp))/1024)
		stopStart := time.Now()
		if err := env.Stop(); err != nil {
			t.Fatal(err)
		}
		fmt.Fprintf(&report, "  Stop took %.2fs; load average %s\n", time.Since(stopStart).Seconds(), loadavg())
		cancel()
	}
	t.Log("\n" + report.String())
	if err := os.MkdirAll(filepath.Dir(out), 0o755); err != nil {
		t.Fatal(err)
	}
	f, err := os.OpenFile(out, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.Write(append(report.Bytes(), '\n')); err != nil {
		t.Fatal(err)
	}
}

// buildTestImage builds the hello server's image.
func buildTestImage(t *testing.T) v1.Image {
	t.Helper()
	src := t.TempDir()
	if err := os.WriteFile(filepath.Join(src, "go.mod"), []byte("module loom.local/hello\n\ngo 1.21\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(src, "main.go"), []byte(helloServer(t)), 0o644); err != nil {
		t.Fatal(err)
	}
	img, err := ociimage.Build(t.Context(), ociimage.Options{Dir: src, Package: "."})
	if err != nil {
		t.Fatal(err)
	}
	return img
}

// nodeChildren lists the processes in the env's cgroups (Pods) and its
// containerd shims.
func nodeChildren(t *testing.T, env *Env) []int {
	env.mu.Lock()
	rec := env.nodeRec
	env.mu.Unlock()
	if rec == nil {
		return nil
	}
	seen := map[int]bool{}
	var pids []int
	for _, d := range cgroupDirs(rec.CgroupRoot) {
		if !strings.HasPrefix(d, "/sys/fs/cgroup/pids/") {
			continue
		}
		b, _ := os.ReadFile(filepath.Join(d, "cgroup.procs"))
		for _, f := range strings.Fields(string(b)) {
			if pid, err := strconv.Atoi(f); err == nil && !seen[pid] {
				seen[pid] = true
				pids = append(pids, pid)
			}
		}
	}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || seen[pid] {
			continue
		}
		b, _ := os.ReadFile(filepath.Join("/proc", e.Name(), "cmdline"))
		for _, s := range rec.Sockets {
			if bytes.Contains(b, []byte("containerd-shim")) && bytes.Contains(b, []byte(s)) {
				pids = append(pids, pid)
			}
		}
	}
	return pids
}

// cpuTicks sums user and system time of processes, in clock ticks.
func cpuTicks(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
		if err != nil {
			continue
		}
		i := bytes.LastIndexByte(b, ')')
		f := strings.Fields(string(b[i+1:]))
		// utime and stime are fields 14 and 15; fields here start at 3.
		u, _ := strconv.ParseInt(f[11], 10, 64)
		s, _ := strconv.ParseInt(f[12], 10, 64)
		sum += u + s
	}
	return sum
}

// rssKiB sums the resident memory of processes.
func rssKiB(pids []int) int64 {
	var sum int64
	for _, pid := range pids {
		b, err := os.ReadFile(fmt.Sprintf("/proc/%d/status", pid))
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			if v, ok := strings.CutPrefix(l, "VmRSS:"); ok {
				n, _ := strconv.ParseInt(strings.Fields(v)[0], 10, 64)
				sum += n
			}
		}
	}
	return sum
}
