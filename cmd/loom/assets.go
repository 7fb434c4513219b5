package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"io"
	"io/fs"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"

	"github.com/loom-k8s/loom/testenv"
)

func init() {
	commands["assets"] = command{"build the control-plane binaries that testenv and loom dev run, and print their folder", runAssets}
}

// assetNames are the files tools/build.sh puts in the assets folder.
func assetNames() []string {
	return []string{"etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler", "kubectl", "kubelet", "kube-proxy", "kwok",
		"controller-gen-" + controllerToolsVersion, "kwok-stages.yaml"}
}

// runAssets makes sure the assets folder holds the control-plane
// binaries, building the missing ones, and prints the folder.
//
// The build recipe is the one a Loom release carries: the modules
// github.com/loom-k8s/loom/tools and .../tools/codegen at this loom's
// version, fetched through the Go module proxy, and tools/build.sh in
// them. A development build of loom (from a checkout) has no version to
// fetch: it builds from the Loom checkout around the current folder, or
// the one --from names.
func runAssets(ctx context.Context, args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("loom assets", flag.ContinueOnError)
	fs.SetOutput(errOut)
	kube := fs.String("kube-version", "", "build this Kubernetes version instead of the one this Loom pins; a patch release of the same minor version")
	from := fs.String("from", "", "a Loom checkout to build from (default: the release this loom was installed at; for a development build, the checkout around the current folder)")
	fs.Usage = func() {
		fmt.Fprintf(errOut, "Usage: loom assets [--kube-version V] [--from DIR]\n\n"+
			"Builds etcd, kube-apiserver, kube-controller-manager, kube-scheduler, kubectl,\n"+
			"kubelet, kube-proxy, kwok and controller-gen from the Go module proxy into the\n"+
			"per-user cache that testenv and loom dev read (or $LOOM_ASSETS), keeps the ones\n"+
			"already there, and prints the folder. The first build takes about 10 minutes on\n"+
			"2 cores.\n\n")
		fs.PrintDefaults()
	}
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() > 0 {
		return fmt.Errorf("%w: loom assets takes no arguments", errUsage)
	}
	pinned := testenv.PinnedVersions()
	dir := testenv.AssetsDir()
	if *kube != "" && *kube != pinned.Kube {
		if err := checkKubeVersion(pinned.Kube, *kube); err != nil {
			return err
		}
		// Another version has a folder of its own; LOOM_ASSETS names
		// the pinned one's.
		base := os.Getenv("XDG_CACHE_HOME")
		if base == "" {
			home, err := os.UserHomeDir()
			if err != nil {
				return fmt.Errorf("finding the per-user cache: %w", err)
			}
			base = filepath.Join(home, ".cache")
		}
		dir = filepath.Join(base, "loom", fmt.Sprintf("kube-%s_etcd-%s_kwok-%s", *kube, pinned.Etcd, pinned.Kwok), "bin")
	} else {
		*kube = ""
	}
	if missing := missingAssets(dir); len(missing) == 0 {
		fmt.Fprintf(errOut, "assets: every binary is in %s\n", dir)
		fmt.Fprintln(out, dir)
		return nil
	} else {
		fmt.Fprintf(errOut, "assets: building %s into %s (about 10 minutes on 2 cores for the control plane)\n", strings.Join(missing, ", "), dir)
	}
	if _, err := exec.LookPath("go"); err != nil {
		return fmt.Errorf("loom assets builds with the go command, and there is none on PATH: %w", err)
	}
	if _, err := exec.LookPath("bash"); err != nil {
		return fmt.Errorf("loom assets runs a bash script, and there is no bash on PATH: %w", err)
	}
	work, err := os.MkdirTemp("", "loom-assets-")
	if err != nil {
		return err
	}
	defer os.RemoveAll(work)
	if err := recipe(ctx, work, *from, errOut); err != nil {
		return err
	}
	if *kube != "" {
		if err := useKubeVersion(ctx, work, pinned.Kube, *kube); err != nil {
			return err
		}
	}
	cmd := exec.CommandContext(ctx, "bash", filepath.Join(work, "tools", "build.sh"))
	cmd.Env = append(os.Environ(), "LOOM_ASSETS="+dir, "GOWORK=off")
	cmd.Stdout, cmd.Stderr = errOut, errOut
	if err := cmd.Run(); err != nil {
		return fmt.Errorf("building the assets (tools/build.sh): %w", err)
	}
	if missing := missingAssets(dir); len(missing) > 0 {
		return fmt.Errorf("the build left %s missing from %s", strings.Join(missing, ", "), dir)
	}
	fmt.Fprintln(out, dir)
	return nil
}

