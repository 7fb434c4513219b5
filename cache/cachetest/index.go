package cachetest

import (
	"errors"
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/cache"
)

// The custom indexes the index cases use.
var testIndexers = cache.Indexers[*Object]{
	// tier: the "tier" label, if any.
	"tier": func(o *Object) ([]string, error) {
		if v, ok := o.Labels["tier"]; ok {
			return []string{v}, nil
		}
		return nil, nil
	},
	// letters: every letter of the name, a multi-valued index.
	"letters": func(o *Object) ([]string, error) {
		var out []string
		for _, r := range o.Name {
			out = append(out, string(r))
		}
		return out, nil
	},
}

// byIndex checks ByIndex and IndexKeys for value in index name.
func byIndex(name, value string, want ...string) check[Indexed] {
	want = sortedCopy(want)
	return func(s Indexed) error {
		var errs []error
		objs, err := s.ByIndex(name, value)
		if err != nil {
			return violation("ByIndex answers for a known index", "ByIndex(%q, %q): %v", name, value, err)
		}
		if got := sortedKeys(objs); !slices.Equal(got, want) {
			errs = append(errs, violation("ByIndex returns the objects filed under the value, once each", "ByIndex(%q, %q) = %q, want %q", name, value, got, want))
		}
		ks, err := s.IndexKeys(name, value)
		if err != nil {
			return violation("IndexKeys answers for a known index", "IndexKeys(%q, %q): %v", name, value, err)
		}
		if got := sortedCopy(ks); !slices.Equal(got, want) {
			errs = append(errs, violation("IndexKeys returns the keys filed under the value, once each", "IndexKeys(%q, %q) = %q, want %q", name, value, got, want))
		}
		return errors.Join(errs...)
	}
}

// values checks ListIndexFuncValues.
func values(name string, want ...string) check[Indexed] {
	want = sortedCopy(want)
	return func(s Indexed) error {
		if got := sortedCopy(s.ListIndexFuncValues(name)); !slices.Equal(got, want) {
			return violation("ListIndexFuncValues lists the values that hold objects", "ListIndexFuncValues(%q) = %q, want %q", name, got, want)
		}
		return nil
	}
}

// indexOf checks Index with a probe object.
func indexOf(name string, probe *Object, want ...string) check[Indexed] {
	want = sortedCopy(want)
	return func(s Indexed) error {
		objs, err := s.Index(name, probe)
		if err != nil {
			return violation("Index answers for a known index", "Index(%q, %+v): %v", name, probe, err)
		}
		if got := sortedKeys(objs); !slices.Equal(got, want) {
			return violation("Index returns the objects sharing a value with the probe, once each", "Index(%q, %s) = %q, want %q", name, probe.key(), got, want)
		}
		return nil
	}
}

// noSuchIndex checks that every query of an unknown index fails.
func noSuchIndex(name string) check[Indexed] {
	return func(s Indexed) error {
		const rule = "queries of an unknown index fail with ErrNoSuchIndex"
		var errs []error
		if _, err := s.ByIndex(name, "v"); !errors.Is(err, cache.ErrNoSuchIndex) {
			errs = append(errs, violation(rule, "ByIndex(%q): %v", name, err))
		}
		if _, err := s.IndexKeys(name, "v"); !errors.Is(err, cache.ErrNoSuchIndex) {
			errs = append(errs, violation(rule, "IndexKeys(%q): %v", name, err))
		}
		if _, err := s.Index(name, obj("a/x", 1)); !errors.Is(err, cache.ErrNoSuchIndex) {
			errs = append(errs, violation(rule, "Index(%q): %v", name, err))
		}
		if v := s.ListIndexFuncValues(name); v != nil {
			errs = append(errs, violation("ListIndexFuncValues of an unknown index is nil", "ListIndexFuncValues(%q) = %q", name, v))
		}
		return errors.Join(errs...)
	}
}

