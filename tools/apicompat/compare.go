package main

import (
	"fmt"
	"go/types"
	"io"
	"path"
	"slices"
	"strings"

	"golang.org/x/exp/apidiff"
)

// A Change is one difference between the released API and the current one.
type Change struct {
	// Package is the import path of the package the change is in.
	Package string
	// Message is apidiff's description, such as "(*Queue).Add: removed",
	// or "package <path>: removed" for a whole package.
	Message string
	// Compatible reports whether code written against the release still
	// compiles.
	Compatible bool
	// Name is what the CHANGELOG writes for the change: pkg.Obj or
	// pkg.Type.Member, or a package path relative to the module for a
	// package added or removed.
	Name string
	// Spellings are the forms of Name that count as naming the change.
	// For a package, a bare path such as "shard" reads as a plain word,
	// so it counts only in backquotes or after "package ", or as the full
	// import path.
	Spellings []string
	// Named reports whether the CHANGELOG's Unreleased section names it.
	Named bool
}

// A Report is the outcome of comparing the released API with the current one.
type Report struct {
	// Packages is how many packages were compared: those of the release
	// and those of the current tree, each counted once.
	Packages int
	// Changes holds the incompatible changes first, then the compatible
	// ones, each group in package order.
	Changes []Change
	// HasUnreleased reports whether the CHANGELOG has an Unreleased section.
	HasUnreleased bool
}

// Compare compares the exported API of the released packages (old) with
// that of the current ones (new), matched by import path, and looks each
// change up in the Unreleased section of changelog. modulePath is the
// module's path, against which added and removed packages are named.
func Compare(modulePath string, old, new []*types.Package, changelog string) *Report {
	unreleased, ok := unreleasedSection(changelog)
	r := &Report{HasUnreleased: ok}
	oldByPath := map[string]*types.Package{}
	for _, p := range old {
		oldByPath[p.Path()] = p
	}
	newByPath := map[string]*types.Package{}
	for _, p := range new {
		newByPath[p.Path()] = p
	}
	var paths []string
	for p := range oldByPath {
		paths = append(paths, p)
	}
	for p := range newByPath {
		if oldByPath[p] == nil {
			paths = append(paths, p)
		}
	}
	slices.Sort(paths)
	r.Packages = len(paths)

	var incompatible, compatible []Change
	for _, p := range paths {
		op, np := oldByPath[p], newByPath[p]
		switch {
		case np == nil:
			incompatible = append(incompatible, packageChange(modulePath, p, "removed", false))
		case op == nil:
			compatible = append(compatible, packageChange(modulePath, p, "added", true))
		default:
			for _, c := range apidiff.Changes(op, np).Changes {
				name, also := changeName(np, c.Message)
				ch := Change{Package: p, Message: c.Message, Compatible: c.Compatible, Name: name, Spellings: append([]string{name}, also...)}
				if c.Compatible {
					compatible = append(compatible, ch)
				} else {
					incompatible = append(incompatible, ch)
				}
			}
		}
	}
	r.Changes = append(incompatible, compatible...)
	for i := range r.Changes {
		c := &r.Changes[i]
		for _, n := range c.Spellings {
			c.Named = c.Named || mentions(unreleased, n)
		}
	}
	return r
}

// Incompatible returns the incompatible changes.
func (r *Report) Incompatible() []Change {
	var cs []Change
	for _, c := range r.Changes {
		if !c.Compatible {
			cs = append(cs, c)
		}
	}
	return cs
}

// Unnamed returns the incompatible changes that the CHANGELOG's Unreleased
// section does not name: the ones that fail the check.
func (r *Report) Unnamed() []Change {
	var cs []Change
	for _, c := range r.Incompatible() {
		if !c.Named {
			cs = append(cs, c)
		}
	}
	return cs
}

// OK reports whether the check passes: every incompatible change is named.
func (r *Report) OK() bool { return len(r.Unnamed()) == 0 }