// missingAssets lists the assets that dir lacks.
func missingAssets(dir string) []string {
	var missing []string
	for _, name := range assetNames() {
		st, err := os.Stat(filepath.Join(dir, name))
		if err != nil || !st.Mode().IsRegular() || (name != "kwok-stages.yaml" && st.Mode()&0o111 == 0) {
			missing = append(missing, name)
		}
	}
	return missing
}

var kubeVersion = regexp.MustCompile(`^v1\.(\d+)\.(\d+)$`)

// checkKubeVersion accepts a patch release of the pinned minor version:
// the build recipe (etcd, kwok, the replace list of k8s.io/kubernetes)
// holds within a minor version.
func checkKubeVersion(pinned, want string) error {
	p, w := kubeVersion.FindStringSubmatch(pinned), kubeVersion.FindStringSubmatch(want)
	if w == nil || p == nil || w[1] != p[1] {
		return fmt.Errorf("%w: --kube-version %q: this Loom builds Kubernetes v1.%s.x releases (it pins %s)", errUsage, want, p[1], pinned)
	}
	return nil
}

// recipe puts the build recipe into work: tools/ (with tools/codegen/)
// and testenv/versions.env, laid out as in a checkout.
func recipe(ctx context.Context, work, from string, errOut io.Writer) error {
	if from == "" {
		if v := loomVersion(); v != "" {
			return downloadRecipe(ctx, work, v, errOut)
		}
		wd, err := os.Getwd()
		if err != nil {
			return err
		}
		if from = findCheckout(wd); from == "" {
			return errors.New("this loom is a development build, which names no release to fetch the build recipe of: " +
				"run loom assets inside its Loom checkout (or pass --from), or install a release: " +
				"go install github.com/loom-k8s/loom/cmd/loom@latest")
		}
	} else if findCheckout(from) != from {
		return fmt.Errorf("--from %s: not the root of a Loom checkout (no tools/build.sh and go.mod of github.com/loom-k8s/loom)", from)
	}
	fmt.Fprintf(errOut, "assets: building from the checkout %s\n", from)
	if err := copyTree(filepath.Join(from, "tools"), filepath.Join(work, "tools")); err != nil {
		return err
	}
	return copyTree(filepath.Join(from, "testenv", "versions.env"), filepath.Join(work, "testenv", "versions.env"))
}

// findCheckout returns the root of the Loom checkout that holds dir, or "".
func findCheckout(dir string) string {
	for {
		mod, err := os.ReadFile(filepath.Join(dir, "go.mod"))
		if err == nil && bytes.HasPrefix(mod, []byte("module github.com/loom-k8s/loom\n")) {
			if _, err := os.Stat(filepath.Join(dir, "tools", "build.sh")); err == nil {
				return dir
			}
		}
		parent := filepath.Dir(dir)
		if parent == dir {
			return ""
		}
		dir = parent
	}
}

// downloadRecipe fetches Loom's modules at version through the module
// proxy and lays out their recipe in work.
func downloadRecipe(ctx context.Context, work, version string, errOut io.Writer) error {
	fmt.Fprintf(errOut, "assets: fetching the build recipe of Loom %s from the module proxy\n", version)
	const core = "github.com/loom-k8s/loom"
	dirs := map[string]string{}
	for _, m := range []string{core, core + "/tools", core + "/tools/codegen"} {
		cmd := exec.CommandContext(ctx, "go", "mod", "download", "-json", m+"@"+version)
		cmd.Dir = work
		cmd.Env = append(os.Environ(), "GOWORK=off", "GOFLAGS=-mod=mod")
		var stderr bytes.Buffer
		cmd.Stderr = &stderr
		data, err := cmd.Output()
		var dl struct{ Dir, Error string }
		if jerr := json.Unmarshal(data, &dl); jerr == nil && dl.Error != "" {
			return fmt.Errorf("fetching %s@%s: %s", m, version, dl.Error)
		}
		if err != nil {
			return fmt.Errorf("fetching %s@%s: %w: %s", m, version, err, strings.TrimSpace(stderr.String()))
		}
		dirs[m] = dl.Dir
	}
	for _, c := range []struct{ from, to string }{
		{filepath.Join(dirs[core], "testenv", "versions.env"), filepath.Join(work, "testenv", "versions.env")},
		{dirs[core+"/tools"], filepath.Join(work, "tools")},
		{dirs[core+"/tools/codegen"], filepath.Join(work, "tools", "codegen")},
	} {
		if err := copyTree(c.from, c.to); err != nil {
			return err
		}
	}
	return nil
}

