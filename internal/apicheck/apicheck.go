// Package apicheck finds the places where a package's exported API
// mentions a type from an internal package.
//
// Code outside a module cannot import the module's internal packages, so
// it cannot name their types: an exported struct field of such a type
// cannot be set, a function taking one cannot be called with anything but
// nil, an interface with a method using one cannot be implemented. The
// test of this package runs [Check] over every package of the module.
package apicheck

import (
	"go/token"
	"go/types"
	"strconv"
	"strings"
)

// A Violation is one place in an exported API that mentions an internal
// type.
type Violation struct {
	// Pos is the declaration that mentions the type: a field, method,
	// function, variable, constant, type or type parameter.
	Pos token.Pos
	// Where names that declaration, as in "workqueue.Options.Clock" or
	// "cache.NewX: parameter c".
	Where string
	// Type is the internal type, qualified by its package path.
	Type string
}

// IsInternal reports whether path is, or is under, an internal
// directory: "a/internal", "a/internal/b", "internal/b".
func IsInternal(path string) bool {
	return path == "internal" || strings.HasPrefix(path, "internal/") ||
		strings.HasSuffix(path, "/internal") || strings.Contains(path, "/internal/")
}

// Check returns the violations in the exported API of pkg: the types of
// exported package-level functions, variables and constants, exported
// type definitions and aliases, and, in every type of pkg that this API
// reaches (exported or not), the exported and embedded fields, the
// exported methods and the type parameters' constraints. Types of other
// packages are checked for their own path and type arguments, not their
// members: those packages are checked on their own.
//
// Check returns nothing for a package that is internal itself.
func Check(pkg *types.Package) []Violation {
	if IsInternal(pkg.Path()) {
		return nil
	}
	c := &checker{
		pkg:    pkg,
		named:  map[*types.TypeName]bool{},
		params: map[*types.TypeParam]bool{},
	}
	scope := pkg.Scope()
	for _, name := range scope.Names() {
		obj := scope.Lookup(name)
		if !obj.Exported() {
			continue
		}
		where := pkg.Name() + "." + name
		switch obj := obj.(type) {
		case *types.TypeName:
			if alias, ok := obj.Type().(*types.Alias); ok {
				c.alias(obj.Pos(), where, alias)
				continue
			}
			c.typ(obj.Pos(), where, obj.Type())
		case *types.Func:
			c.signature(obj.Pos(), where, obj.Signature())
		case *types.Var, *types.Const:
			c.typ(obj.Pos(), where, obj.Type())
		}
	}
	return c.found
}

type checker struct {
	pkg    *types.Package
	named  map[*types.TypeName]bool  // types of pkg whose members were walked
	params map[*types.TypeParam]bool // type parameters whose constraint was walked
	found  []Violation
}

func (c *checker) report(pos token.Pos, where string, obj *types.TypeName) {
	c.found = append(c.found, Violation{Pos: pos, Where: where, Type: obj.Pkg().Path() + "." + obj.Name()})
}

// typ checks t, found at pos and named where.
func (c *checker) typ(pos token.Pos, where string, t types.Type) {
	switch t := t.(type) {
	case nil, *types.Basic:
	case *types.Alias:
		c.alias(pos, where, t)
	case *types.Named:
		obj := t.Obj()
		if obj.Pkg() != nil && IsInternal(obj.Pkg().Path()) {
			c.report(pos, where, obj)
			return
		}
		for i := range t.TypeArgs().Len() {
			c.typ(pos, where, t.TypeArgs().At(i))
		}
		if obj.Pkg() == c.pkg {
			c.members(t.Origin())
		}
	case *types.Pointer:
		c.typ(pos, where, t.Elem())
	case *types.Slice:
		c.typ(pos, where, t.Elem())
	case *types.Array:
		c.typ(pos, where, t.Elem())
	case *types.Chan:
		c.typ(pos, where, t.Elem())
	case *types.Map:
		c.typ(pos, where, t.Key())
		c.typ(pos, where, t.Elem())
	case *types.Signature:
		c.signature(pos, where, t)
	case *types.Struct:
		for i := range t.NumFields() {
			f := t.Field(i)
			if f.Exported() || f.Embedded() {
				c.typ(f.Pos(), where+"."+f.Name(), f.Type())
			}
		}
	case *types.Interface:
		for i := range t.NumExplicitMethods() {
			m := t.ExplicitMethod(i)
			if m.Exported() {
				c.signature(m.Pos(), where+"."+m.Name(), m.Signature())
			}
		}
		for i := range t.NumEmbeddeds() {
			c.typ(pos, where, t.EmbeddedType(i))
		}
	case *types.Union:
		for i := range t.Len() {
			c.typ(pos, where, t.Term(i).Type())
		}
	case *types.TypeParam:
		if !c.params[t] {
			c.params[t] = true
			c.typ(t.Obj().Pos(), where+" type parameter "+t.Obj().Name(), t.Constraint())
		}
	case *types.Tuple:
		for i := range t.Len() {
			c.typ(pos, where, t.At(i).Type())
		}
	}
}

// alias checks an alias: the package that declares it, its type
// arguments and the type it stands for.
func (c *checker) alias(pos token.Pos, where string, a *types.Alias) {
	obj := a.Obj()
	if obj.Pkg() != nil && IsInternal(obj.Pkg().Path()) {
		c.report(pos, where, obj)
		return
	}
	for i := range a.TypeArgs().Len() {
		c.typ(pos, where, a.TypeArgs().At(i))
	}
	if tps := a.TypeParams(); tps != nil {
		for i := range tps.Len() {
			c.typ(pos, where, tps.At(i))
		}
	}
	c.typ(pos, where, a.Rhs())
}

// members checks, once, the underlying type, type parameters and exported
// methods of a type of the checked package.
func (c *checker) members(n *types.Named) {
	obj := n.Obj()
	if c.named[obj] {
		return
	}
	c.named[obj] = true
	where := c.pkg.Name() + "." + obj.Name()
	if tps := n.TypeParams(); tps != nil {
		for i := range tps.Len() {
			c.typ(obj.Pos(), where, tps.At(i))
		}
	}
	c.typ(obj.Pos(), where, n.Underlying())
	for i := range n.NumMethods() {
		m := n.Method(i)
		if m.Exported() {
			c.signature(m.Pos(), where+"."+m.Name(), m.Signature())
		}
	}
}

// signature checks the type parameters, parameters and results of a
// function or method; the receiver is the type being checked already.
func (c *checker) signature(pos token.Pos, where string, sig *types.Signature) {
	if tps := sig.TypeParams(); tps != nil {
		for i := range tps.Len() {
			c.typ(pos, where, tps.At(i))
		}
	}
	for i := range sig.Params().Len() {
		p := sig.Params().At(i)
		c.typ(pos, where+": parameter "+varName(p, i), p.Type())
	}
	for i := range sig.Results().Len() {
		r := sig.Results().At(i)
		c.typ(pos, where+": result "+varName(r, i), r.Type())
	}
}

func varName(v *types.Var, i int) string {
	if v.Name() != "" && v.Name() != "_" {
		return v.Name()
	}
	return "#" + strconv.Itoa(i)
}
