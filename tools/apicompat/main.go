// Command apicompat checks that Loom's exported API stays compatible with
// the last release's, unless the CHANGELOG says otherwise.
//
// The API is every exported identifier of the core module's packages
// (github.com/loom-k8s/loom), except commands, internal packages and the
// example programs under examples/. At each release the API is recorded in
// this directory, in baseline/<version>.gcexport: the type information of
// every package, as compiler export data, so the check needs neither the
// old sources nor git history.
//
// Run from tools/ (the repository root is found by walking up to the core
// module's go.mod; -root names it instead):
//
//	go run ./apicompat
//
// compares the current tree with the newest baseline (in semantic-version
// order) using golang.org/x/exp/apidiff. A change that can break code
// written against the release — a removed function, method, field or
// package, a changed signature or type, a method added to an interface —
// fails the check, with exit status 1 (2 when it cannot run at all),
// unless the "## [Unreleased]" section of CHANGELOG.md names it: pkg.Obj
// for a package-level identifier, pkg.Type.Member for a method or field (as in
// `manager.Manager.Webhooks` or `webhook.ServerOptions.DrainPeriod`), and
// for a removed package its path within the module in backquotes
// (`shard`), after the word "package", or its full import path. pkg is
// the last element of the package's import path. The failure lists
// each change that is not named and the line to start its CHANGELOG entry
// with. Compatible changes, such as additions, are listed too but never
// fail. Naming a change in a released section ("## [0.1.0]") does not
// count: that release did not have it.
//
// At release time, once the Unreleased section has become the release's
// section, record the new API:
//
//	go run ./apicompat -write -version v0.2.0
//
// and commit baseline/v0.2.0.gcexport with the release. Older baselines
// may stay; only the newest is compared against.
package main

import (
	"context"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"path/filepath"
	"strings"

	"golang.org/x/mod/semver"
)

// errIncompatible is returned when an incompatible change is not named.
var errIncompatible = errors.New("incompatible API changes not named in the CHANGELOG")

// options are the command's flags.
type options struct {
	root      string // repository root: the core module's directory
	write     bool   // write a baseline instead of checking
	version   string // with write: the release's version
	against   string // check against this baseline instead of the newest
	baseline  string // directory of the baselines
	changelog string // the CHANGELOG file
}

func main() {
	var o options
	flag.StringVar(&o.root, "root", "", "the repository root, holding the core module's go.mod (default: found from the working directory)")
	flag.BoolVar(&o.write, "write", false, "record the current API as the baseline of -version")
	flag.StringVar(&o.version, "version", "", "with -write: the release's semantic version, such as v0.2.0")
	flag.StringVar(&o.against, "against", "", "compare with this release's baseline instead of the newest")
	flag.StringVar(&o.baseline, "baseline", "", "the directory of the baselines (default: <root>/tools/apicompat/baseline)")
	flag.StringVar(&o.changelog, "changelog", "", "the CHANGELOG (default: <root>/CHANGELOG.md)")
	flag.Usage = func() {
		fmt.Fprintf(flag.CommandLine.Output(), "usage: apicompat [-root dir] [-against version]\n       apicompat -write -version version\n")
		flag.PrintDefaults()
	}
	flag.Parse()
	if flag.NArg() > 0 {
		flag.Usage()
		os.Exit(2)
	}
	err := run(context.Background(), o, os.Stdout)
	switch {
	case errors.Is(err, errIncompatible):
		os.Exit(1)
	case err != nil:
		fmt.Fprintf(os.Stderr, "apicompat: %v\n", err)
		os.Exit(2)
	}
}

// run writes a baseline or checks the tree, printing to out. It returns
// errIncompatible (wrapped) when the check fails.
func run(ctx context.Context, o options, out io.Writer) error {
	if o.root == "" {
		wd, err := os.Getwd()
		if err != nil {
			return fmt.Errorf("finding the repository root: %w", err)
		}
		if o.root, err = findRoot(wd); err != nil {
			return err
		}
	}
	if o.baseline == "" {
		o.baseline = filepath.Join(o.root, "tools", "apicompat", "baseline")
	}
	if o.changelog == "" {
		o.changelog = filepath.Join(o.root, "CHANGELOG.md")
	}
	if o.write {
		return writeCmd(ctx, o, out)
	}
	if o.version != "" {
		return errors.New("-version goes with -write; to check against a given release use -against")
	}
	return check(ctx, o, out)
}

func writeCmd(ctx context.Context, o options, out io.Writer) error {
	if !semver.IsValid(o.version) || semver.Canonical(o.version) != o.version {
		return fmt.Errorf("-version %q: need a full semantic version such as v0.2.0", o.version)
	}
	pkgs, _, err := loadTree(ctx, o.root)
	if err != nil {
		return err
	}
	file := filepath.Join(o.baseline, o.version+baselineExt)
	if err := writeBaseline(file, pkgs); err != nil {
		return err
	}
	rel, err := filepath.Rel(o.root, file)
	if err != nil || strings.HasPrefix(rel, "..") {
		rel = file
	}
	fmt.Fprintf(out, "apicompat: wrote the API of %d packages as %s\n", len(pkgs), rel)
	return nil
}

func check(ctx context.Context, o options, out io.Writer) error {
	version, file := o.against, ""
	if version == "" {
		var err error
		if version, file, err = latestBaseline(o.baseline); err != nil {
			return err
		}
	} else {
		file = filepath.Join(o.baseline, version+baselineExt)
	}
	old, err := readBaseline(file)
	if err != nil {
		return err
	}
	changelog, err := os.ReadFile(o.changelog)
	if err != nil {
		return fmt.Errorf("reading the CHANGELOG: %w", err)
	}
	cur, modulePath, err := loadTree(ctx, o.root)
	if err != nil {
		return err
	}
	r := Compare(modulePath, old, cur, string(changelog))
	if err := r.Write(out, version); err != nil {
		return fmt.Errorf("printing the report: %w", err)
	}
	if !r.OK() {
		return fmt.Errorf("%d against %s: %w", len(r.Unnamed()), version, errIncompatible)
	}
	return nil
}