// Summary is the one-line outcome, against the release version.
func (r *Report) Summary(version string) string {
	inc := len(r.Incompatible())
	unnamed := len(r.Unnamed())
	how := "all named in CHANGELOG Unreleased"
	if unnamed > 0 {
		how = fmt.Sprintf("%d not named in CHANGELOG Unreleased", unnamed)
	}
	return fmt.Sprintf("apicompat: %d packages against %s: %d incompatible (%s), %d compatible",
		r.Packages, version, inc, how, len(r.Changes)-inc)
}

// Write prints every change, then, when the check fails, what the
// CHANGELOG needs, and last the summary line.
func (r *Report) Write(w io.Writer, version string) error {
	var b strings.Builder
	for _, c := range r.Changes {
		switch {
		case c.Compatible:
			fmt.Fprintf(&b, "compatible:   %s: %s\n", c.Package, c.Message)
		case c.Named:
			fmt.Fprintf(&b, "incompatible: %s: %s (named in CHANGELOG as %s)\n", c.Package, c.Message, c.Name)
		default:
			fmt.Fprintf(&b, "incompatible: %s: %s (NOT NAMED in CHANGELOG)\n", c.Package, c.Message)
		}
	}
	if unnamed := r.Unnamed(); len(unnamed) > 0 {
		fmt.Fprintf(&b, "\nThese changes break code written against %s. Name each one in CHANGELOG.md,\n", version)
		fmt.Fprintf(&b, "in the \"## [Unreleased]\" section (under \"### Changed (incompatible)\"),\n")
		fmt.Fprintf(&b, "with what to write instead; or undo the change:\n")
		if !r.HasUnreleased {
			fmt.Fprintf(&b, "(CHANGELOG.md has no \"## [Unreleased]\" section: add one above the releases.)\n")
		}
		seen := map[string]bool{}
		for _, c := range unnamed {
			if seen[c.Name] {
				continue
			}
			seen[c.Name] = true
			fmt.Fprintf(&b, "- `%s` %s\n", c.Name, what(c.Message))
		}
		b.WriteString("\n")
	}
	b.WriteString(r.Summary(version) + "\n")
	_, err := io.WriteString(w, b.String())
	return err
}

// what turns an apidiff message into the start of a CHANGELOG line:
// "removed", "changed from int to string", ...
func what(message string) string {
	_, rest := splitMessage(message)
	return rest
}

func packageChange(modulePath, pkgPath, how string, compatible bool) Change {
	rel := strings.TrimPrefix(strings.TrimPrefix(pkgPath, modulePath), "/")
	if rel == "" || rel == pkgPath {
		rel = pkgPath // the module's root package, or one outside it
	}
	return Change{
		Package:    pkgPath,
		Message:    fmt.Sprintf("package %s: %s", pkgPath, how),
		Compatible: compatible,
		Name:       rel,
		Spellings:  []string{"`" + rel + "`", "package " + rel, pkgPath},
	}
}

// changeName derives the CHANGELOG name of the object an apidiff message
// is about, for a change in pkg. apidiff names objects relative to the
// package compared:
//
//	Foo: removed                         -> pkg.Foo
//	(*T).M: removed, (T).M: removed      -> pkg.T.M
//	(*T[K, V]).M: removed                -> pkg.T.M
//	T.F: changed from int to string      -> pkg.T.F (a field or interface method)
//	(*T).M, method set of *U: removed    -> pkg.U.M (also pkg.T.M): a method
//	                                        promoted from an embedded T
//	./sub.T: removed                     -> sub.T (a package under pkg)
//	example.com/other.T: ...             -> other.T
func changeName(pkg *types.Package, message string) (name string, also []string) {
	obj, _ := splitMessage(message)
	var embedder string
	if i := strings.Index(obj, ", method set of "); i >= 0 {
		embedder = obj[i+len(", method set of "):]
		obj = obj[:i]
	}
	qual, rest := qualify(pkg, stripTypeArgs(obj))
	rest = strings.NewReplacer("(", "", ")", "", "*", "").Replace(rest)
	name = qual + "." + rest
	if embedder != "" {
		u := strings.TrimPrefix(stripTypeArgs(embedder), "*")
		if i := strings.LastIndex(rest, "."); i >= 0 {
			also = []string{name}
			name = path.Base(pkg.Path()) + "." + u + rest[i:]
		}
	}
	return name, also
}

