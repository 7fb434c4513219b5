package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"regexp"
	"runtime"
	"sort"
	"strings"

	"github.com/google/go-containerregistry/pkg/authn"
	"github.com/google/go-containerregistry/pkg/name"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/empty"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/mutate"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"

	"github.com/loom-k8s/loom/internal/ociimage"
)

func init() {
	commands["build"] = command{"build an operator's OCI image from its Go package, without Docker (build image)", runBuild}
}

const buildImageUsage = `Usage: loom build image [flags] [PACKAGE]

Builds the Go package PACKAGE (default ".") as a static Linux binary and
makes an OCI image of it, with no Docker engine and no base image: one
layer holding the binary at /manager (the entrypoint), the CA certificates
at /etc/ssl/certs/ca-certificates.crt, /etc/passwd and /etc/group with the
user nonroot (65532), /home/nonroot and /tmp. The image runs as
65532:65532.

The image is reproducible: the same source, Go toolchain and flags give
the same digest. Files and the image are dated Unix 0, or
SOURCE_DATE_EPOCH when set.

Give exactly one output: --oci-layout DIR, --tarball FILE, --push or
--dev-registry. The image's digest (sha256:...) is printed on stdout.

Examples:
  loom build image --tag example.com/memcached:v0.1.0 --oci-layout bin/image
  loom build image --tag memcached:dev --tarball bin/image.tar   # docker load -i bin/image.tar
  loom build image --tag registry.example.com/memcached:v0.1.0 --push
  loom build image --tag memcached:dev --dev-registry            # the registry of loom dev up

Flags:
`

// runBuild dispatches `loom build SUBCOMMAND`; image is the only one.
func runBuild(ctx context.Context, args []string, out, errOut io.Writer) error {
	if len(args) == 0 || args[0] != "image" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprintln(out, "Usage: loom build image [flags] [PACKAGE] (see loom build image --help)")
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: loom build needs a subcommand: image", errUsage)
	}
	return buildImage(ctx, args[1:], out, errOut)
}

// stringsFlag is a flag that may be given several times.
type stringsFlag []string

func (s *stringsFlag) String() string     { return strings.Join(*s, ",") }
func (s *stringsFlag) Set(v string) error { *s = append(*s, v); return nil }

