package doclinks_test

import (
	"go/ast"
	"go/importer"
	"go/parser"
	"go/token"
	"go/types"
	"path/filepath"
	"slices"
	"testing"

	"github.com/loom-k8s/loom/internal/doclinks"
	"github.com/loom-k8s/loom/internal/modload"
)

// TestModule checks every doc link in the doc comments of every package
// of this module.
func TestModule(t *testing.T) {
	m, err := modload.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	load := func(path string) *types.Package {
		p, err := m.Import(path)
		if err != nil {
			return nil
		}
		return p
	}
	checked := 0
	for _, p := range m.Packages {
		if p.Err != "" {
			t.Errorf("%s: %s", p.ImportPath, p.Err)
			continue
		}
		if len(p.GoFiles) == 0 {
			continue // tests only: no package documentation
		}
		pkg := load(p.ImportPath)
		if pkg == nil {
			t.Errorf("no types for %s", p.ImportPath)
			continue
		}
		var files []*ast.File
		for _, name := range p.GoFiles {
			f, err := parser.ParseFile(m.Fset, filepath.Join(p.Dir, name), nil, parser.ParseComments)
			if err != nil {
				t.Fatal(err)
			}
			files = append(files, f)
		}
		checked++
		for _, b := range doclinks.Check(files, pkg, load) {
			pos := m.Fset.Position(b.Pos)
			rel, _ := filepath.Rel(m.Root, pos.Filename)
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
