package ociimage

import (
	"archive/tar"
	"bytes"
	"debug/elf"
	"errors"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"testing"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

var (
	fakeBinary = []byte("\x7fELF not really a program")
	fakeCA     = []byte("-----BEGIN CERTIFICATE-----\nMIIB\n-----END CERTIFICATE-----\n")
)

func digest(t *testing.T, img v1.Image) v1.Hash {
	t.Helper()
	d, err := img.Digest()
	if err != nil {
		t.Fatal(err)
	}
	return d
}

// entry is what the tests check of a tar header.
type entry struct {
	Name     string
	Type     byte
	Mode     int64
	UID, GID int
}

func TestAssembleConfigAndLayer(t *testing.T) {
	img, err := Assemble(fakeBinary, fakeCA, Options{Labels: map[string]string{"org.opencontainers.image.source": "https://example.com/op"}})
	if err != nil {
		t.Fatal(err)
	}
	if mt, _ := img.MediaType(); mt != types.OCIManifestSchema1 {
		t.Errorf("manifest media type %s", mt)
	}
	m, err := img.Manifest()
	if err != nil {
		t.Fatal(err)
	}
	if m.Config.MediaType != types.OCIConfigJSON || len(m.Layers) != 1 || m.Layers[0].MediaType != types.OCILayer {
		t.Errorf("manifest %+v", m)
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		t.Fatal(err)
	}
	c := cfg.Config
	if c.User != "65532:65532" || !reflect.DeepEqual(c.Entrypoint, []string{"/manager"}) || c.WorkingDir != "/" || len(c.Cmd) != 0 {
		t.Errorf("config %+v", c)
	}
	if !reflect.DeepEqual(c.Env, []string{path, "SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt"}) {
		t.Errorf("env %q", c.Env)
	}
	if c.Labels["org.opencontainers.image.source"] != "https://example.com/op" {
		t.Errorf("labels %v", c.Labels)
	}
	if cfg.OS != "linux" || cfg.Architecture != runtime.GOARCH || !cfg.Created.Equal(time.Unix(0, 0)) {
		t.Errorf("os %s arch %s created %s", cfg.OS, cfg.Architecture, cfg.Created)
	}

	layers, err := img.Layers()
	if err != nil {
		t.Fatal(err)
	}
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	var got []entry
	contents := map[string]string{}
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err == io.EOF {
			break
		}
		if err != nil {
			t.Fatal(err)
		}
		if !h.ModTime.Equal(time.Unix(0, 0)) || len(h.PAXRecords) > 0 || h.Uname != "" {
			t.Errorf("%s: mtime %s, PAX %v, uname %q", h.Name, h.ModTime, h.PAXRecords, h.Uname)
		}
		got = append(got, entry{h.Name, h.Typeflag, h.Mode, h.Uid, h.Gid})
		b, _ := io.ReadAll(tr)
		contents[h.Name] = string(b)
	}
	want := []entry{
		{"etc/", tar.TypeDir, 0o755, 0, 0},
		{"etc/group", tar.TypeReg, 0o644, 0, 0},
		{"etc/passwd", tar.TypeReg, 0o644, 0, 0},
		{"etc/ssl/", tar.TypeDir, 0o755, 0, 0},
		{"etc/ssl/certs/", tar.TypeDir, 0o755, 0, 0},
		{"etc/ssl/certs/ca-certificates.crt", tar.TypeReg, 0o644, 0, 0},
		{"home/", tar.TypeDir, 0o755, 0, 0},
		{"home/nonroot/", tar.TypeDir, 0o700, 65532, 65532},
		{"manager", tar.TypeReg, 0o755, 0, 0},
		{"tmp/", tar.TypeDir, 0o1777, 0, 0},
	}
	if !reflect.DeepEqual(got, want) {
		t.Errorf("layer entries\n got %v\nwant %v", got, want)
	}
	if contents["manager"] != string(fakeBinary) || contents["etc/ssl/certs/ca-certificates.crt"] != string(fakeCA) {
		t.Error("the binary or the CA bundle differ from what was given")
	}
	if !strings.Contains(contents["etc/passwd"], "nonroot:x:65532:65532:nonroot:/home/nonroot:") ||
		!strings.HasPrefix(contents["etc/passwd"], "root:x:0:0:") ||
		!strings.Contains(contents["etc/group"], "nonroot:x:65532:") {
		t.Errorf("passwd:\n%s\ngroup:\n%s", contents["etc/passwd"], contents["etc/group"])
	}
}

