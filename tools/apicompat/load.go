package main

import (
	"bufio"
	"bytes"
	"context"
	"errors"
	"fmt"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/semver"
	"golang.org/x/tools/go/gcexportdata"
	"golang.org/x/tools/go/packages"
)

// coreModule is the module whose API is checked.
const coreModule = "github.com/loom-k8s/loom"

// baselineExt ends the name of a baseline file: <version>.gcexport.
const baselineExt = ".gcexport"

// findRoot returns the directory of the core module's go.mod: dir or the
// nearest directory above it.
func findRoot(dir string) (string, error) {
	dir, err := filepath.Abs(dir)
	if err != nil {
		return "", fmt.Errorf("finding the repository root: %w", err)
	}
	for d := dir; ; d = filepath.Dir(d) {
		if data, err := os.ReadFile(filepath.Join(d, "go.mod")); err == nil && modfile.ModulePath(data) == coreModule {
			return d, nil
		}
		if filepath.Dir(d) == d {
			return "", fmt.Errorf("no go.mod of module %s in %s or above it (use -root)", coreModule, dir)
		}
	}
}

// isAPI reports whether the package at path (in module modulePath) is
// part of the API that the check compares. Internal packages cannot be
// imported by users; the packages under examples/ belong to the core
// module but are sample programs and their operators, which users copy
// rather than import, so their exported names are not a promise either.
// Commands (package main) have no importable API at all.
func isAPI(modulePath, path, name string) bool {
	if name == "main" {
		return false
	}
	rel := strings.TrimPrefix(strings.TrimPrefix(path, modulePath), "/")
	if rel == "examples" || strings.HasPrefix(rel, "examples/") {
		return false
	}
	for _, e := range strings.Split(rel, "/") {
		if e == "internal" {
			return false
		}
	}
	return true
}

// loadTree type-checks the API packages of the core module at root from
// the compiler's export data (go list -export builds what the build cache
// lacks). It returns them sorted by import path, and the module path.
func loadTree(ctx context.Context, root string) ([]*types.Package, string, error) {
	cfg := &packages.Config{
		Context: ctx,
		Dir:     root,
		Mode:    packages.NeedName | packages.NeedFiles | packages.NeedTypes | packages.NeedModule,
	}
	pkgs, err := packages.Load(cfg, "./...")
	if err != nil {
		return nil, "", fmt.Errorf("loading the packages of %s: %w", root, err)
	}
	var (
		out        []*types.Package
		modulePath string
		errs       []error
	)
	for _, p := range pkgs {
		if p.Module == nil || !p.Module.Main {
			// Not a package of the module: go list reports a broken
			// go.mod or pattern this way.
			for _, e := range p.Errors {
				errs = append(errs, fmt.Errorf("%s: %s", p.PkgPath, e))
			}
			continue
		}
		modulePath = p.Module.Path
		if !isAPI(p.Module.Path, p.PkgPath, p.Name) || len(p.GoFiles) == 0 {
			continue
		}
		for _, e := range p.Errors {
			errs = append(errs, fmt.Errorf("%s: %s", p.PkgPath, e))
		}
		if p.Types != nil && len(p.Errors) == 0 {
			out = append(out, p.Types)
		}
	}
	if err := errors.Join(errs...); err != nil {
		return nil, "", fmt.Errorf("loading the packages of %s: %w", root, err)
	}
	if modulePath != coreModule {
		return nil, "", fmt.Errorf("%s holds module %q, not %s", root, modulePath, coreModule)
	}
	if len(out) == 0 {
		return nil, "", fmt.Errorf("no API package found in %s", root)
	}
	slices.SortFunc(out, func(a, b *types.Package) int { return strings.Compare(a.Path(), b.Path()) })
	return out, modulePath, nil
}

// writeBaseline writes the export data of pkgs, with the parts of their
// dependencies they mention, to file as one bundle. No positions are
// recorded (they would name this machine's directories and change with
// every edit), so the file changes only when the API does.
func writeBaseline(file string, pkgs []*types.Package) error {
	var buf bytes.Buffer
	if err := gcexportdata.WriteBundle(&buf, nil, pkgs); err != nil {
		return fmt.Errorf("encoding the API: %w", err)
	}
	if err := os.MkdirAll(filepath.Dir(file), 0o755); err != nil {
		return fmt.Errorf("writing the baseline: %w", err)
	}
	tmp := file + ".tmp"
	if err := os.WriteFile(tmp, buf.Bytes(), 0o644); err != nil {
		return fmt.Errorf("writing the baseline: %w", err)
	}
	if err := os.Rename(tmp, file); err != nil {
		os.Remove(tmp)
		return fmt.Errorf("writing the baseline: %w", err)
	}
	return nil
}

// readBaseline reads the packages of a baseline file.
func readBaseline(file string) ([]*types.Package, error) {
	f, err := os.Open(file)
	if err != nil {
		return nil, fmt.Errorf("reading the baseline: %w", err)
	}
	defer f.Close()
	pkgs, err := gcexportdata.ReadBundle(bufio.NewReader(f), token.NewFileSet(), map[string]*types.Package{})
	if err != nil {
		return nil, fmt.Errorf("reading the baseline %s: %w", file, err)
	}
	return pkgs, nil
}

// latestBaseline returns the version and file of the newest baseline in
// dir, in semantic-version order. Files not named with a full semantic
// version (v0.2.0, v1.0.0-rc.1) are ignored.
func latestBaseline(dir string) (version, file string, err error) {
	entries, err := os.ReadDir(dir)
	if err != nil {
		return "", "", fmt.Errorf("finding the baseline: %w", err)
	}
	for _, e := range entries {
		v, ok := strings.CutSuffix(e.Name(), baselineExt)
		if !ok || e.IsDir() || !semver.IsValid(v) || semver.Canonical(v) != v {
			continue
		}
		if version == "" || semver.Compare(v, version) > 0 {
			version = v
		}
	}
	if version == "" {
		return "", "", fmt.Errorf("no baseline <version>%s in %s: write one with -write -version <version>", baselineExt, dir)
	}
	return version, filepath.Join(dir, version+baselineExt), nil
}
