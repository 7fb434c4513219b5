// Package ociimage makes a container image of an operator's Go binary with
// no Docker engine and no base image: one layer holding the binary, the CA
// certificates and the few files a program that runs as a non-root user
// expects, on an empty base, with OCI media types.
//
// The image is reproducible: every time, owner and mode in the layer is
// fixed, entries are sorted, the layer is compressed without a timestamp
// and the config's dates are one fixed instant (Unix 0, or
// SOURCE_DATE_EPOCH). With a reproducible Go build (-trimpath, no VCS
// stamp) the same source and toolchain give the same digest.
//
// `loom build image` is its user; writing the image out (an OCI layout, a
// tarball, a registry) is left to go-containerregistry's packages.
package ociimage

import (
	"archive/tar"
	"bytes"
	"compress/gzip"
	"context"
	"debug/elf"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strconv"
	"strings"
	"time"

	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
	"github.com/google/go-containerregistry/pkg/v1/types"
)

const (
	// Entrypoint is where the binary lies in the image, and the image's
	// entrypoint (the name the scaffold's Deployment and Dockerfile use).
	Entrypoint = "/manager"
	// User is the image's user and group: "nonroot" of distroless images.
	User = "65532:65532"
	// CACertsPath is where the CA bundle lies in the image.
	CACertsPath = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultCACertsFile is the host's bundle copied into the image
	// (Debian, Ubuntu, Alpine and Arch keep it there).
	DefaultCACertsFile = "/etc/ssl/certs/ca-certificates.crt"
	// DefaultLDFlags strips the symbol table and DWARF data: a smaller
	// image, and panics still print file:line stacks.
	DefaultLDFlags = "-s -w"

	nonrootID = 65532
	path      = "PATH=/usr/local/bin:/usr/local/sbin:/usr/bin:/usr/sbin:/bin:/sbin"
)

// Options say what goes into the image and how the binary is built.
type Options struct {
	// Package is the Go package to build (`go build` syntax, such as "."
	// or "./cmd/manager"); empty means ".". Ignored when Binary is set.
	Package string
	// Dir is the folder `go build` runs in; empty means the current one.
	Dir string
	// Binary, when set, is a prebuilt executable to put in the image
	// instead of building Package. It must be a static Linux ELF binary
	// for Platform.
	Binary string
	// Platform is the image's OS and architecture: GOOS and GOARCH (and
	// GOARM or GOAMD64 from the variant) of the build. The zero value
	// means linux and this program's GOARCH. Only linux is accepted.
	Platform v1.Platform
	// CACertsFile is the PEM bundle copied to CACertsPath; empty means
	// DefaultCACertsFile.
	CACertsFile string
	// Created is the instant recorded as every file's modification time
	// and as the image's creation time. The zero value means Unix 0.
	Created time.Time
	// Labels go into the image config (such as
	// org.opencontainers.image.source).
	Labels map[string]string
	// LDFlags is given to go build's -ldflags as is; DefaultLDFlags is
	// what `loom build image` passes unless told otherwise.
	LDFlags string
	// BuildVCS stamps the binary with the VCS revision (go build
	// -buildvcs=true). Off by default: a stamp makes the digest depend on
	// the checkout's state, not just on the source.
	BuildVCS bool
	// GoCommand is the go tool to run; empty means "go" from PATH.
	GoCommand string
}

// DefaultPlatform is linux on this program's architecture.
func DefaultPlatform() v1.Platform {
	return v1.Platform{OS: "linux", Architecture: runtime.GOARCH}
}

// SourceDateEpoch reads SOURCE_DATE_EPOCH (seconds since Unix 0), the
// reproducible-builds convention for a build's date. Unset or empty gives
// the zero time, which Build reads as Unix 0.
func SourceDateEpoch() (time.Time, error) {
	s := os.Getenv("SOURCE_DATE_EPOCH")
	if s == "" {
		return time.Time{}, nil
	}
	n, err := strconv.ParseInt(s, 10, 64)
	if err != nil || n < 0 {
		return time.Time{}, fmt.Errorf("SOURCE_DATE_EPOCH=%q: want a number of seconds since 1970", s)
	}
	return time.Unix(n, 0).UTC(), nil
}

// Build builds the binary (unless Options.Binary names one), checks that
// it is a static Linux binary for the platform, and assembles the image.
func Build(ctx context.Context, opts Options) (v1.Image, error) {
	plat, err := platform(opts.Platform)
	if err != nil {
		return nil, err
	}
	opts.Platform = plat
	caFile := opts.CACertsFile
	if caFile == "" {
		caFile = DefaultCACertsFile
	}
	ca, err := os.ReadFile(caFile)
	if err != nil {
		return nil, fmt.Errorf("CA certificates for the image: %w (give a PEM bundle with --ca-certs)", err)
	}
	if !bytes.Contains(ca, []byte("-----BEGIN CERTIFICATE-----")) {
		return nil, fmt.Errorf("CA certificates for the image: %s holds no PEM certificate", caFile)
	}

	bin := opts.Binary
	if bin == "" {
		tmp, err := os.MkdirTemp("", "loom-image-")
		if err != nil {
			return nil, err
		}
		defer os.RemoveAll(tmp)
		bin = filepath.Join(tmp, "manager")
		if err := goBuild(ctx, opts, bin); err != nil {
			return nil, err
		}
	}
	exe, err := os.ReadFile(bin)
	if err != nil {
		return nil, fmt.Errorf("read the binary: %w", err)
	}
	if err := checkBinary(exe, plat); err != nil {
		return nil, fmt.Errorf("%s: %w", bin, err)
	}
	return Assemble(exe, ca, opts)
}

