package main

import (
	"bytes"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// TestDemoScript runs demo.sh, which `make demo` runs, with freshly built
// binaries, and checks its whole story: the At reaches DONE, `loom get`
// shows the v1beta1 columns (which the API server can only produce by
// calling the operator's conversion webhook, so the operator must still be
// serving then), the operator stops cleanly, and the cluster is stopped.
func TestDemoScript(t *testing.T) {
	bin := t.TempDir()
	for _, b := range []struct{ name, pkg string }{{"loom", "../../cmd/loom"}, {"at-example", "."}} {
		if out, err := exec.CommandContext(t.Context(), "go", "build", "-o", filepath.Join(bin, b.name), b.pkg).CombinedOutput(); err != nil {
			t.Fatalf("go build %s: %v\n%s", b.pkg, err, out)
		}
	}
	var out bytes.Buffer
	cmd := exec.Command("bash", "demo.sh", bin)
	cmd.Stdout, cmd.Stderr = &out, &out
	// Its own process group, so that a test that fails or times out can
	// still stop whatever the script started: SIGTERM lets its trap stop
	// the cluster; SIGKILL to the group is the last resort.
	cmd.SysProcAttr = &syscall.SysProcAttr{Setpgid: true}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	var err error
	select {
	case err = <-done:
	case <-time.After(5 * time.Minute):
		_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGTERM)
		select {
		case <-done:
		case <-time.After(30 * time.Second):
			_ = syscall.Kill(-cmd.Process.Pid, syscall.SIGKILL)
			<-done
		}
		t.Fatalf("demo.sh did not finish in 5 minutes:\n%s", out.String())
	}
	if err != nil {
		t.Fatalf("demo.sh: %v\n%s", err, out.String())
	}
	s := out.String()
	for _, want := range []*regexp.Regexp{
		regexp.MustCompile(`At hello is DONE \(Succeeded=True`),
		// The v1beta1 printer columns: DATE and TIME, converted by the
		// operator's webhook.
		regexp.MustCompile(`(?m)^NAME +DATE +TIME +PHASE +AGE\nhello +\d{4}-\d\d-\d\d +\d\d:\d\d:\d\d +DONE `),
		regexp.MustCompile(`Stopped the dev cluster in `),
	} {
		if !want.MatchString(s) {
			t.Errorf("demo.sh output does not match %s:\n%s", want, s)
		}
	}
	if strings.Contains(s, "the operator's last log lines") {
		t.Errorf("demo.sh reported an operator failure:\n%s", s)
	}
}