// selects checks Select(namespace, selector) against want, and against a
// scan of List with selector.Matches. A selector of "<nil>" passes nil,
// "<nothing>" labels.Nothing().
func selects(namespace, selector string, want ...string) check[Indexed] {
	want = sortedCopy(want)
	return func(s Indexed) error {
		var sel labels.Selector
		switch selector {
		case "<nil>":
		case "<nothing>":
			sel = labels.Nothing()
		default:
			var err error
			if sel, err = labels.Parse(selector); err != nil {
				return fmt.Errorf("bad selector in case: %v", err)
			}
		}
		objs, err := s.Select(namespace, sel)
		if err != nil {
			return violation("Select answers label selectors", "Select(%q, %q): %v", namespace, selector, err)
		}
		got := sortedKeys(objs)
		var errs []error
		if !slices.Equal(got, want) {
			errs = append(errs, violation("Select returns the matching objects, once each", "Select(%q, %q) = %q, want %q", namespace, selector, got, want))
		}
		var scanned []string
		for _, o := range s.List() {
			if (namespace == "" || o.Namespace == namespace) && (sel == nil || sel.Matches(labels.Set(o.Labels))) {
				scanned = append(scanned, o.key())
			}
		}
		slices.Sort(scanned)
		if !slices.Equal(got, scanned) {
			errs = append(errs, violation("Select agrees with a scan of List", "Select(%q, %q) = %q, scan = %q", namespace, selector, got, scanned))
		}
		return errors.Join(errs...)
	}
}

// reading adapts a Reader check.
func reading(c check[cache.Reader[*Object]]) check[Indexed] {
	return func(s Indexed) error { return c(s) }
}

type indexCase struct {
	name   string
	ops    []op
	checks []check[Indexed]
}

func (c indexCase) run(newIndexed NewIndexed) error {
	s := newIndexed(testIndexers)
	if err := applyOps(s, c.ops); err != nil {
		return err
	}
	var errs []error
	for _, ch := range c.checks {
		errs = append(errs, ch(s))
	}
	return errors.Join(errs...)
}

type ichecks = []check[Indexed]

// corpus is a small set of labelled objects for the selector cases.
func corpus() []op {
	return []op{
		add(obj("a/web-1", 1, "app=web", "tier=frontend", "version=1")),
		add(obj("a/web-2", 1, "app=web", "tier=frontend", "version=2")),
		add(obj("a/db-1", 1, "app=db", "tier=backend", "version=1")),
		add(obj("b/web-1", 1, "app=web", "tier=frontend", "version=3")),
		add(obj("b/cache-1", 1, "app=cache", "tier=backend")),
		add(obj("b/bare", 1)),
		add(obj("c/empty-value", 1, "app=", "tier=backend")),
		add(obj("node-1", 1, "role=worker")),
	}
}

