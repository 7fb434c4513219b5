// Package modload lists the packages of the Go module that holds the
// working directory, and loads their types from the compiler's export
// data: for tests that check every package of the module (no exported API
// mentions an internal type; every doc link resolves).
package modload

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"go/importer"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
)

// Package is a package of the module, as go list describes it.
type Package struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	// Export is the file holding the package's export data; empty for a
	// package with test files only.
	Export string
	// Err is go list's error for the package, if any.
	Err string
}

// Module is the module's packages and a loader of types for them and
// their dependencies.
type Module struct {
	// Root is the module's directory.
	Root string
	// Fset holds the positions of everything loaded.
	Fset *token.FileSet
	// Packages are the module's own packages.
	Packages []Package

	mu      sync.Mutex
	exports map[string]string // import path -> export data file ("" if none)
	imp     types.Importer
}

// Load lists the module's packages and their dependencies with
// `go list -export -deps`, which builds what is missing from the build
// cache.
func Load(ctx context.Context) (*Module, error) {
	gomod, err := exec.CommandContext(ctx, "go", "env", "GOMOD").Output()
	if err != nil {
		return nil, fmt.Errorf("modload: go env GOMOD: %w", err)
	}
	m := &Module{Root: filepath.Dir(strings.TrimSpace(string(gomod))), Fset: token.NewFileSet(), exports: map[string]string{}}
	cmd := exec.CommandContext(ctx, "go", "list", "-e", "-export", "-deps",
		"-json=ImportPath,Name,Dir,GoFiles,Export,DepOnly,Module,Error", "./...")
	cmd.Dir = m.Root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		return nil, fmt.Errorf("modload: go list: %w\n%s", err, stderr.String())
	}
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p struct {
			Package
			DepOnly bool
			Module  *struct{ Main bool }
			Error   *struct{ Err string }
		}
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			return nil, fmt.Errorf("modload: decoding go list output: %w", err)
		}
		m.exports[p.ImportPath] = p.Export
		if p.Error != nil {
			p.Err = p.Error.Err
		}
		if p.Module != nil && p.Module.Main && !p.DepOnly {
			m.Packages = append(m.Packages, p.Package)
		}
	}
	if len(m.Packages) == 0 {
		return nil, errors.New("modload: go list found no package of the module")
	}
	m.imp = importer.ForCompiler(m.Fset, "gc", func(path string) (io.ReadCloser, error) {
		m.mu.Lock()
		f := m.exports[path]
		m.mu.Unlock()
		if f == "" {
			return nil, fmt.Errorf("modload: no export data for %s", path)
		}
		return os.Open(f)
	})
	return m, nil
}

// Import returns the types of the package at path: one of the module's,
// a dependency, or another package that go list can build (such as a
// standard package that a comment names without importing it).
func (m *Module) Import(path string) (*types.Package, error) {
	m.mu.Lock()
	_, known := m.exports[path]
	m.mu.Unlock()
	if !known {
		cmd := exec.Command("go", "list", "-export", "-f", "{{.Export}}", path)
		cmd.Dir = m.Root
		out, err := cmd.Output()
		m.mu.Lock()
		m.exports[path] = strings.TrimSpace(string(out))
		if err != nil {
			m.exports[path] = ""
		}
		m.mu.Unlock()
	}
	return m.imp.Import(path)
}
