package main

import (
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"text/tabwriter"

	"github.com/google/go-containerregistry/pkg/authn"
	v1 "github.com/google/go-containerregistry/pkg/v1"
	"github.com/google/go-containerregistry/pkg/v1/layout"
	"github.com/google/go-containerregistry/pkg/v1/remote"
	"github.com/google/go-containerregistry/pkg/v1/tarball"
)

func init() {
	commands["image"] = command{"show an image's digest, user and entrypoint (image inspect)", runImage}
}

const imageInspectUsage = `Usage: loom image inspect SOURCE

Prints an image's digest, platform, user, entrypoint, environment and
labels. SOURCE is an OCI layout folder or a tarball that loom build image
wrote, or an image reference to pull from a registry (plain HTTP for
localhost and 127.0.0.1).

A tarball keeps no manifest, so for it only the image ID (the config's
digest) is printed, not the digest that a registry would show.
`

// runImage dispatches `loom image SUBCOMMAND`; inspect is the only one.
func runImage(ctx context.Context, args []string, out, _ io.Writer) error {
	if len(args) == 0 || args[0] != "inspect" {
		if len(args) > 0 && (args[0] == "-h" || args[0] == "--help" || args[0] == "help") {
			fmt.Fprint(out, imageInspectUsage)
			return flag.ErrHelp
		}
		return fmt.Errorf("%w: loom image needs a subcommand: inspect", errUsage)
	}
	fs := flag.NewFlagSet("loom image inspect", flag.ContinueOnError)
	pos, err := parse(fs, args[1:])
	if errors.Is(err, flag.ErrHelp) {
		fmt.Fprint(out, imageInspectUsage)
		return err
	}
	if err != nil {
		return err
	}
	if len(pos) != 1 {
		return fmt.Errorf("%w: loom image inspect takes one OCI layout, tarball or image reference", errUsage)
	}
	images, err := loadImages(ctx, pos[0])
	if err != nil {
		return err
	}
	for i, im := range images {
		if i > 0 {
			fmt.Fprintln(out)
		}
		if err := printImage(out, im); err != nil {
			return err
		}
	}
	return nil
}

// sourceImage is an image and what is known of where it came from.
type sourceImage struct {
	img    v1.Image
	ref    string // the tag or ref.name it is known by, if any
	digest bool   // whether img's manifest digest is the real one
}

// loadImages reads the images of an OCI layout folder, a tarball or a
// registry reference.
func loadImages(ctx context.Context, src string) ([]sourceImage, error) {
	fi, statErr := os.Stat(src)
	switch {
	case statErr == nil && fi.IsDir():
		idx, err := layout.ImageIndexFromPath(src)
		if err != nil {
			return nil, fmt.Errorf("%s: not an OCI layout: %w", src, err)
		}
		m, err := idx.IndexManifest()
		if err != nil {
			return nil, fmt.Errorf("%s: %w", src, err)
		}
		var images []sourceImage
		for _, d := range m.Manifests {
			if !d.MediaType.IsImage() {
				continue
			}
			img, err := idx.Image(d.Digest)
			if err != nil {
				return nil, fmt.Errorf("%s: image %s: %w", src, d.Digest, err)
			}
			images = append(images, sourceImage{img: img, ref: d.Annotations["org.opencontainers.image.ref.name"], digest: true})
		}
		if len(images) == 0 {
			return nil, fmt.Errorf("%s: the OCI layout holds no image", src)
		}
		return images, nil
	case statErr == nil:
		img, err := tarball.ImageFromPath(src, nil)
		if err != nil {
			return nil, fmt.Errorf("%s: not an image tarball: %w", src, err)
		}
		var tag string
		if m, err := tarball.LoadManifest(func() (io.ReadCloser, error) { return os.Open(src) }); err == nil && len(m) > 0 && len(m[0].RepoTags) > 0 {
			tag = m[0].RepoTags[0]
		}
		return []sourceImage{{img: img, ref: tag}}, nil
	}
	ref, err := parseReference(src)
	if err != nil {
		return nil, fmt.Errorf("%s is no file, folder or image reference: %w", src, err)
	}
	img, err := remote.Image(ref, remote.WithContext(ctx), remote.WithAuthFromKeychain(authn.DefaultKeychain),
		remote.WithUserAgent("loom-cli"))
	if err != nil {
		return nil, fmt.Errorf("pull %s: %w", ref, err)
	}
	return []sourceImage{{img: img, ref: src, digest: true}}, nil
}

func printImage(out io.Writer, si sourceImage) error {
	cfg, err := si.img.ConfigFile()
	if err != nil {
		return err
	}
	id, err := si.img.ConfigName()
	if err != nil {
		return err
	}
	tw := tabwriter.NewWriter(out, 0, 4, 2, ' ', 0)
	if si.ref != "" {
		fmt.Fprintf(tw, "name\t%s\n", si.ref)
	}
	if si.digest {
		d, err := si.img.Digest()
		if err != nil {
			return err
		}
		fmt.Fprintf(tw, "digest\t%s\n", d)
	}
	fmt.Fprintf(tw, "id\t%s\n", id)
	fmt.Fprintf(tw, "platform\t%s\n", cfg.Platform())
	user := cfg.Config.User
	if user == "" {
		user = "(root)"
	}
	fmt.Fprintf(tw, "user\t%s\n", user)
	ep, _ := json.Marshal(cfg.Config.Entrypoint)
	fmt.Fprintf(tw, "entrypoint\t%s\n", ep)
	if len(cfg.Config.Cmd) > 0 {
		c, _ := json.Marshal(cfg.Config.Cmd)
		fmt.Fprintf(tw, "cmd\t%s\n", c)
	}
	if cfg.Config.WorkingDir != "" {
		fmt.Fprintf(tw, "workdir\t%s\n", cfg.Config.WorkingDir)
	}
	for _, e := range cfg.Config.Env {
		fmt.Fprintf(tw, "env\t%s\n", e)
	}
	for _, k := range sortedKeys(cfg.Config.Labels) {
		fmt.Fprintf(tw, "label\t%s=%s\n", k, cfg.Config.Labels[k])
	}
	fmt.Fprintf(tw, "created\t%s\n", cfg.Created.UTC().Format("2006-01-02T15:04:05Z"))
	if layers, err := si.img.Layers(); err == nil {
		var size int64
		for _, l := range layers {
			if n, err := l.Size(); err == nil {
				size += n
			}
		}
		fmt.Fprintf(tw, "layers\t%d (%s compressed)\n", len(layers), humanBytes(size))
	}
	return tw.Flush()
}