// buildImage is `loom build image`.
func buildImage(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom build image", flag.ContinueOnError)
	tag := fs.String("tag", "", "the image's reference, such as registry.example.com/NAME:TAG or NAME:TAG (required, except with --oci-layout)")
	fs.StringVar(tag, "t", "", "short for --tag")
	layoutDir := fs.String("oci-layout", "", "write the image as an OCI image layout in this folder (made or replaced)")
	tarFile := fs.String("tarball", "", "write the image to this file as a tarball that docker load and kind load image-archive read")
	push := fs.Bool("push", false, "push the image to --tag's registry (plain HTTP for localhost and 127.0.0.1; credentials from the Docker config)")
	devRegistry := fs.Bool("dev-registry", false, "push the image to the registry of the loom dev up running in --state-dir, under --tag's name")
	stateDir := stateDirFlag(fs)
	platform := fs.String("platform", "", "OS/ARCH[/VARIANT] of the image, such as linux/arm64 (default linux/"+runtime.GOARCH+")")
	caCerts := fs.String("ca-certs", ociimage.DefaultCACertsFile, "PEM bundle of CA certificates to put in the image")
	binary := fs.String("binary", "", "put this prebuilt static Linux binary in the image instead of building PACKAGE")
	ldflags := fs.String("ldflags", ociimage.DefaultLDFlags, "go build -ldflags")
	buildVCS := fs.Bool("buildvcs", false, "stamp the binary with the VCS revision (the digest then depends on the checkout's state)")
	var labels stringsFlag
	fs.Var(&labels, "label", "KEY=VALUE label in the image config, such as org.opencontainers.image.source=URL (repeatable)")
	pos, err := parse(fs, args)
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(out, buildImageUsage+flagUsage(fs))
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) > 1 {
		return fmt.Errorf("%w: loom build image takes one package, got %q", errUsage, pos)
	}
	pkg := "."
	if len(pos) == 1 {
		pkg = pos[0]
	}
	outputs := 0
	for _, set := range []bool{*layoutDir != "", *tarFile != "", *push, *devRegistry} {
		if set {
			outputs++
		}
	}
	if outputs != 1 {
		return fmt.Errorf("%w: loom build image needs exactly one of --oci-layout DIR, --tarball FILE, --push and --dev-registry", errUsage)
	}
	if *tag == "" && *layoutDir == "" {
		return fmt.Errorf("%w: loom build image needs --tag with --tarball, --push and --dev-registry", errUsage)
	}
	opts := ociimage.Options{
		Package:     pkg,
		Binary:      *binary,
		CACertsFile: *caCerts,
		LDFlags:     *ldflags,
		BuildVCS:    *buildVCS,
	}
	if *platform != "" {
		p, err := v1.ParsePlatform(*platform)
		if err != nil || p.OS == "" || p.Architecture == "" || p.OSVersion != "" {
			return fmt.Errorf("%w: --platform %q: want OS/ARCH[/VARIANT], such as linux/arm64", errUsage, *platform)
		}
		opts.Platform = *p
	}
	for _, l := range labels {
		k, v, ok := strings.Cut(l, "=")
		if !ok || k == "" {
			return fmt.Errorf("%w: --label %q: want KEY=VALUE", errUsage, l)
		}
		if opts.Labels == nil {
			opts.Labels = map[string]string{}
		}
		opts.Labels[k] = v
	}
	if opts.Created, err = ociimage.SourceDateEpoch(); err != nil {
		return err
	}

	// Check the reference before the build, which takes a while.
	var ref name.Reference
	if *devRegistry {
		st, err := readState(*stateDir)
		if err != nil || !st.running() {
			return fmt.Errorf("--dev-registry: no dev cluster is running in %s (start one with loom dev up)", *stateDir)
		}
		if st.Registry == "" {
			return fmt.Errorf("--dev-registry: the dev cluster in %s runs no registry", *stateDir)
		}
		*tag = st.Registry + "/" + withoutRegistry(*tag)
	}
	if *tag != "" {
		if ref, err = parseReference(*tag); err != nil {
			return fmt.Errorf("%w: --tag: %w", errUsage, err)
		}
		if _, ok := ref.(name.Tag); !ok && *layoutDir == "" {
			return fmt.Errorf("%w: --tag %s: want NAME:TAG, not a digest", errUsage, *tag)
		}
	}

	img, err := ociimage.Build(ctx, opts)
	if err != nil {
		return err
	}
	digest, err := img.Digest()
	if err != nil {
		return err
	}
	size := imageSize(img)
	var where string
	switch {
	case *layoutDir != "":
		if err := writeLayout(*layoutDir, img, *tag); err != nil {
			return err
		}
		where = "OCI layout " + *layoutDir
	case *tarFile != "":
		if err := writeTarball(*tarFile, img, ref.(name.Tag)); err != nil {
			return err
		}
		where = "tarball " + *tarFile
	default:
		if err := pushImage(ctx, ref, img); err != nil {
			return err
		}
		where = "pushed to " + ref.Context().Name() + "@" + digest.String()
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	what := "image"
	if *tag != "" {
		what = *tag
	}
	fmt.Fprintf(errOut, "Built %s for %s/%s (%s), %s\n", what, cfg.OS, cfg.Architecture, humanBytes(size), where)
	fmt.Fprintln(out, digest.String())
	return nil
}

// loopback matches registries on this machine, which `loom dev up` and
// local test registries serve over plain HTTP.
var loopback = regexp.MustCompile(`^(localhost|127(\.[0-9]+){3}|\[::1\])(:[0-9]+)?$`)

// parseReference parses an image reference, allowing plain HTTP for a
// registry on this machine.
func parseReference(s string) (name.Reference, error) {
	var opts []name.Option
	if host, _, _ := strings.Cut(s, "/"); strings.Contains(s, "/") && loopback.MatchString(host) {
		opts = append(opts, name.Insecure)
	}
	return name.ParseReference(s, opts...)
}

