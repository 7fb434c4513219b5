package cachetest

import (
	"errors"
	"fmt"
	"slices"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/cache"
)

// Object is the element type the kit stores: an API-like object with a
// namespace, a name, labels, and a version to tell writes apart.
type Object struct {
	Namespace, Name string
	Labels          map[string]string
	Version         int
}

// GetNamespace returns o.Namespace.
func (o *Object) GetNamespace() string { return o.Namespace }

// GetName returns o.Name.
func (o *Object) GetName() string { return o.Name }

// GetLabels returns o.Labels.
func (o *Object) GetLabels() map[string]string { return o.Labels }

// key is MetaNamespaceKey's result for o.
func (o *Object) key() string {
	if o.Namespace == "" {
		return o.Name
	}
	return o.Namespace + "/" + o.Name
}

// Indexed is a store with index queries: what [RunIndexer] checks.
type Indexed interface {
	cache.Indexer[*Object]
	cache.Writer[*Object]
}

// NewStore returns a fresh, empty store.
type NewStore func() cache.ReadWriter[*Object]

// NewIndexed returns a fresh, empty store with the given custom indexes.
type NewIndexed func(indexers cache.Indexers[*Object]) Indexed

// RunStore runs the store cases against stores made by newStore, one
// subtest per case.
func RunStore(t *testing.T, newStore NewStore) {
	t.Helper()
	for _, c := range storeCases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(newStore()); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckStore runs the store cases against stores made by newStore and
// returns every violation joined, or nil.
func CheckStore(newStore NewStore) error {
	var errs []error
	for _, c := range storeCases {
		if err := c.run(newStore()); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// RunIndexer runs the store cases and the index cases against stores
// made by newIndexed, one subtest per case.
func RunIndexer(t *testing.T, newIndexed NewIndexed) {
	t.Helper()
	RunStore(t, func() cache.ReadWriter[*Object] { return newIndexed(nil) })
	for _, c := range indexCases {
		t.Run(c.name, func(t *testing.T) {
			if err := c.run(newIndexed); err != nil {
				t.Error(err)
			}
		})
	}
}

// CheckIndexer runs the store cases and the index cases against stores
// made by newIndexed and returns every violation joined, or nil.
func CheckIndexer(newIndexed NewIndexed) error {
	errs := []error{CheckStore(func() cache.ReadWriter[*Object] { return newIndexed(nil) })}
	for _, c := range indexCases {
		if err := c.run(newIndexed); err != nil {
			errs = append(errs, fmt.Errorf("%s: %w", c.name, err))
		}
	}
	return errors.Join(errs...)
}

// obj builds an Object from "ns/name" (or "name"), a version and
// "k=v" labels.
func obj(key string, version int, lbls ...string) *Object {
	o := &Object{Version: version}
	if ns, name, ok := strings.Cut(key, "/"); ok {
		o.Namespace, o.Name = ns, name
	} else {
		o.Name = key
	}
	if len(lbls) > 0 {
		o.Labels = map[string]string{}
		for _, l := range lbls {
			k, v, _ := strings.Cut(l, "=")
			o.Labels[k] = v
		}
	}
	return o
}

// An op is one write; it returns the writer's error.
type op func(w cache.Writer[*Object]) error

func add(o *Object) op    { return func(w cache.Writer[*Object]) error { return w.Add(o) } }
func update(o *Object) op { return func(w cache.Writer[*Object]) error { return w.Update(o) } }
func del(o *Object) op    { return func(w cache.Writer[*Object]) error { return w.Delete(o) } }
func replace(os ...*Object) op {
	return func(w cache.Writer[*Object]) error { return w.Replace(os) }
}

// failing wraps an op that must fail with an error matching target.
func failing(o op, target error) op {
	return func(w cache.Writer[*Object]) error {
		err := o(w)
		switch {
		case err == nil:
			return fmt.Errorf("write succeeded, want an error matching %v", target)
		case !errors.Is(err, target):
			return fmt.Errorf("write failed with %v, want an error matching %v", err, target)
		}
		return nil
	}
}

// applyOps runs ops, reporting which one failed.
func applyOps(w cache.Writer[*Object], ops []op) error {
	for i, o := range ops {
		if err := o(w); err != nil {
			return fmt.Errorf("write %d: %w", i, err)
		}
	}
	return nil
}

// A check inspects a store and names the rule it checks in its errors.
type check[S any] func(s S) error

func violation(rule, format string, args ...any) error {
	return fmt.Errorf("rule %q: %s", rule, fmt.Sprintf(format, args...))
}

// has checks that Get(key) returns an object with the key and version.
func has(key string, version int) check[cache.Reader[*Object]] {
	return func(s cache.Reader[*Object]) error {
		o, ok := s.Get(key)
		switch {
		case !ok:
			return violation("Get returns what was written", "Get(%q) found nothing, want version %d", key, version)
		case o == nil || o.key() != key || o.Version != version:
			return violation("Get returns what was written", "Get(%q) = %+v, want version %d", key, o, version)
		}
		return nil
	}
}

// missing checks that Get(key) finds nothing.
func missing(key string) check[cache.Reader[*Object]] {
	return func(s cache.Reader[*Object]) error {
		if o, ok := s.Get(key); ok {
			return violation("Get does not return deleted objects", "Get(%q) = %+v, want nothing", key, o)
		}
		return nil
	}
}

// keys checks that ListKeys, List and Len agree on exactly want.
func keys(want ...string) check[cache.Reader[*Object]] {
	slices.Sort(want)
	return func(s cache.Reader[*Object]) error {
		var errs []error
		got := s.ListKeys()
		slices.Sort(got)
		if !slices.Equal(got, want) {
			errs = append(errs, violation("ListKeys lists every key once", "ListKeys = %q, want %q", got, want))
		}
		var listed []string
		for _, o := range s.List() {
			listed = append(listed, o.key())
		}
		slices.Sort(listed)
		if !slices.Equal(listed, want) {
			errs = append(errs, violation("List lists every object once", "keys of List = %q, want %q", listed, want))
		}
		if n := s.Len(); n != len(want) {
			errs = append(errs, violation("Len counts the objects", "Len = %d, want %d", n, len(want)))
		}
		for _, k := range want {
			if _, ok := s.Get(k); !ok {
				errs = append(errs, violation("every listed key can be read", "Get(%q) found nothing", k))
			}
		}
		return errors.Join(errs...)
	}
}

// freshSlices checks that the slices readers return are the caller's:
// clobbering them does not change the store.
func freshSlices(want ...string) check[cache.Reader[*Object]] {
	return func(s cache.Reader[*Object]) error {
		l := s.List()
		clear(l)
		k := s.ListKeys()
		for i := range k {
			k[i] = "clobbered"
		}
		if err := keys(want...)(s); err != nil {
			return violation("returned slices belong to the caller", "after clobbering List and ListKeys results: %v", err)
		}
		return nil
	}
}

type storeCase struct {
	name   string
	ops    []op
	checks []check[cache.Reader[*Object]]
}

func (c storeCase) run(s cache.ReadWriter[*Object]) error {
	if err := applyOps(s, c.ops); err != nil {
		return err
	}
	var errs []error
	for _, ch := range c.checks {
		errs = append(errs, ch(s))
	}
	return errors.Join(errs...)
}

type checks = []check[cache.Reader[*Object]]

var storeCases = []storeCase{
	{"empty", nil, checks{keys(), missing("a/x")}},
	{"add then get", []op{add(obj("a/x", 1))}, checks{has("a/x", 1), keys("a/x")}},
	{"cluster-scoped key is the name", []op{add(obj("node-1", 1))}, checks{has("node-1", 1), keys("node-1")}},
	{"update replaces", []op{add(obj("a/x", 1)), update(obj("a/x", 2))}, checks{has("a/x", 2), keys("a/x")}},
	{"add of a stored key replaces", []op{add(obj("a/x", 1)), add(obj("a/x", 2))}, checks{has("a/x", 2), keys("a/x")}},
	{"update of a new key adds", []op{update(obj("a/x", 1))}, checks{has("a/x", 1), keys("a/x")}},
	{"same name in two namespaces", []op{add(obj("a/x", 1)), add(obj("b/x", 2)), add(obj("x", 3))},
		checks{has("a/x", 1), has("b/x", 2), has("x", 3), keys("a/x", "b/x", "x")}},
	{"delete removes", []op{add(obj("a/x", 1)), add(obj("a/y", 1)), del(obj("a/x", 1))},
		checks{missing("a/x"), has("a/y", 1), keys("a/y")}},
	{"delete uses only the key", []op{add(obj("a/x", 1)), del(obj("a/x", 9))}, checks{missing("a/x"), keys()}},
	{"delete of an absent key is a no-op", []op{add(obj("a/x", 1)), del(obj("a/y", 1))}, checks{has("a/x", 1), keys("a/x")}},
	{"add after delete", []op{add(obj("a/x", 1)), del(obj("a/x", 1)), add(obj("a/x", 3))}, checks{has("a/x", 3), keys("a/x")}},
	{"replace sets exactly the list", []op{add(obj("a/x", 1)), add(obj("a/y", 1)), replace(obj("a/y", 2), obj("a/z", 2))},
		checks{missing("a/x"), has("a/y", 2), has("a/z", 2), keys("a/y", "a/z")}},
	{"replace with nothing empties", []op{add(obj("a/x", 1)), replace()}, checks{keys(), missing("a/x")}},
	{"replace: the last of a key wins", []op{replace(obj("a/x", 1), obj("a/x", 2))}, checks{has("a/x", 2), keys("a/x")}},
	{"writes after replace", []op{replace(obj("a/x", 1), obj("a/y", 1)), del(obj("a/x", 1)), add(obj("a/w", 1))},
		checks{has("a/w", 1), has("a/y", 1), keys("a/w", "a/y")}},
	{"returned slices belong to the caller", []op{add(obj("a/x", 1)), add(obj("a/y", 1))}, checks{freshSlices("a/x", "a/y")}},
	{"a failed add changes nothing", []op{add(obj("a/x", 1)), failing(add(obj("a/", 2)), cache.ErrEmptyKey)},
		checks{has("a/x", 1), keys("a/x")}},
	{"a failed replace changes nothing", []op{add(obj("a/x", 1)), failing(replace(obj("a/y", 1), obj("", 1)), cache.ErrEmptyKey)},
		checks{has("a/x", 1), keys("a/x")}},
	{"many objects", manyOps(), checks{keys(manyKeys()...)}},
}

// manyOps adds 100 objects and deletes every third, exercising slot reuse.
func manyOps() []op {
	var ops []op
	for i := range 100 {
		ops = append(ops, add(obj(fmt.Sprintf("ns%d/o%d", i%3, i), 1, "i="+fmt.Sprint(i))))
	}
	for i := 0; i < 100; i += 3 {
		ops = append(ops, del(obj(fmt.Sprintf("ns%d/o%d", i%3, i), 1)))
	}
	for i := 0; i < 100; i += 6 {
		ops = append(ops, add(obj(fmt.Sprintf("ns%d/o%d", i%3, i), 2)))
	}
	return ops
}

func manyKeys() []string {
	var ks []string
	for i := range 100 {
		if i%3 != 0 || i%6 == 0 {
			ks = append(ks, fmt.Sprintf("ns%d/o%d", i%3, i))
		}
	}
	return ks
}

// sortedKeys returns the keys of objs, sorted.
func sortedKeys(objs []*Object) []string {
	out := make([]string, len(objs))
	for i, o := range objs {
		out[i] = o.key()
	}
	slices.Sort(out)
	return out
}

func sortedCopy(s []string) []string {
	s = slices.Clone(s)
	slices.Sort(s)
	return s
}
