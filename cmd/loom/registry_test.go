package main

import (
	"bytes"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/v1/remote"

	"github.com/loom-k8s/loom/internal/ociimage"
)

// TestDevRegistry serves the registry of loom dev up, records it in a
// state folder as a running dev cluster would, and pushes to it with
// --dev-registry, then pulls the image back.
func TestDevRegistry(t *testing.T) {
	helloProject(t)
	state := t.TempDir()
	reg, err := startDevRegistry(state, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	closed := false
	t.Cleanup(func() {
		if !closed {
			reg.Close()
		}
	})
	if !strings.HasPrefix(reg.Addr, "127.0.0.1:") {
		t.Fatalf("registry at %s, want 127.0.0.1", reg.Addr)
	}
	if err := probeRegistry(t.Context(), reg.Addr); err != nil {
		t.Fatal(err)
	}

	// Without a running cluster, --dev-registry says so.
	if _, _, err := loomRun(t, "build", "image", "--dev-registry", "--state-dir", state, "--tag", "hello:dev"); err == nil || !strings.Contains(err.Error(), "no dev cluster") {
		t.Fatalf("--dev-registry with no cluster: %v", err)
	}
	exe, _ := os.Executable()
	st := devState{PID: os.Getpid(), Executable: exe, URL: "https://127.0.0.1:1", Registry: reg.Addr}
	if err := writeState(state, st); err != nil {
		t.Fatal(err)
	}
	digest := builtDigest(t, "--dev-registry", "--state-dir", state, "--tag", "example.com/hello:dev")

	ref, err := parseReference(reg.Addr + "/hello:dev")
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(ref, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := img.Digest(); got != digest {
		t.Errorf("pulled %s, pushed %s", got, digest)
	}
	checkRunsAsNonroot(t, img)
	layers, _ := img.Layers()
	ld, _ := layers[0].Digest()
	if _, err := os.Stat(filepath.Join(registryDir(state), "blobs", "sha256", ld.Hex)); err != nil {
		t.Errorf("the layer is not on disk: %v", err)
	}

	var out bytes.Buffer
	printRegistryStatus(&out, st)
	if want := "  registry    " + reg.Addr + " (serving;"; !strings.HasPrefix(out.String(), want) {
		t.Errorf("status line %q, want it to start with %q", out.String(), want)
	}

	closed = true
	if err := reg.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(registryDir(state)); !os.IsNotExist(err) {
		t.Errorf("blobs left after Close: %v", err)
	}
	out.Reset()
	printRegistryStatus(&out, st)
	if !strings.Contains(out.String(), "not answering") {
		t.Errorf("status of a stopped registry: %q", out.String())
	}
}

func TestDevRegistryPortInUse(t *testing.T) {
	state := t.TempDir()
	first, err := startDevRegistry(state, 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer first.Close()
	_, port, _ := strings.Cut(first.Addr, ":")
	n, err := strconv.Atoi(port)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := startDevRegistry(t.TempDir(), n, nil); err == nil || !strings.Contains(err.Error(), "--registry-port") {
		t.Errorf("second registry on port %d: %v", n, err)
	}
	if _, err := startDevRegistry(t.TempDir(), -1, nil); err == nil {
		t.Error("port -1 accepted")
	}
}

// The dev registry takes an image built by the library directly too.
func TestDevRegistryPushAssembled(t *testing.T) {
	reg, err := startDevRegistry(t.TempDir(), 0, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer reg.Close()
	img, err := ociimage.Assemble([]byte("binary"), []byte("ca"), ociimage.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ref, _ := parseReference(reg.Addr + "/x:y")
	if err := pushImage(t.Context(), ref, img); err != nil {
		t.Fatal(err)
	}
	want, _ := img.Digest()
	desc, err := remote.Head(ref, remote.WithContext(t.Context()))
	if err != nil || desc.Digest != want {
		t.Errorf("head: %v, %v; want %s", desc, err, want)
	}
}