// copyTree copies a file or a folder, writable (the module cache's are
// not), leaving out compiled binaries and tests.
func copyTree(from, to string) error {
	return filepath.WalkDir(from, func(p string, d fs.DirEntry, err error) error {
		if err != nil {
			return err
		}
		rel, err := filepath.Rel(from, p)
		if err != nil {
			return err
		}
		dst := filepath.Join(to, rel)
		if d.IsDir() {
			return os.MkdirAll(dst, 0o755)
		}
		if !d.Type().IsRegular() {
			return nil
		}
		data, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		if err := os.MkdirAll(filepath.Dir(dst), 0o755); err != nil {
			return err
		}
		mode := os.FileMode(0o644)
		if st, err := d.Info(); err == nil && st.Mode()&0o111 != 0 {
			mode = 0o755
		}
		return os.WriteFile(dst, data, mode)
	})
}

// useKubeVersion points the recipe in work at Kubernetes version want
// instead of pinned: versions.env, k8s.io/kubernetes in tools/go.mod,
// and the k8s.io staging modules it replaces (v0.M.P for v1.M.P).
func useKubeVersion(ctx context.Context, work, pinned, want string) error {
	env := filepath.Join(work, "testenv", "versions.env")
	data, err := os.ReadFile(env)
	if err != nil {
		return err
	}
	if data, err = kubeVersionEnv(data, want); err != nil {
		return err
	}
	if err := os.WriteFile(env, data, 0o644); err != nil {
		return err
	}
	tools := filepath.Join(work, "tools")
	cmd := exec.CommandContext(ctx, "go", "mod", "edit", "-json")
	cmd.Dir = tools
	js, err := cmd.Output()
	if err != nil {
		return fmt.Errorf("reading tools/go.mod: %w", err)
	}
	var mod struct {
		Replace []struct {
			Old struct{ Path string }
			New struct{ Path, Version string }
		}
	}
	if err := json.Unmarshal(js, &mod); err != nil {
		return fmt.Errorf("reading tools/go.mod: %w", err)
	}
	var replaces [][2]string
	for _, r := range mod.Replace {
		replaces = append(replaces, [2]string{r.Old.Path, r.New.Version})
	}
	edit := exec.CommandContext(ctx, "go", append([]string{"mod", "edit"}, kubeVersionEdits(replaces, pinned, want)...)...)
	edit.Dir = tools
	if out, err := edit.CombinedOutput(); err != nil {
		return fmt.Errorf("pointing tools/go.mod at %s: %w: %s", want, err, out)
	}
	return nil
}

// kubeVersionEnv rewrites the KUBE_VERSION line of versions.env.
func kubeVersionEnv(env []byte, want string) ([]byte, error) {
	var b bytes.Buffer
	found := false
	sc := bufio.NewScanner(bytes.NewReader(env))
	for sc.Scan() {
		line := sc.Text()
		if strings.HasPrefix(line, "KUBE_VERSION=") {
			line, found = "KUBE_VERSION="+want, true
		}
		b.WriteString(line + "\n")
	}
	if !found {
		return nil, errors.New("versions.env has no KUBE_VERSION line")
	}
	return b.Bytes(), nil
}

// kubeVersionEdits are the `go mod edit` flags that move tools/go.mod
// from Kubernetes pinned (v1.M.P) to want: k8s.io/kubernetes itself, and
// each replace of a k8s.io module pinned at the matching v0.M.P.
func kubeVersionEdits(replaces [][2]string, pinned, want string) []string {
	staging := func(v string) string { return "v0." + strings.TrimPrefix(v, "v1.") }
	flags := []string{"-require=k8s.io/kubernetes@" + want}
	for _, r := range replaces {
		if strings.HasPrefix(r[0], "k8s.io/") && r[1] == staging(pinned) {
			flags = append(flags, fmt.Sprintf("-replace=%s=%s@%s", r[0], r[0], staging(want)))
		}
	}
	return flags
}