var indexCases = []indexCase{
	{"namespace index is built in",
		[]op{add(obj("a/x", 1)), add(obj("a/y", 1)), add(obj("b/z", 1)), add(obj("n", 1))},
		ichecks{
			byIndex(cache.NamespaceIndex, "a", "a/x", "a/y"),
			byIndex(cache.NamespaceIndex, "b", "b/z"),
			byIndex(cache.NamespaceIndex, "", "n"),
			byIndex(cache.NamespaceIndex, "zz"),
			values(cache.NamespaceIndex, "", "a", "b"),
			indexOf(cache.NamespaceIndex, obj("a/probe", 1), "a/x", "a/y"),
		}},
	{"custom index",
		[]op{add(obj("a/x", 1, "tier=web")), add(obj("a/y", 1, "tier=db")), add(obj("b/z", 1, "tier=web")), add(obj("b/none", 1))},
		ichecks{
			byIndex("tier", "web", "a/x", "b/z"),
			byIndex("tier", "db", "a/y"),
			byIndex("tier", "cache"),
			values("tier", "db", "web"),
			indexOf("tier", obj("q/probe", 1, "tier=web"), "a/x", "b/z"),
			indexOf("tier", obj("q/probe", 1)),
		}},
	{"multi-valued index",
		[]op{add(obj("n/ab", 1)), add(obj("n/bc", 1)), add(obj("n/cd", 1)), add(obj("n/aa", 1))},
		ichecks{
			byIndex("letters", "a", "n/ab", "n/aa"),
			byIndex("letters", "b", "n/ab", "n/bc"),
			values("letters", "a", "b", "c", "d"),
			indexOf("letters", obj("x/ad", 1), "n/ab", "n/aa", "n/cd"),
			indexOf("letters", obj("x/abc", 1), "n/ab", "n/aa", "n/bc", "n/cd"),
		}},
	{"indexes follow updates",
		[]op{add(obj("a/x", 1, "tier=web")), add(obj("n/ab", 1)), update(obj("a/x", 2, "tier=db")), update(obj("n/ab", 2))},
		ichecks{
			byIndex("tier", "web"),
			byIndex("tier", "db", "a/x"),
			values("tier", "db"),
			byIndex("letters", "a", "n/ab"),
			selects("", "tier=web"),
			selects("", "tier=db", "a/x"),
		}},
	{"indexes follow deletes",
		[]op{add(obj("a/x", 1, "tier=web")), add(obj("b/y", 1, "tier=web")), del(obj("a/x", 1))},
		ichecks{
			byIndex("tier", "web", "b/y"),
			values("tier", "web"),
			values(cache.NamespaceIndex, "b"),
			byIndex(cache.NamespaceIndex, "a"),
			selects("", "tier=web", "b/y"),
			selects("a", ""),
		}},
	{"indexes follow replace",
		[]op{add(obj("a/x", 1, "tier=web")), replace(obj("b/y", 1, "tier=db"), obj("b/z", 1))},
		ichecks{
			byIndex("tier", "web"),
			byIndex("tier", "db", "b/y"),
			values("tier", "db"),
			values(cache.NamespaceIndex, "b"),
			selects("", "tier", "b/y"),
			reading(keys("b/y", "b/z")),
		}},
	{"unknown index", nil, ichecks{noSuchIndex("nope")}},
	{"select", corpus(), ichecks{
		selects("", "<nil>", "a/web-1", "a/web-2", "a/db-1", "b/web-1", "b/cache-1", "b/bare", "c/empty-value", "node-1"),
		selects("", "", "a/web-1", "a/web-2", "a/db-1", "b/web-1", "b/cache-1", "b/bare", "c/empty-value", "node-1"),
		selects("", "<nothing>"),
		selects("a", "<nil>", "a/web-1", "a/web-2", "a/db-1"),
		selects("zz", "<nil>"),
		selects("", "app=web", "a/web-1", "a/web-2", "b/web-1"),
		selects("", "app==web", "a/web-1", "a/web-2", "b/web-1"),
		selects("a", "app=web", "a/web-1", "a/web-2"),
		selects("", "app=web,tier=frontend,version=2", "a/web-2"),
		selects("", "app in (web,db)", "a/web-1", "a/web-2", "a/db-1", "b/web-1"),
		selects("", "app in (db,nosuch)", "a/db-1"),
		selects("", "app in (nosuch)"),
		selects("", "app=nosuch,tier=frontend"),
		selects("", "app notin (web)", "a/db-1", "b/cache-1", "b/bare", "c/empty-value", "node-1"),
		selects("", "app!=web", "a/db-1", "b/cache-1", "b/bare", "c/empty-value", "node-1"),
		selects("", "app", "a/web-1", "a/web-2", "a/db-1", "b/web-1", "b/cache-1", "c/empty-value"),
		selects("", "!app", "b/bare", "node-1"),
		selects("", "app=", "c/empty-value"),
		selects("", "tier=backend,app!=db", "b/cache-1", "c/empty-value"),
		selects("b", "tier=backend", "b/cache-1"),
		selects("", "version>1", "a/web-2", "b/web-1"),
		selects("", "version<2,app=web", "a/web-1"),
		selects("", "role=worker", "node-1"),
		selects("", "app,!version", "b/cache-1", "c/empty-value"),
	}},
	{"select follows label changes", append(corpus(),
		update(obj("a/web-1", 2, "app=api", "tier=frontend")),
		update(obj("b/bare", 2, "app=web")),
		del(obj("b/web-1", 1)),
	), ichecks{
		selects("", "app=web", "a/web-2", "b/bare"),
		selects("", "app=api", "a/web-1"),
		selects("", "version", "a/web-2", "a/db-1"),
		selects("", "tier=frontend", "a/web-1", "a/web-2"),
	}},
}
