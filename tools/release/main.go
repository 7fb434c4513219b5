// Command release writes a Loom release as a Go module proxy in a folder:
// what a public module proxy would serve for a tag of this repository.
//
//	go run ./release -root .. -version v0.1.0 -out ../dist/proxy
//
// For each released module (the core module, tools and tools/codegen,
// which `loom assets` builds the control-plane binaries from) it writes
// <out>/<escaped module path>/@v/{list,<version>.info,<version>.mod,<version>.zip},
// the layout that GOPROXY=file://<out> reads. The zips are made by
// golang.org/x/mod/zip from the committed tree at -rev (default HEAD), as
// `git archive` would give it for a tag, so files that are not committed
// are not released; the command warns when the work tree has changes.
//
// A user of the folder sets
//
//	GOPROXY=file://<out>,https://proxy.golang.org GONOSUMDB=github.com/loom-k8s/loom
//
// (the checksum database knows a public tag, not this folder) and runs
// `go install github.com/loom-k8s/loom/cmd/loom@<version>`.
//
// The version must be a semantic version that CHANGELOG.md has a section
// for ("## [0.1.0] - <date>"), so that a release always says what it holds;
// a prerelease (v0.1.0-rc.1) is of the section of the version it leads to.
//
// The go command takes a module version's content to be immutable, and its
// build cache keys compiled packages of the module cache by version: to use
// a folder made again at the same version, empty GOCACHE as well as
// GOMODCACHE.
package main

import (
	"bytes"
	"encoding/json"
	"errors"
	"flag"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"time"

	"golang.org/x/mod/modfile"
	"golang.org/x/mod/module"
	"golang.org/x/mod/semver"
	modzip "golang.org/x/mod/zip"
)

// released are the module folders a release holds, relative to the
// repository root. bench, the examples with their own module and
// tools/helmcheck are for this repository's tests only.
var released = []string{".", "tools", "tools/codegen"}

func main() {
	root := flag.String("root", "..", "the repository's root folder")
	version := flag.String("version", "", "the version to release, such as v0.1.0 (required)")
	out := flag.String("out", "", "the folder to write the module proxy to (required)")
	rev := flag.String("rev", "HEAD", "the git revision whose committed files are released, or worktree for the work tree as it is")
	flag.Parse()
	if err := run(*root, *version, *out, *rev); err != nil {
		fmt.Fprintln(os.Stderr, "release:", err)
		os.Exit(1)
	}
}

func run(root, version, out, rev string) error {
	if version == "" || out == "" {
		return errors.New("-version and -out are required")
	}
	if !semver.IsValid(version) || semver.Canonical(version) != version || semver.Build(version) != "" {
		return fmt.Errorf("version %q is not a canonical semantic version such as v0.1.0", version)
	}
	if module.IsPseudoVersion(version) {
		return fmt.Errorf("version %q is a pseudo-version; a release needs a version of its own", version)
	}
	root, err := filepath.Abs(root)
	if err != nil {
		return err
	}
	if err := changelogHas(filepath.Join(root, "CHANGELOG.md"), version); err != nil {
		return err
	}
	if rev == "worktree" {
		if rev, err = snapshot(root); err != nil {
			return fmt.Errorf("committing the work tree to a snapshot: %w", err)
		}
	} else if st, err := git(root, "status", "--porcelain", "--untracked-files=no"); err != nil {
		return err
	} else if len(st) > 0 {
		fmt.Fprintf(os.Stderr, "release: warning: the work tree has uncommitted changes; only %s's committed files are released\n", rev)
	}
	commitTime, err := git(root, "log", "-1", "--format=%cI", rev)
	if err != nil {
		return err
	}
	t, err := time.Parse(time.RFC3339, strings.TrimSpace(string(commitTime)))
	if err != nil {
		return fmt.Errorf("reading the commit time of %s: %w", rev, err)
	}
	for _, dir := range released {
		path, err := write(root, dir, version, rev, t.UTC(), out)
		if err != nil {
			return fmt.Errorf("module in %s: %w", dir, err)
		}
		fmt.Printf("%s@%s\n", path, version)
	}
	return nil
}

