package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// size counts a program's lines as docs/migrating-from-client-go.md does:
// non-blank lines that are not only a comment, leaving out the package
// clause and the imports. wiring is main and run; whole adds everything
// else (the reconciler and its struct).
func size(t *testing.T, path string) (wiring, whole int) {
	t.Helper()
	src, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, path, src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		n := 0
		for _, l := range lines[fset.Position(d.Pos()).Line-1 : fset.Position(d.End()).Line] {
			if l := strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
				n++
			}
		}
		whole += n
		if fn, ok := d.(*ast.FuncDecl); ok && (fn.Name.Name == "main" || fn.Name.Name == "run") {
			wiring += n
		}
	}
	return wiring, whole
}

// TestSmallerThanControllerRuntime compares the Foo-owns-Deployment
// program on Loom (examples/foo/minimal) with the same program on
// controller-runtime (main.go here): Loom's wiring and whole program must
// be no longer, and within the sizes docs/migrating-from-client-go.md
// gives (15 and 32 lines).
func TestSmallerThanControllerRuntime(t *testing.T) {
	crWiring, crWhole := size(t, "main.go")
	loomWiring, loomWhole := size(t, "../../examples/foo/minimal/main.go")
	t.Logf("controller-runtime: wiring %d lines, whole %d; Loom: wiring %d, whole %d", crWiring, crWhole, loomWiring, loomWhole)
	if loomWiring > 15 || loomWhole > 32 {
		t.Errorf("Loom's program has grown: wiring %d lines (at most 15), whole %d (at most 32)", loomWiring, loomWhole)
	}
	if loomWiring > crWiring || loomWhole > crWhole {
		t.Errorf("Loom's program is longer than controller-runtime's: wiring %d vs %d, whole %d vs %d", loomWiring, crWiring, loomWhole, crWhole)
	}
}