func TestAssembleIsReproducible(t *testing.T) {
	build := func(bin []byte, opts Options) v1.Hash {
		t.Helper()
		img, err := Assemble(bin, fakeCA, opts)
		if err != nil {
			t.Fatal(err)
		}
		return digest(t, img)
	}
	base := build(fakeBinary, Options{})
	if again := build(fakeBinary, Options{}); again != base {
		t.Errorf("same inputs, digests %s and %s", base, again)
	}
	if epoch := build(fakeBinary, Options{Created: time.Unix(0, 0)}); epoch != base {
		t.Errorf("zero Created and Unix 0 differ: %s, %s", base, epoch)
	}
	// Sub-second parts are dropped: tar headers keep seconds only.
	if a, b := build(fakeBinary, Options{Created: time.Unix(1700000000, 0)}), build(fakeBinary, Options{Created: time.Unix(1700000000, 5e8)}); a != b {
		t.Errorf("Created's nanoseconds changed the digest")
	}
	differ := map[string]v1.Hash{
		"binary":   build(append([]byte{}, append(fakeBinary, '!')...), Options{}),
		"created":  build(fakeBinary, Options{Created: time.Unix(1700000000, 0)}),
		"label":    build(fakeBinary, Options{Labels: map[string]string{"a": "b"}}),
		"platform": build(fakeBinary, Options{Platform: v1.Platform{OS: "linux", Architecture: "s390x"}}),
	}
	for what, d := range differ {
		if d == base {
			t.Errorf("another %s gave the same digest", what)
		}
	}
}