// platform fills in and checks p.
func platform(p v1.Platform) (v1.Platform, error) {
	if p.OS == "" && p.Architecture == "" {
		return DefaultPlatform(), nil
	}
	if p.OS != "linux" {
		return p, fmt.Errorf("platform %s: only linux images can be built", p)
	}
	if p.Architecture == "" {
		return p, fmt.Errorf("platform %s: no architecture (want such as linux/amd64)", p)
	}
	return p, nil
}

// goBuild compiles opts.Package for opts.Platform into out: static
// (CGO_ENABLED=0), without the build's paths (-trimpath), and without a
// VCS stamp unless asked.
func goBuild(ctx context.Context, opts Options, out string) error {
	pkg := opts.Package
	if pkg == "" {
		pkg = "."
	}
	gocmd := opts.GoCommand
	if gocmd == "" {
		gocmd = "go"
	}
	args := []string{"build", "-trimpath", "-buildvcs=" + strconv.FormatBool(opts.BuildVCS), "-o", out}
	if opts.LDFlags != "" {
		args = append(args, "-ldflags="+opts.LDFlags)
	}
	args = append(args, "--", pkg)
	cmd := exec.CommandContext(ctx, gocmd, args...)
	cmd.Dir = opts.Dir
	cmd.Env = append(os.Environ(), "CGO_ENABLED=0", "GOOS="+opts.Platform.OS, "GOARCH="+opts.Platform.Architecture)
	if v := opts.Platform.Variant; v != "" {
		switch opts.Platform.Architecture {
		case "arm":
			cmd.Env = append(cmd.Env, "GOARM="+strings.TrimPrefix(v, "v"))
		case "amd64":
			cmd.Env = append(cmd.Env, "GOAMD64="+v)
		}
	}
	var output bytes.Buffer
	cmd.Stdout, cmd.Stderr = &output, &output
	if err := cmd.Run(); err != nil {
		msg := strings.TrimSpace(output.String())
		if msg == "" {
			return fmt.Errorf("go build %s for %s: %w", pkg, opts.Platform, err)
		}
		return fmt.Errorf("go build %s for %s: %w:\n%s", pkg, opts.Platform, err, msg)
	}
	return nil
}

var machines = map[string]elf.Machine{
	"amd64":   elf.EM_X86_64,
	"arm64":   elf.EM_AARCH64,
	"arm":     elf.EM_ARM,
	"386":     elf.EM_386,
	"ppc64le": elf.EM_PPC64,
	"s390x":   elf.EM_S390,
	"riscv64": elf.EM_RISCV,
}

// checkBinary refuses what would not start on an empty base: anything
// but an ELF executable for the platform's architecture, or one that
// needs a dynamic loader.
func checkBinary(exe []byte, p v1.Platform) error {
	f, err := elf.NewFile(bytes.NewReader(exe))
	if err != nil {
		return fmt.Errorf("not a Linux executable: %w", err)
	}
	defer f.Close()
	if m, ok := machines[p.Architecture]; ok && f.Machine != m {
		return fmt.Errorf("built for %s, not for %s", f.Machine, p)
	}
	for _, prog := range f.Progs {
		if prog.Type == elf.PT_INTERP {
			interp, _ := io.ReadAll(io.LimitReader(prog.Open(), 256))
			return fmt.Errorf("dynamically linked (it needs %s, which the image lacks): build it with CGO_ENABLED=0",
				strings.TrimRight(string(interp), "\x00"))
		}
	}
	return nil
}

