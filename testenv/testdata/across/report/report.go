// Package report is what the packages a and b share: their Shared
// control plane, and a line each writes to the file LOOM_ACROSS_REPORT
// names.
package report

import (
	"errors"
	"fmt"
	"os"
	"testing"
	"time"

	"github.com/loom-k8s/loom/testenv"
)

// Shared is the control plane of both packages.
var Shared = testenv.Shared{AcrossPackages: true}

// Write starts or attaches to the control plane, makes a namespace in
// it, and appends "<pkg> <pid> <URL> <namespace> <start seconds>" to the
// report file.
func Write(t *testing.T, pkg string) {
	began := time.Now()
	env := Shared.Env(t)
	took := time.Since(began)
	ns := env.Namespace(t)
	f, err := os.OpenFile(os.Getenv("LOOM_ACROSS_REPORT"), os.O_CREATE|os.O_WRONLY|os.O_APPEND, 0o600)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := fmt.Fprintf(f, "%s %d %s %s %.3f\n", pkg, os.Getpid(), env.URL, ns, took.Seconds()); err != nil {
		t.Fatal(err)
	}
	if err := env.RestartAPIServer(t.Context()); !errors.Is(err, testenv.ErrShared) {
		t.Errorf("RestartAPIServer on a shared control plane: %v, want ErrShared", err)
	}
}
