package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"os"
	"strings"
	"testing"
)

// TestProgramSize holds the program to the size docs/migrating-from-client-go.md
// claims for it. Lines are counted as for the controller-runtime program
// beside it: non-blank lines that are not only a comment, leaving out the
// package clause and the imports. The wiring is main and run; the whole
// program adds the reconciler and its struct.
func TestProgramSize(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, "main.go", src, parser.ParseComments)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(src), "\n")
	counts := func(from, to int) int { // 1-based, inclusive
		n := 0
		for _, l := range lines[from-1 : to] {
			if l := strings.TrimSpace(l); l != "" && !strings.HasPrefix(l, "//") {
				n++
			}
		}
		return n
	}
	wiring, whole := 0, 0
	for _, d := range f.Decls {
		if g, ok := d.(*ast.GenDecl); ok && g.Tok == token.IMPORT {
			continue
		}
		n := counts(fset.Position(d.Pos()).Line, fset.Position(d.End()).Line)
		whole += n
		if fn, ok := d.(*ast.FuncDecl); ok && (fn.Name.Name == "main" || fn.Name.Name == "run") {
			wiring += n
		}
	}
	t.Logf("wiring (main and run): %d lines; whole program: %d lines", wiring, whole)
	if wiring > 15 || whole > 32 {
		t.Errorf("the program has grown: wiring %d lines (at most 15), whole %d (at most 32)", wiring, whole)
	}
}