// Assemble makes the image from the binary's and the CA bundle's bytes,
// with opts' Platform, Created and Labels (the build options are not
// used). It reads no file and runs nothing: the same arguments give the
// same digest.
func Assemble(binary, caCerts []byte, opts Options) (v1.Image, error) {
	plat, err := platform(opts.Platform)
	if err != nil {
		return nil, err
	}
	created := opts.Created
	if created.IsZero() {
		created = time.Unix(0, 0)
	}
	created = created.UTC().Truncate(time.Second)

	layerTar, err := Files(binary, caCerts, created)
	if err != nil {
		return nil, err
	}
	gz, err := compress(layerTar)
	if err != nil {
		return nil, err
	}
	layer, err := tarball.LayerFromOpener(func() (io.ReadCloser, error) {
		return io.NopCloser(bytes.NewReader(gz)), nil
	}, tarball.WithMediaType(types.OCILayer))
	if err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}

	var labels map[string]string
	if len(opts.Labels) > 0 {
		labels = make(map[string]string, len(opts.Labels))
		for k, v := range opts.Labels {
			labels[k] = v
		}
	}
	cfg := &v1.ConfigFile{
		Architecture: plat.Architecture,
		OS:           plat.OS,
		Variant:      plat.Variant,
		Created:      v1.Time{Time: created},
		Config: v1.Config{
			User:       User,
			Entrypoint: []string{Entrypoint},
			Env:        []string{path, "SSL_CERT_FILE=" + CACertsPath},
			WorkingDir: "/",
			Labels:     labels,
		},
		RootFS: v1.RootFS{Type: "layers"},
	}
	img := mutate.MediaType(empty.Image, types.OCIManifestSchema1)
	img = mutate.ConfigMediaType(img, types.OCIConfigJSON)
	img, err = mutate.ConfigFile(img, cfg)
	if err != nil {
		return nil, err
	}
	img, err = mutate.Append(img, mutate.Addendum{
		Layer:     layer,
		MediaType: types.OCILayer,
		History: v1.History{
			Created:   v1.Time{Time: created},
			CreatedBy: "loom build image",
			Comment:   "static binary at " + Entrypoint + ", CA certificates, nonroot user " + User,
		},
	})
	if err != nil {
		return nil, err
	}
	// Compute the manifest now, so that a failure shows here rather than
	// when the image is written.
	if _, err := img.Digest(); err != nil {
		return nil, fmt.Errorf("image manifest: %w", err)
	}
	return img, nil
}

// file is one entry of the layer.
type file struct {
	name     string // no leading slash; a folder's ends with one
	mode     int64
	uid, gid int
	data     []byte
}

// Files returns the layer's uncompressed tar: the binary at Entrypoint,
// the CA bundle, /etc/passwd and /etc/group with root, nobody and nonroot,
// nonroot's home, and /tmp. Every entry has mtime at, fixed owners and
// modes, and the entries are in name order (each folder before what it
// holds).
func Files(binary, caCerts []byte, at time.Time) ([]byte, error) {
	const passwd = "root:x:0:0:root:/root:/sbin/nologin\n" +
		"nobody:x:65534:65534:nobody:/nonexistent:/sbin/nologin\n" +
		"nonroot:x:65532:65532:nonroot:/home/nonroot:/sbin/nologin\n"
	const group = "root:x:0:\n" +
		"nobody:x:65534:\n" +
		"nonroot:x:65532:\n"
	files := []file{
		{name: "etc/", mode: 0o755},
		{name: "etc/group", mode: 0o644, data: []byte(group)},
		{name: "etc/passwd", mode: 0o644, data: []byte(passwd)},
		{name: "etc/ssl/", mode: 0o755},
		{name: "etc/ssl/certs/", mode: 0o755},
		{name: strings.TrimPrefix(CACertsPath, "/"), mode: 0o644, data: caCerts},
		{name: "home/", mode: 0o755},
		{name: "home/nonroot/", mode: 0o700, uid: nonrootID, gid: nonrootID},
		{name: strings.TrimPrefix(Entrypoint, "/"), mode: 0o755, data: binary},
		{name: "tmp/", mode: 0o1777},
	}
	sort.Slice(files, func(i, j int) bool { return files[i].name < files[j].name })

	var buf bytes.Buffer
	tw := tar.NewWriter(&buf)
	for _, f := range files {
		h := &tar.Header{
			Name:    f.name,
			Mode:    f.mode,
			Uid:     f.uid,
			Gid:     f.gid,
			ModTime: at,
			Format:  tar.FormatPAX,
		}
		if strings.HasSuffix(f.name, "/") {
			h.Typeflag = tar.TypeDir
		} else {
			h.Typeflag = tar.TypeReg
			h.Size = int64(len(f.data))
		}
		if err := tw.WriteHeader(h); err != nil {
			return nil, fmt.Errorf("image layer: %s: %w", f.name, err)
		}
		if _, err := tw.Write(f.data); err != nil {
			return nil, fmt.Errorf("image layer: %s: %w", f.name, err)
		}
	}
	if err := tw.Close(); err != nil {
		return nil, fmt.Errorf("image layer: %w", err)
	}
	return buf.Bytes(), nil
}

// compress gzips b with no name and no timestamp in the header, so the
// output depends on b (and the Go version's compress/flate) only.
func compress(b []byte) ([]byte, error) {
	var buf bytes.Buffer
	zw, err := gzip.NewWriterLevel(&buf, gzip.DefaultCompression)
	if err != nil {
		return nil, err
	}
	if _, err := zw.Write(b); err != nil {
		return nil, err
	}
	if err := zw.Close(); err != nil {
		return nil, err
	}
	return buf.Bytes(), nil
}