// write puts the module in dir (relative to root) at version into the
// proxy folder out, and returns its module path.
func write(root, dir, version, rev string, t time.Time, out string) (string, error) {
	gomod, err := git(root, "show", rev+":"+filepath.ToSlash(filepath.Join(dir, "go.mod")))
	if err != nil {
		return "", err
	}
	path := modfile.ModulePath(gomod)
	if path == "" {
		return "", errors.New("go.mod names no module")
	}
	if err := module.Check(path, version); err != nil {
		return "", err
	}
	esc, err := module.EscapePath(path)
	if err != nil {
		return "", err
	}
	vdir := filepath.Join(out, filepath.FromSlash(esc), "@v")
	if err := os.MkdirAll(vdir, 0o755); err != nil {
		return "", err
	}
	var zip bytes.Buffer
	subdir := filepath.ToSlash(dir)
	if subdir == "." {
		subdir = ""
	}
	if err := modzip.CreateFromVCS(&zip, module.Version{Path: path, Version: version}, root, rev, subdir); err != nil {
		return "", fmt.Errorf("zipping %s: %w", path, err)
	}
	info, err := json.Marshal(struct {
		Version string
		Time    time.Time
	}{version, t})
	if err != nil {
		return "", err
	}
	for name, data := range map[string][]byte{
		version + ".info": info,
		version + ".mod":  gomod,
		version + ".zip":  zip.Bytes(),
	} {
		if err := writeFile(filepath.Join(vdir, name), data); err != nil {
			return "", err
		}
	}
	// list: every version in the folder, one per line, this one added.
	listFile := filepath.Join(vdir, "list")
	old, err := os.ReadFile(listFile)
	if err != nil && !errors.Is(err, os.ErrNotExist) {
		return "", err
	}
	versions := strings.Fields(string(old))
	if !slices.Contains(versions, version) {
		versions = append(versions, version)
	}
	semver.Sort(versions)
	return path, writeFile(listFile, []byte(strings.Join(versions, "\n")+"\n"))
}

// changelogHas checks that the changelog has a section for version, as
// "## [0.1.0]" (Keep a Changelog leaves the v out).
func changelogHas(file, version string) error {
	data, err := os.ReadFile(file)
	if err != nil {
		return err
	}
	base := strings.TrimPrefix(strings.TrimSuffix(version, semver.Prerelease(version)), "v")
	heading := regexp.MustCompile(`(?m)^## \[` + regexp.QuoteMeta(base) + `\]`)
	if !heading.Match(data) {
		return fmt.Errorf("CHANGELOG.md has no section \"## [%s] - <date>\": move the Unreleased entries under one before releasing", base)
	}
	return nil
}

func writeFile(name string, data []byte) error {
	tmp := name + ".tmp"
	if err := os.WriteFile(tmp, data, 0o644); err != nil {
		return err
	}
	return os.Rename(tmp, name)
}

// snapshot commits the work tree, as `git add -A` would stage it, to a
// commit that no branch points to, through an index of its own: the
// repository's index, branches and files stay as they are.
func snapshot(root string) (string, error) {
	idx, err := os.MkdirTemp("", "loom-release-")
	if err != nil {
		return "", err
	}
	defer os.RemoveAll(idx)
	env := []string{"GIT_INDEX_FILE=" + filepath.Join(idx, "index")}
	if _, err := gitEnv(root, env, "read-tree", "HEAD"); err != nil {
		return "", err
	}
	if _, err := gitEnv(root, env, "add", "-A"); err != nil {
		return "", err
	}
	tree, err := gitEnv(root, env, "write-tree")
	if err != nil {
		return "", err
	}
	commit, err := gitEnv(root, append(env, "GIT_AUTHOR_NAME=release", "GIT_AUTHOR_EMAIL=release@localhost",
		"GIT_COMMITTER_NAME=release", "GIT_COMMITTER_EMAIL=release@localhost"),
		"commit-tree", "-p", "HEAD", "-m", "work tree snapshot", strings.TrimSpace(string(tree)))
	return strings.TrimSpace(string(commit)), err
}

func git(dir string, args ...string) ([]byte, error) {
	return gitEnv(dir, nil, args...)
}

func gitEnv(dir string, env []string, args ...string) ([]byte, error) {
	cmd := exec.Command("git", args...)
	cmd.Dir = dir
	cmd.Env = append(os.Environ(), env...)
	var stderr bytes.Buffer
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("git %s: %w: %s", strings.Join(args, " "), err, strings.TrimSpace(stderr.String()))
	}
	return out, nil
}
