package main

import (
	"bytes"
	"errors"
	"flag"
	"io"
	"log"
	"net/http/httptest"
	"os"
	"path/filepath"
	"reflect"
	"strings"
	"testing"

	"github.com/google/go-containerregistry/pkg/name"
	"github.com/google/go-containerregistry/pkg/registry"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

// helloProject writes a module with a main package that prints hello,
// and makes it the current folder, as a project's Makefile would run
// loom build image in it. Tests that use it cannot be parallel.
func helloProject(t *testing.T) {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"hello\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	t.Chdir(dir)
	t.Setenv("SOURCE_DATE_EPOCH", "")
}

// loomRun runs loom with args and returns its stdout and stderr.
func loomRun(t *testing.T, args ...string) (string, string, error) {
	t.Helper()
	var out, errOut bytes.Buffer
	err := run(t.Context(), args, &out, &errOut)
	return out.String(), errOut.String(), err
}

// builtDigest runs loom build image with args and returns the digest it
// printed.
func builtDigest(t *testing.T, args ...string) v1.Hash {
	t.Helper()
	out, errOut, err := loomRun(t, append([]string{"build", "image"}, args...)...)
	if err != nil {
		t.Fatalf("loom build image %q: %v\n%s", args, err, errOut)
	}
	h, err := v1.NewHash(strings.TrimSpace(out))
	if err != nil {
		t.Fatalf("loom build image printed %q on stdout: %v", out, err)
	}
	if !strings.HasPrefix(errOut, "Built ") {
		t.Errorf("stderr: %q", errOut)
	}
	return h
}

func checkRunsAsNonroot(t *testing.T, img v1.Image) {
	t.Helper()
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	if cfg.Config.User != "65532:65532" || !reflect.DeepEqual(cfg.Config.Entrypoint, []string{"/manager"}) {
		t.Errorf("user %q entrypoint %q", cfg.Config.User, cfg.Config.Entrypoint)
	}
}

func TestBuildImageOCILayoutIsReproducible(t *testing.T) {
	helloProject(t)
	first := builtDigest(t, "--tag", "example.com/hello:v1", "--oci-layout", "bin/image")
	second := builtDigest(t, "--tag", "example.com/hello:v1", "--oci-layout", "bin/image2", ".")
	if first != second {
		t.Fatalf("two builds: %s and %s", first, second)
	}
	a, _ := os.ReadFile("bin/image/index.json")
	b, _ := os.ReadFile("bin/image2/index.json")
	if !bytes.Equal(a, b) {
		t.Errorf("index.json differs:\n%s\n%s", a, b)
	}

	p, err := layout.FromPath("bin/image")
	if err != nil {
		t.Fatal(err)
	}
	idx, err := p.ImageIndex()
	if err != nil {
		t.Fatal(err)
	}
	m, _ := idx.IndexManifest()
	if len(m.Manifests) != 1 || m.Manifests[0].Digest != first || m.Manifests[0].Annotations["org.opencontainers.image.ref.name"] != "example.com/hello:v1" {
		t.Fatalf("index.json: %+v", m.Manifests)
	}
	img, err := p.Image(first)
	if err != nil {
		t.Fatal(err)
	}
	checkRunsAsNonroot(t, img)

	// Rebuilt with a label into the same folder: one image, no stale blobs.
	third := builtDigest(t, "--tag", "example.com/hello:v1", "--oci-layout", "bin/image", "--label", "org.opencontainers.image.version=v1")
	if third == first {
		t.Error("a label did not change the digest")
	}
	blobs, _ := os.ReadDir("bin/image/blobs/sha256")
	if len(blobs) != 3 {
		t.Errorf("%d blobs after a rebuild, want 3 (manifest, config, layer)", len(blobs))
	}

	out, _, err := loomRun(t, "image", "inspect", "bin/image")
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{"digest      " + third.String(), "user        65532:65532", `entrypoint  ["/manager"]`,
		"label       org.opencontainers.image.version=v1", "created     1970-01-01T00:00:00Z"} {
		if !strings.Contains(out, want+"\n") {
			t.Errorf("loom image inspect printed no %q:\n%s", want, out)
		}
	}

	// A folder with other files is not overwritten.
	if err := os.WriteFile("bin/notes.txt", nil, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, _, err := loomRun(t, "build", "image", "--oci-layout", "bin"); err == nil || !strings.Contains(err.Error(), "no OCI layout") {
		t.Errorf("layout into a folder of other files: %v", err)
	}
}

func TestBuildImageTarball(t *testing.T) {
	helloProject(t)
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	digest := builtDigest(t, "-t", "hello:dev", "--tarball", "dist/hello.tar")
	tag, _ := name.NewTag("hello:dev")
	img, err := tarball.ImageFromPath("dist/hello.tar", &tag)
	if err != nil {
		t.Fatal(err)
	}
	checkRunsAsNonroot(t, img)
	cfg, _ := img.ConfigFile()
	if cfg.Created.Unix() != 1700000000 {
		t.Errorf("created %s, want SOURCE_DATE_EPOCH", cfg.Created)
	}
	// The tarball is as reproducible as the image.
	again := builtDigest(t, "-t", "hello:dev", "--tarball", "dist/again.tar")
	a, _ := os.ReadFile("dist/hello.tar")
	b, _ := os.ReadFile("dist/again.tar")
	if digest != again || !bytes.Equal(a, b) {
		t.Errorf("two tarballs differ (digests %s, %s)", digest, again)
	}
	out, _, err := loomRun(t, "image", "inspect", "dist/hello.tar")
	if err != nil || !strings.Contains(out, "name        hello:dev\n") || !strings.Contains(out, "user        65532:65532\n") {
		t.Errorf("inspect: %v\n%s", err, out)
	}
}

// testRegistry serves an in-memory registry on 127.0.0.1 and returns its
// host:port.
func testRegistry(t *testing.T) string {
	t.Helper()
	srv := httptest.NewServer(registry.New(registry.Logger(log.New(io.Discard, "", 0))))
	t.Cleanup(srv.Close)
	return strings.TrimPrefix(srv.URL, "http://")
}

func TestBuildImagePush(t *testing.T) {
	helloProject(t)
	reg := testRegistry(t)
	ref := reg + "/team/hello:v1"
	digest := builtDigest(t, "--tag", ref, "--push")

	r, err := name.ParseReference(ref, name.Insecure)
	if err != nil {
		t.Fatal(err)
	}
	img, err := remote.Image(r, remote.WithContext(t.Context()))
	if err != nil {
		t.Fatal(err)
	}
	if got, _ := img.Digest(); got != digest {
		t.Errorf("pulled %s, built %s", got, digest)
	}
	checkRunsAsNonroot(t, img)

	// The same through localhost, and the same digest as a local build.
	_, port, _ := strings.Cut(reg, ":")
	if again := builtDigest(t, "--tag", "localhost:"+port+"/hello:v2", "--push"); again != digest {
		t.Errorf("second push: %s, first %s", again, digest)
	}
	if local := builtDigest(t, "--oci-layout", "out"); local != digest {
		t.Errorf("pushed %s, layout has %s", digest, local)
	}
	out, _, err := loomRun(t, "image", "inspect", ref)
	if err != nil || !strings.Contains(out, "digest      "+digest.String()+"\n") {
		t.Errorf("inspect %s: %v\n%s", ref, err, out)
	}
}

func TestBuildImagePushUnreachable(t *testing.T) {
	helloProject(t)
	srv := httptest.NewServer(nil)
	addr := strings.TrimPrefix(srv.URL, "http://")
	srv.Close() // nothing listens there now
	_, _, err := loomRun(t, "build", "image", "--tag", addr+"/hello:v1", "--push")
	if err == nil || !strings.Contains(err.Error(), "push "+addr+"/hello:v1") || !strings.Contains(err.Error(), "refused") {
		t.Errorf("push to a closed port: %v", err)
	}
}

func TestBuildImageUsageErrors(t *testing.T) {
	for _, args := range [][]string{
		{"build"},
		{"build", "container"},
		{"build", "image"}, // no output
		{"build", "image", "--oci-layout", "x", "--tarball", "y"},                    // two outputs
		{"build", "image", "--tarball", "y"},                                         // no tag
		{"build", "image", "--push"},                                                 // no tag
		{"build", "image", "--push", "--tag", "UPPER/case:v1"},                       // bad reference
		{"build", "image", "--push", "--tag", "x@sha256:" + strings.Repeat("0", 64)}, // not a tag
		{"build", "image", "--oci-layout", "x", "--platform", "linux"},               // no architecture
		{"build", "image", "--oci-layout", "x", "--label", "nolabel"},                // no =
		{"build", "image", "--oci-layout", "x", "a", "b"},                            // two packages
		{"image"},
		{"image", "inspect"},
	} {
		if _, _, err := loomRun(t, args...); !errors.Is(err, errUsage) {
			t.Errorf("%q: got %v, want a usage error", args, err)
		}
	}
	out, _, err := loomRun(t, "build", "image", "-h")
	if !errors.Is(err, flag.ErrHelp) || !strings.Contains(out, "Usage: loom build image") || !strings.Contains(out, "-oci-layout") {
		t.Errorf("help: %v\n%s", err, out)
	}
}

func TestWithoutRegistry(t *testing.T) {
	for in, want := range map[string]string{
		"hello:v1":                     "hello:v1",
		"team/hello:v1":                "team/hello:v1",
		"example.com/team/hello:v1":    "team/hello:v1",
		"localhost/hello":              "hello",
		"127.0.0.1:5000/hello:dev":     "hello:dev",
		"registry:5000/hello@sha256:0": "hello@sha256:0",
	} {
		if got := withoutRegistry(in); got != want {
			t.Errorf("withoutRegistry(%q) = %q, want %q", in, got, want)
		}
	}
}
