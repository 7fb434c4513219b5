package doclinks_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"testing"

	"github.com/loom-k8s/loom/internal/doclinks"
)

// listedPackage is the part of `go list -json` output the test reads.
type listedPackage struct {
	ImportPath string
	Name       string
	Dir        string
	GoFiles    []string
	Export     string
	DepOnly    bool
	Module     *struct{ Main bool }
	Error      *struct{ Err string }
}

// exportLoader loads packages from the compiler's export data, listing a
// package that go list did not list at first (a standard package that a
// comment links without importing it) when it is asked for.
type exportLoader struct {
	root    string
	fset    *token.FileSet
	mu      sync.Mutex
	exports map[string]string
	imp     types.Importer
}

func (l *exportLoader) load(path string) *types.Package {
	l.mu.Lock()
	_, known := l.exports[path]
	l.mu.Unlock()
	if !known {
		cmd := exec.Command("go", "list", "-export", "-f", "{{.Export}}", path)
		cmd.Dir = l.root
		out, err := cmd.Output()
		l.mu.Lock()
		l.exports[path] = strings.TrimSpace(string(out))
		if err != nil {
			l.exports[path] = ""
		}
		l.mu.Unlock()
	}
	p, err := l.imp.Import(path)
	if err != nil {
		return nil
	}
	return p
}

// TestModule checks every doc link in the doc comments of every package
// of this module.
func TestModule(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	cmd := exec.CommandContext(t.Context(), "go", "list", "-e", "-export", "-deps",
		"-json=ImportPath,Name,Dir,GoFiles,Export,DepOnly,Module,Error", "./...")
	cmd.Dir = root
	var stderr strings.Builder
	cmd.Stderr = &stderr
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v\n%s", err, stderr.String())
	}
	l := &exportLoader{root: root, fset: token.NewFileSet(), exports: map[string]string{}}
	var mine []listedPackage
	for dec := json.NewDecoder(bytes.NewReader(out)); ; {
		var p listedPackage
		if err := dec.Decode(&p); errors.Is(err, io.EOF) {
			break
		} else if err != nil {
			t.Fatalf("decoding go list output: %v", err)
		}
		l.exports[p.ImportPath] = p.Export
		if p.Module != nil && p.Module.Main && !p.DepOnly {
			mine = append(mine, p)
		}
	}
	l.imp = importer.ForCompiler(l.fset, "gc", func(path string) (io.ReadCloser, error) {
		l.mu.Lock()
		f := l.exports[path]
		l.mu.Unlock()
		if f == "" {
			return nil, fmt.Errorf("no export data for %s", path)
		}
		return os.Open(f)
	})
	checked := 0
	for _, p := range mine {
		if p.Error != nil {
			t.Errorf("%s: %s", p.ImportPath, p.Error.Err)
			continue
		}
		if len(p.GoFiles) == 0 {
			continue // tests only: no package documentation
		}
		pkg := l.load(p.ImportPath)
		if pkg == nil {
			t.Errorf("no types for %s", p.ImportPath)
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(l.fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		checked++
		for _, b := range doclinks.Check(files, pkg, l.load) {
			pos := l.fset.Position(b.Pos)
			rel, _ := filepath.Rel(root, pos.Filename)
			t.Errorf("%s:%d: doc link %s does not resolve", rel, pos.Line, b.Link)
		}
	}
	t.Logf("checked the doc links of %d packages", checked)
}

// TestCheck runs Check on a small package: links to its own objects,
// methods and fields, to an import's, and to a standard package resolve;
// the others are reported.
func TestCheck(t *testing.T) {
	const src = `// Package p is about [T], [T.M], [T.F], [strings.Builder],
// [strings.Builder.Len], [io.Reader] and [errors], and links
// [Missing], [T.Nope], [strings.Nope] and [q.Thing] in vain.
package p

import (
	"errors"
	"strings"
)

// T is a [T] with [Broken.Link].
type T struct{ F int }

// M returns [errors.New] of nothing.
func (T) M() error { return errors.New(strings.TrimSpace("")) }
`
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "p.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: importer.Default()}
	pkg, err := conf.Check("example.com/p", fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	load := func(path string) *types.Package {
		p, err := importer.Default().Import(path)
		if err != nil {
			return nil
		}
		return p
	}
	var got []string
	for _, b := range doclinks.Check([]*ast.File{f}, pkg, load) {
		got = append(got, b.Link)
	}
	slices.Sort(got)
	want := []string{"[Broken.Link]", "[Missing]", "[T.Nope]", "[q.Thing]", "[strings.Nope]"}
	if !slices.Equal(got, want) {
		t.Errorf("broken links %q, want %q", got, want)
	}
}