func TestSourceDateEpoch(t *testing.T) {
	t.Setenv("SOURCE_DATE_EPOCH", "")
	if at, err := SourceDateEpoch(); err != nil || !at.IsZero() {
		t.Errorf("unset: %v, %v", at, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "1700000000")
	if at, err := SourceDateEpoch(); err != nil || !at.Equal(time.Unix(1700000000, 0)) {
		t.Errorf("1700000000: %v, %v", at, err)
	}
	t.Setenv("SOURCE_DATE_EPOCH", "yesterday")
	if _, err := SourceDateEpoch(); err == nil {
		t.Error("no error for a date that is no number")
	}
}

// helloModule writes a module with a main package that prints hello.
func helloModule(t *testing.T, greeting string) string {
	t.Helper()
	dir := t.TempDir()
	for name, text := range map[string]string{
		"go.mod":  "module example.com/hello\n\ngo 1.26\n",
		"main.go": "package main\n\nimport \"fmt\"\n\nfunc main() { fmt.Println(\"" + greeting + "\") }\n",
	} {
		if err := os.WriteFile(filepath.Join(dir, name), []byte(text), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	return dir
}

func caFile(t *testing.T) string {
	t.Helper()
	f := filepath.Join(t.TempDir(), "ca.crt")
	if err := os.WriteFile(f, fakeCA, 0o644); err != nil {
		t.Fatal(err)
	}
	return f
}

func TestBuildCompilesReproducibly(t *testing.T) {
	ca := caFile(t)
	build := func(dir string) v1.Image {
		t.Helper()
		img, err := Build(t.Context(), Options{Dir: dir, CACertsFile: ca, LDFlags: DefaultLDFlags})
		if err != nil {
			t.Fatal(err)
		}
		return img
	}
	// The same source in two folders: -trimpath keeps the path out.
	a, b := build(helloModule(t, "hello")), build(helloModule(t, "hello"))
	if digest(t, a) != digest(t, b) {
		t.Errorf("two builds of the same source: %s and %s", digest(t, a), digest(t, b))
	}
	if c := build(helloModule(t, "bonjour")); digest(t, c) == digest(t, a) {
		t.Error("another program gave the same digest")
	}

	// The binary in the layer is a static executable for this machine.
	layers, _ := a.Layers()
	rc, err := layers[0].Uncompressed()
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	tr := tar.NewReader(rc)
	for {
		h, err := tr.Next()
		if err != nil {
			t.Fatalf("no manager in the layer: %v", err)
		}
		if h.Name == "manager" {
			break
		}
	}
	exe, _ := io.ReadAll(tr)
	if err := checkBinary(exe, DefaultPlatform()); err != nil {
		t.Fatal(err)
	}
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		t.Fatal(err)
	}
	if f.Section(".debug_info") != nil || f.Section(".symtab") != nil {
		t.Error("the binary keeps DWARF or symbols despite -s -w")
	}
	if runtime.GOOS == "linux" {
		// Run it, as the container runtime would.
		bin := filepath.Join(t.TempDir(), "manager")
		if err := os.WriteFile(bin, exe, 0o755); err != nil {
			t.Fatal(err)
		}
		if out, err := exec.Command(bin).Output(); err != nil || string(out) != "hello\n" {
			t.Errorf("running the image's binary: %q, %v", out, err)
		}
	}
}

func TestBuildErrors(t *testing.T) {
	ca := caFile(t)
	notELF := filepath.Join(t.TempDir(), "script")
	if err := os.WriteFile(notELF, []byte("#!/bin/sh\necho hi\n"), 0o755); err != nil {
		t.Fatal(err)
	}
	broken := helloModule(t, "hello")
	if err := os.WriteFile(filepath.Join(broken, "main.go"), []byte("package main\n\nfunc main() { undefined() }\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name string
		opts Options
		want string
		is   error
	}{
		{"missing CA file", Options{CACertsFile: filepath.Join(t.TempDir(), "none.crt"), Binary: notELF}, "--ca-certs", fs.ErrNotExist},
		{"CA file without PEM", Options{CACertsFile: notELF, Binary: notELF}, "holds no PEM certificate", nil},
		{"not an executable", Options{CACertsFile: ca, Binary: notELF}, "not a Linux executable", nil},
		{"missing binary", Options{CACertsFile: ca, Binary: filepath.Join(t.TempDir(), "none")}, "read the binary", fs.ErrNotExist},
		{"not linux", Options{CACertsFile: ca, Binary: notELF, Platform: v1.Platform{OS: "windows", Architecture: "amd64"}}, "only linux", nil},
		{"compile error", Options{CACertsFile: ca, Dir: broken}, "undefined: undefined", nil},
	}
	for _, tt := range tests {
		_, err := Build(t.Context(), tt.opts)
		if err == nil || !strings.Contains(err.Error(), tt.want) || (tt.is != nil && !errors.Is(err, tt.is)) {
			t.Errorf("%s: got %v, want an error with %q", tt.name, err, tt.want)
		}
	}
}

func TestCheckBinaryWrongArchitecture(t *testing.T) {
	exe, err := os.ReadFile("/bin/sh")
	if err != nil || runtime.GOOS != "linux" {
		t.Skip("no /bin/sh to read")
	}
	other := "arm64"
	if runtime.GOARCH == "arm64" {
		other = "amd64"
	}
	if err := checkBinary(exe, v1.Platform{OS: "linux", Architecture: other}); err == nil || !strings.Contains(err.Error(), "built for") {
		t.Errorf("/bin/sh for %s: %v", other, err)
	}
}
