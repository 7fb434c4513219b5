package testenv

import (
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"testing"
	"time"
)

// TestAcrossPackages runs the tests of two packages (testdata/across/a
// and b) with one go test, two at a time and then one at a time: both
// use one control plane, which the first started in a process of its
// own; the second only attached to it. Once go test has exited, that
// process, its servers and its folder are gone.
func TestAcrossPackages(t *testing.T) {
	for _, p := range []string{"-p=2", "-p=1"} {
		t.Run(p, func(t *testing.T) { testAcrossPackages(t, p) })
	}
}

func testAcrossPackages(t *testing.T, parallel string) {
	if runtime.GOOS != "linux" {
		t.Skip("sharing across packages needs Linux")
	}
	if testing.Short() {
		t.Skip("builds and runs two test binaries")
	}
	if _, err := binary(AssetsDir(), "kube-apiserver"); err != nil {
		t.Skip(err)
	}
	report := filepath.Join(t.TempDir(), "report")
	cmd := exec.CommandContext(t.Context(), "go", "test", "-count=1", parallel, "./testdata/across/a", "./testdata/across/b")
	cmd.Env = append(os.Environ(), "LOOM_ACROSS_REPORT="+report)
	out, err := cmd.CombinedOutput()
	if err != nil {
		t.Fatalf("go test: %v\n%s", err, out)
	}
	b, err := os.ReadFile(report)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(strings.TrimSpace(string(b)), "\n")
	if len(lines) != 2 {
		t.Fatalf("report:\n%s", b)
	}
	var urls, pids []string
	for _, l := range lines {
		f := strings.Fields(l)
		t.Logf("package %s: process %s, %s, namespace %s, control plane in %ss", f[0], f[1], f[2], f[3], f[4])
		pids, urls = append(pids, f[1]), append(urls, f[2])
	}
	if pids[0] == pids[1] {
		t.Errorf("both packages ran in process %s", pids[0])
	}
	if urls[0] != urls[1] {
		t.Errorf("the packages used two control planes: %s and %s", urls[0], urls[1])
	}
	// The daemon notices the go command's exit within a quarter second,
	// then stops the servers: wait for that with a generous bound.
	deadline := time.Now().Add(time.Minute)
	for {
		left, _ := filepath.Glob(filepath.Join(os.TempDir(), sharedPrefix+"*"))
		daemons := processesWithEnv(sharedDirEnv)
		if len(left) == 0 && len(daemons) == 0 {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("a minute after go test: folders %v, processes %v", left, daemons)
		}
		time.Sleep(100 * time.Millisecond)
	}
}

// processesWithEnv returns the PIDs of the processes whose environment
// has the variable name set.
func processesWithEnv(name string) []string {
	entries, _ := os.ReadDir("/proc")
	var pids []string
	for _, e := range entries {
		if pid, err := strconv.Atoi(e.Name()); err == nil {
			if _, ok := environValue(pid, name); ok {
				pids = append(pids, e.Name())
			}
		}
	}
	return pids
}
