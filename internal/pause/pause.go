// Package pause builds the pause image of testenv's real nodes: the image
// every Pod sandbox runs, made here from a tiny Go program (prog/main.go)
// instead of being pulled, so real nodes need no registry.
package pause

import (
	"bytes"
	"context"
	_ "embed"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
)

// Image is the reference under which the pause image is imported into a
// node's containerd, and the sandbox image containerd is configured with.
const Image = "loom.local/pause:1"

//go:embed prog/main.go
var source []byte

// Build compiles the pause program into dir/pause, a static Linux binary
// for this machine's architecture, and returns its path. It needs only the
// Go toolchain and its standard library: the program is built as a module
// of its own in dir/pause-src, so it works from any working directory.
func Build(ctx context.Context, dir, goarch string) (string, error) {
	src := filepath.Join(dir, "pause-src")
	if err := os.MkdirAll(src, 0o755); err != nil {
		return "", fmt.Errorf("pause: %w", err)
	}
	files := map[string][]byte{
		"go.mod":  []byte("module loom.local/pause\n\ngo 1.21\n"),
		"main.go": source,
	}
	for name, b := range files {
		if err := os.WriteFile(filepath.Join(src, name), b, 0o644); err != nil {
			return "", fmt.Errorf("pause: %w", err)
		}
	}
	out := filepath.Join(dir, "pause")
	cmd := exec.CommandContext(ctx, "go", "build", "-trimpath", "-buildvcs=false", "-ldflags=-s -w", "-o", out, ".")
	cmd.Dir = src
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS=linux", "GOARCH="+goarch, "GOWORK=off", "GOFLAGS=-mod=mod", "GOTOOLCHAIN=local")
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("pause: go build (the Go toolchain is needed to make the pause image): %w: %s", err, strings.TrimSpace(output.String()))
	}
	return out, nil
}
