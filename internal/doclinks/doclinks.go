// Package doclinks finds the doc links in a package's doc comments that
// do not resolve: a bracketed Name, Type.Method, pkg.Name or
// pkg.Type.Method that names nothing, which go doc and pkg.go.dev then
// show as plain bracketed text. The test of this package runs [Check]
// over every package of the module.
package doclinks

import (
	"go/ast"
	"go/doc/comment"
	"go/token"
	"go/types"
	"path"
	"regexp"
	"strconv"
	"strings"
)

// Broken is a doc link that does not resolve.
type Broken struct {
	// Pos is the doc comment that holds it.
	Pos token.Pos
	// Link is the link as written, brackets included.
	Link string
}

// Check returns the doc links in the doc comments of files (the syntax of
// pkg, parsed with comments) that do not resolve. A link resolves when it
// names a package-level object of pkg, a method or field of one of its
// types, an imported package, or an object, method or field of one; load
// returns the types of a package by import path, or nil when it has none.
//
// A bracketed text that names nothing at all is reported too when it has
// the shape of a link: one to three Go identifiers joined by dots, after
// an optional import path. Other bracketed texts, such as a regular
// expression's character class or a command's optional flag, are not
// links and are left alone.
func Check(files []*ast.File, pkg *types.Package, load func(path string) *types.Package) []Broken {
	var out []Broken
	// As go/doc does, a package name resolves through the imports of any
	// file of the package.
	imports := map[string]string{}
	declared := map[string]bool{}
	for _, f := range files {
		for name, p := range fileImports(f, load) {
			imports[name] = p
		}
		for name := range topLevel(f) {
			declared[name] = true
		}
	}
	for _, f := range files {
		real := &comment.Parser{
			LookupPackage: func(name string) (string, bool) {
				p, ok := imports[name]
				return p, ok
			},
			LookupSym: func(recv, name string) bool {
				return lookup(pkg, recv, name) || recv == "" && declared[name]
			},
		}
		// Every bracketed text shaped like a link, whether it resolves
		// or not.
		shaped := &comment.Parser{
			LookupPackage: func(name string) (string, bool) { return name, true },
			LookupSym:     func(string, string) bool { return true },
		}
		for _, cg := range docComments(f) {
			text := cg.Text()
			got := map[string]bool{}
			for _, l := range links(real.Parse(text)) {
				if resolves(l, pkg, load) || l.ImportPath == "" && l.Recv == "" && declared[l.Name] {
					got[linkText(l)] = true
				}
			}
			for _, l := range links(shaped.Parse(text)) {
				if s := linkText(l); !got[s] && linkShaped.MatchString(s) {
					out = append(out, Broken{Pos: cg.Pos(), Link: s})
					got[s] = true
				}
			}
		}
	}
	return out
}

// linkShaped matches the bracketed texts that are meant as doc links: one
// to three Go identifiers joined by dots, after an optional import path.
var linkShaped = regexp.MustCompile(`^\[\*?([\w.-]+/[\w./-]*\.)?[A-Za-z_]\w*(\.[A-Za-z_]\w*){0,2}\]$`)

// topLevel returns the names f declares at package level, exported or not
// (export data holds only what other packages can reach).
func topLevel(f *ast.File) map[string]bool {
	m := map[string]bool{}
	for _, d := range f.Decls {
		switch d := d.(type) {
		case *ast.FuncDecl:
			if d.Recv == nil {
				m[d.Name.Name] = true
			}
		case *ast.GenDecl:
			for _, spec := range d.Specs {
				switch sp := spec.(type) {
				case *ast.TypeSpec:
					m[sp.Name.Name] = true
				case *ast.ValueSpec:
					for _, n := range sp.Names {
						m[n.Name] = true
					}
				}
			}
		}
	}
	return m
}

// fileImports maps the names f imports packages by to their paths.
func fileImports(f *ast.File, load func(string) *types.Package) map[string]string {
	m := map[string]string{}
	for _, spec := range f.Imports {
		p, err := strconv.Unquote(spec.Path.Value)
		if err != nil {
			continue
		}
		switch {
		case spec.Name != nil:
			m[spec.Name.Name] = p
		case load(p) != nil:
			m[load(p).Name()] = p
		default:
			m[path.Base(p)] = p
		}
	}
	return m
}

// lookup reports whether pkg has a package-level object name, or, with a
// recv, a type recv with a method or field name.
func lookup(pkg *types.Package, recv, name string) bool {
	obj := pkg.Scope().Lookup(name)
	if recv == "" {
		return obj != nil
	}
	tn, ok := pkg.Scope().Lookup(recv).(*types.TypeName)
	if !ok {
		return false
	}
	o, _, _ := types.LookupFieldOrMethod(types.NewPointer(tn.Type()), true, pkg, name)
	return o != nil
}

// resolves reports whether l names something: in pkg when it has no
// import path, else in the package it names.
func resolves(l *comment.DocLink, pkg *types.Package, load func(string) *types.Package) bool {
	if l.ImportPath == "" || l.ImportPath == pkg.Path() {
		return l.Name == "" || lookup(pkg, l.Recv, l.Name)
	}
	other := load(l.ImportPath)
	if other == nil {
		return false
	}
	return l.Name == "" || lookup(other, l.Recv, l.Name)
}

// docComments returns the doc comments of f: the package's, and those of
// its declarations, specs and fields.
func docComments(f *ast.File) []*ast.CommentGroup {
	var out []*ast.CommentGroup
	add := func(cg *ast.CommentGroup) {
		if cg != nil {
			out = append(out, cg)
		}
	}
	add(f.Doc)
	ast.Inspect(f, func(n ast.Node) bool {
		switch n := n.(type) {
		case *ast.GenDecl:
			add(n.Doc)
		case *ast.FuncDecl:
			add(n.Doc)
		case *ast.TypeSpec:
			add(n.Doc)
		case *ast.ValueSpec:
			add(n.Doc)
		case *ast.Field:
			add(n.Doc)
		}
		return true
	})
	return out
}

// links returns the doc links of a parsed comment.
func links(d *comment.Doc) []*comment.DocLink {
	var out []*comment.DocLink
	var text func([]comment.Text)
	text = func(ts []comment.Text) {
		for _, t := range ts {
			switch t := t.(type) {
			case *comment.DocLink:
				out = append(out, t)
			case *comment.Link:
				text(t.Text)
			case *comment.Italic, comment.Plain:
			}
		}
	}
	for _, b := range d.Content {
		switch b := b.(type) {
		case *comment.Paragraph:
			text(b.Text)
		case *comment.Heading:
			text(b.Text)
		case *comment.List:
			for _, it := range b.Items {
				for _, c := range it.Content {
					if p, ok := c.(*comment.Paragraph); ok {
						text(p.Text)
					}
				}
			}
		}
	}
	return out
}

// linkText is the link as written, with its brackets.
func linkText(l *comment.DocLink) string {
	var b strings.Builder
	b.WriteString("[")
	for _, t := range l.Text {
		if p, ok := t.(comment.Plain); ok {
			b.WriteString(string(p))
		}
	}
	b.WriteString("]")
	return b.String()
}
