// Package b is the other of two packages whose tests share one control plane
// (testenv.Shared.AcrossPackages); TestAcrossPackages in testenv runs
// them with one go test.
package b

import (
	"testing"

	"github.com/loom-k8s/loom/testenv/testdata/across/report"
)

func TestMain(m *testing.M) { report.Shared.Main(m) }

func TestReport(t *testing.T) { report.Write(t, "b") }
