package main

import (
	"bytes"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

// TestAssetsFindsComplete: with every binary in LOOM_ASSETS, loom assets
// builds nothing and prints the folder.
func TestAssetsFindsComplete(t *testing.T) {
	dir := t.TempDir()
	for _, name := range assetNames() {
		if err := os.WriteFile(filepath.Join(dir, name), []byte("#!/bin/sh\n"), 0o755); err != nil {
			t.Fatal(err)
		}
	}
	t.Setenv("LOOM_ASSETS", dir)
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"assets"}, &out, &errOut); err != nil {
		t.Fatalf("loom assets: %v\n%s", err, errOut.String())
	}
	if got := strings.TrimSpace(out.String()); got != dir {
		t.Errorf("printed %q, want %q", got, dir)
	}
	if strings.Contains(errOut.String(), "building") {
		t.Errorf("built with every binary present:\n%s", errOut.String())
	}
}

// TestAssetsDevelopmentBuildOutsideCheckout: a loom built from a checkout
// (as this test binary is) names no release; outside a checkout it says
// what to do instead of building something else.
func TestAssetsDevelopmentBuildOutsideCheckout(t *testing.T) {
	t.Setenv("LOOM_ASSETS", t.TempDir()) // empty: something to build
	t.Chdir(t.TempDir())
	var out, errOut bytes.Buffer
	err := run(t.Context(), []string{"assets"}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "development build") || !strings.Contains(err.Error(), "go install github.com/loom-k8s/loom/cmd/loom@") {
		t.Fatalf("got %v, want the development-build error naming go install", err)
	}
	err = run(t.Context(), []string{"assets", "--from", t.TempDir()}, &out, &errOut)
	if err == nil || !strings.Contains(err.Error(), "not the root of a Loom checkout") {
		t.Fatalf("--from a folder that is no checkout: got %v", err)
	}
}

func TestAssetsKubeVersion(t *testing.T) {
	if err := checkKubeVersion("v1.36.3", "v1.36.1"); err != nil {
		t.Errorf("a patch release of the pinned minor: %v", err)
	}
	for _, bad := range []string{"v1.35.2", "1.36.1", "v1.36", "v2.36.1", "latest"} {
		if err := checkKubeVersion("v1.36.3", bad); err == nil {
			t.Errorf("%q accepted", bad)
		}
	}
	var out, errOut bytes.Buffer
	if err := run(t.Context(), []string{"assets", "--kube-version", "v1.30.0"}, &out, &errOut); err == nil || !strings.Contains(err.Error(), "v1.36.x") {
		t.Errorf("loom assets --kube-version v1.30.0: %v", err)
	}

	env, err := kubeVersionEnv([]byte("# pins\nKUBE_VERSION=v1.36.3\nETCD_VERSION=v3.6.8\n"), "v1.36.1")
	if err != nil || string(env) != "# pins\nKUBE_VERSION=v1.36.1\nETCD_VERSION=v3.6.8\n" {
		t.Errorf("versions.env rewritten to %q, %v", env, err)
	}
	if _, err := kubeVersionEnv([]byte("ETCD_VERSION=v3.6.8\n"), "v1.36.1"); err == nil {
		t.Error("a versions.env without KUBE_VERSION accepted")
	}

	edits := kubeVersionEdits([][2]string{
		{"k8s.io/api", "v0.36.3"},
		{"k8s.io/kubelet", "v0.36.3"},
		{"k8s.io/utils", "v0.0.0-20260210185600-b8788abfbbc2"}, // not a staging module
		{"github.com/x/y", "v0.36.3"},
	}, "v1.36.3", "v1.36.1")
	want := []string{"-require=k8s.io/kubernetes@v1.36.1", "-replace=k8s.io/api=k8s.io/api@v0.36.1", "-replace=k8s.io/kubelet=k8s.io/kubelet@v0.36.1"}
	if !slices.Equal(edits, want) {
		t.Errorf("edits %q, want %q", edits, want)
	}
}

// TestAssetsRecipeFromCheckout lays out the recipe as a checkout has it.
func TestAssetsRecipeFromCheckout(t *testing.T) {
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	if got := findCheckout(filepath.Join(root, "cmd", "loom")); got != root {
		t.Fatalf("findCheckout from cmd/loom: %q, want %q", got, root)
	}
	work := t.TempDir()
	var errOut bytes.Buffer
	if err := recipe(t.Context(), work, root, &errOut); err != nil {
		t.Fatal(err)
	}
	for _, f := range []string{"tools/build.sh", "tools/go.mod", "tools/go.sum", "tools/etcd/main.go", "tools/codegen/go.mod", "testenv/versions.env"} {
		if _, err := os.Stat(filepath.Join(work, f)); err != nil {
			t.Errorf("recipe lacks %s: %v", f, err)
		}
	}
}