// qualify splits an object string into the package name to write before
// it (the last element of its package's path) and the rest.
func qualify(pkg *types.Package, obj string) (qual, rest string) {
	slash := strings.LastIndex(obj, "/")
	if slash < 0 {
		return path.Base(pkg.Path()), obj
	}
	// "./sub.T", "example.com/other.(*T).M": the package's last path
	// element runs to the first dot after the last slash.
	tail := obj[slash+1:]
	dot := strings.Index(tail, ".")
	if dot < 0 {
		return path.Base(pkg.Path()), obj
	}
	return tail[:dot], tail[dot+1:]
}

// splitMessage splits "obj: what" at the first ": " outside brackets.
func splitMessage(message string) (obj, rest string) {
	depth := 0
	for i := 0; i < len(message); i++ {
		switch message[i] {
		case '[', '(', '{':
			depth++
		case ']', ')', '}':
			depth--
		case ':':
			if depth == 0 && strings.HasPrefix(message[i:], ": ") {
				return message[:i], message[i+2:]
			}
		}
	}
	return message, ""
}

// stripTypeArgs removes bracketed type arguments: "(*T[K, V]).M" -> "(*T).M".
func stripTypeArgs(s string) string {
	var b strings.Builder
	depth := 0
	for _, r := range s {
		switch {
		case r == '[':
			depth++
		case r == ']':
			depth--
		case depth == 0:
			b.WriteRune(r)
		}
	}
	return b.String()
}

// unreleasedSection returns the text of the CHANGELOG's Unreleased
// section: from its "## [Unreleased]" heading up to the next "## "
// heading. A section of a release (such as "## [0.1.0]") never counts.
func unreleasedSection(changelog string) (string, bool) {
	lines := strings.SplitAfter(changelog, "\n")
	start := -1
	for i, l := range lines {
		if !strings.HasPrefix(l, "## ") {
			continue
		}
		if start >= 0 {
			return strings.Join(lines[start:i], ""), true
		}
		heading := strings.ToLower(strings.TrimSpace(l[3:]))
		if strings.HasPrefix(heading, "[unreleased]") || strings.HasPrefix(heading, "unreleased") {
			start = i + 1
		}
	}
	if start < 0 {
		return "", false
	}
	return strings.Join(lines[start:], ""), true
}

// mentions reports whether text names name as a whole: not as part of a
// longer identifier or path ("xmanager.Manager", "manager.Managers",
// "manager.Manager.Webhooks" do not name manager.Manager; a trailing
// full stop or a backquote around it are fine).
func mentions(text, name string) bool {
	if name == "" {
		return false
	}
	for i := 0; ; {
		j := strings.Index(text[i:], name)
		if j < 0 {
			return false
		}
		start, end := i+j, i+j+len(name)
		before := start == 0 || !(isIdent(text[start-1]) || text[start-1] == '.' || text[start-1] == '/')
		after := end == len(text) || !(isIdent(text[end]) ||
			text[end] == '/' ||
			(text[end] == '.' && end+1 < len(text) && isIdent(text[end+1])))
		if before && after {
			return true
		}
		i = start + 1
	}
}

func isIdent(c byte) bool {
	return c == '_' || '0' <= c && c <= '9' || 'a' <= c && c <= 'z' || 'A' <= c && c <= 'Z' || c >= 0x80
}
