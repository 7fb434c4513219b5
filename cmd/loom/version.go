package main

import (
	"context"
	"fmt"
	"io"
	"runtime/debug"
)

func init() {
	commands["version"] = command{"print the version of loom, from its build information", runVersion}
}

// runVersion prints the module version loom was built at: a release tag
// for `go install github.com/loom-k8s/loom/cmd/loom@vX.Y.Z`, or "(devel)"
// for a build in a checkout, then the VCS revision and whether the tree
// was modified when the build recorded them, and the Go version.
func runVersion(_ context.Context, args []string, out, _ io.Writer) error {
	if len(args) > 0 {
		return fmt.Errorf("%w: loom version takes no arguments", errUsage)
	}
	info, ok := debug.ReadBuildInfo()
	if !ok {
		return fmt.Errorf("loom version: the binary carries no build information")
	}
	fmt.Fprintln(out, versionLine(info))
	return nil
}

// versionLine sums up info: "loom v0.1.0 go1.26.8", or "loom (devel)
// 1a2b3c4d5e6f (modified) go1.26.8".
func versionLine(info *debug.BuildInfo) string {
	v := info.Main.Version
	if v == "" {
		v = "(devel)"
	}
	line := "loom " + v
	var rev, modified string
	for _, s := range info.Settings {
		switch s.Key {
		case "vcs.revision":
			rev = s.Value
		case "vcs.modified":
			modified = s.Value
		}
	}
	if rev != "" {
		if len(rev) > 12 {
			rev = rev[:12]
		}
		line += " " + rev
		if modified == "true" {
			line += " (modified)"
		}
	}
	return line + " " + info.GoVersion
}
