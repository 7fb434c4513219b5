package main

import (
	"bytes"
	"errors"
	"runtime/debug"
	"strings"
	"testing"
)

func TestVersionLine(t *testing.T) {
	for _, tc := range []struct {
		info debug.BuildInfo
		want string
	}{
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "v0.1.0"}}, "loom v0.1.0 go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8", Main: debug.Module{Version: "(devel)"}, Settings: []debug.BuildSetting{
			{Key: "vcs.revision", Value: "0123456789abcdef0123"}, {Key: "vcs.modified", Value: "true"},
		}}, "loom (devel) 0123456789ab (modified) go1.26.8"},
		{debug.BuildInfo{GoVersion: "go1.26.8"}, "loom (devel) go1.26.8"},
	} {
		if got := versionLine(&tc.info); got != tc.want {
			t.Errorf("versionLine = %q, want %q", got, tc.want)
		}
	}
}

// TestVersionCommand: the test binary has build information, so loom
// version prints a line; arguments are a usage error.
func TestVersionCommand(t *testing.T) {
	var out bytes.Buffer
	if err := run(t.Context(), []string{"version"}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if !strings.HasPrefix(out.String(), "loom ") || !strings.Contains(out.String(), " go1.") {
		t.Fatalf("loom version printed %q", out.String())
	}
	if err := run(t.Context(), []string{"version", "x"}, &out, &out); !errors.Is(err, errUsage) {
		t.Fatalf("loom version x: %v, want a usage error", err)
	}
}