// withoutRegistry drops the registry host from an image reference, by
// Docker's rule: a first path component with a dot or a colon, or
// "localhost", is a host. "example.com/app:v1" gives "app:v1".
func withoutRegistry(s string) string {
	first, rest, ok := strings.Cut(s, "/")
	if ok && (strings.ContainsAny(first, ".:") || first == "localhost") {
		return rest
	}
	return s
}

// writeLayout writes img as the only image of the OCI layout in dir,
// named tag (the org.opencontainers.image.ref.name annotation) when given.
// An existing layout is replaced, and blobs of its earlier images are
// removed; a folder that holds anything else is refused.
func writeLayout(dir string, img v1.Image, tag string) error {
	if entries, err := os.ReadDir(dir); err == nil && len(entries) > 0 {
		if _, err := os.Stat(filepath.Join(dir, "oci-layout")); err != nil {
			return fmt.Errorf("--oci-layout %s: the folder holds files but no OCI layout; give an empty or new folder", dir)
		}
	}
	cfg, err := img.ConfigFile()
	if err != nil {
		return err
	}
	add := mutate.IndexAddendum{Add: img, Descriptor: v1.Descriptor{Platform: cfg.Platform()}}
	if tag != "" {
		add.Descriptor.Annotations = map[string]string{"org.opencontainers.image.ref.name": tag}
	}
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	if _, err := layout.Write(dir, mutate.AppendManifests(empty.Index, add)); err != nil {
		return fmt.Errorf("write the OCI layout %s: %w", dir, err)
	}
	return pruneLayout(dir, img)
}

// pruneLayout removes the blobs of dir that img does not use: those of
// images written there before.
func pruneLayout(dir string, img v1.Image) error {
	keep := map[string]bool{}
	for _, f := range []func() (v1.Hash, error){img.Digest, img.ConfigName} {
		h, err := f()
		if err != nil {
			return err
		}
		keep[h.Hex] = true
	}
	layers, err := img.Layers()
	if err != nil {
		return err
	}
	for _, l := range layers {
		h, err := l.Digest()
		if err != nil {
			return err
		}
		keep[h.Hex] = true
	}
	blobs := filepath.Join(dir, "blobs", "sha256")
	entries, err := os.ReadDir(blobs)
	if err != nil {
		return err
	}
	for _, e := range entries {
		f := filepath.Join(blobs, e.Name())
		switch {
		case keep[e.Name()]:
			// Written as private temporary files; blobs are no secret.
			if err := os.Chmod(f, 0o644); err != nil {
				return err
			}
		case !e.IsDir() && len(e.Name()) == 64:
			if err := os.Remove(f); err != nil {
				return err
			}
		}
	}
	return nil
}

// writeTarball writes img and its tag to file, in the format of docker
// save.
func writeTarball(file string, img v1.Image, tag name.Tag) error {
	if dir := filepath.Dir(file); dir != "." {
		if err := os.MkdirAll(dir, 0o755); err != nil {
			return err
		}
	}
	if err := tarball.WriteToFile(file, tag, img); err != nil {
		return fmt.Errorf("write the tarball %s: %w", file, err)
	}
	return nil
}

// pushImage pushes img to ref, with credentials from the Docker config
// and its credential helpers (anonymous when there are none).
func pushImage(ctx context.Context, ref name.Reference, img v1.Image) error {
	if err := remote.Write(ref, img, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("loom-cli")); err != nil {
		return fmt.Errorf("push %s to %s: %w", ref, ref.Context().RegistryStr(), err)
	}
	return nil
}

// imageSize is the compressed size of img's layers.
func imageSize(img v1.Image) int64 {
	m, err := img.Manifest()
	if err != nil {
		return 0
	}
	var n int64
	for _, l := range m.Layers {
		n += l.Size
	}
	return n
}

func humanBytes(n int64) string {
	switch {
	case n >= 1<<20:
		return fmt.Sprintf("%.1f MiB", float64(n)/(1<<20))
	case n >= 1<<10:
		return fmt.Sprintf("%.1f KiB", float64(n)/(1<<10))
	}
	return fmt.Sprintf("%d B", n)
}

// sortedKeys returns m's keys in order.
func sortedKeys(m map[string]string) []string {
	keys := make([]string, 0, len(m))
	for k := range m {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	return keys
}
