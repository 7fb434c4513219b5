package main

import (
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"testing"
)

const mod = "github.com/loom-k8s/loom"

// pkg type-checks one package from source; it may import only packages
// given in deps.
func pkg(t *testing.T, path, src string, deps ...*types.Package) *types.Package {
	t.Helper()
	fset := token.NewFileSet()
	f, err := parser.ParseFile(fset, filepath.Base(path)+".go", src, 0)
	if err != nil {
		t.Fatal(err)
	}
	conf := types.Config{Importer: depImporter(deps)}
	p, err := conf.Check(path, fset, []*ast.File{f}, nil)
	if err != nil {
		t.Fatal(err)
	}
	return p
}

type depImporter []*types.Package

func (d depImporter) Import(path string) (*types.Package, error) {
	for _, p := range d {
		if p.Path() == path {
			return p, nil
		}
	}
	return nil, os.ErrNotExist
}

// changelog returns a CHANGELOG whose Unreleased section holds unreleased
// and whose 0.1.0 section holds released.
func changelog(unreleased, released string) string {
	return "# Changelog\n\nSome text naming workqueue.Everything before the sections.\n\n" +
		"## [Unreleased]\n\n### Changed (incompatible)\n" + unreleased + "\n" +
		"## [0.1.0] - 2026-01-01\n\n### Added\n" + released + "\n"
}

const oldQueue = `package workqueue

func New() *Queue { return nil }
func NewRateLimited() *Queue { return nil }

type Queue struct{ n int }

func (q *Queue) Add(item int) {}
func (q Queue) Len() int { return q.n }

type Options struct {
	Workers int
	Name    string
}

type Cache[K comparable, V any] struct{}

func (c *Cache[K, V]) Get(k K) V { var v V; return v }
func (c *Cache[K, V]) Del(k K)   {}
`

// newQueue is oldQueue without NewRateLimited.
var newQueue = strings.Replace(oldQueue, "func NewRateLimited() *Queue { return nil }\n", "", 1)

func changeNames(cs []Change) []string {
	var ns []string
	for _, c := range cs {
		ns = append(ns, c.Name)
	}
	slices.Sort(ns)
	return ns
}

func TestRemovedFunctionNotNamedFails(t *testing.T) {
	old := pkg(t, mod+"/workqueue", oldQueue)
	cur := pkg(t, mod+"/workqueue", newQueue)
	for _, cl := range []string{
		changelog("- `manager.Manager.Webhooks` takes a context.\n", ""),
		changelog("- `workqueue.NewRateLimitedQueue` is gone.\n- xworkqueue.NewRateLimited.\n- workqueue.NewRateLimited.Foo\n", ""),
		"# Changelog\n\nworkqueue.NewRateLimited, but no Unreleased section.\n",
	} {
		r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, cl)
		if r.OK() {
			t.Fatalf("the check passes with a removed function the CHANGELOG does not name:\n%s", cl)
		}
		if got := changeNames(r.Unnamed()); !slices.Equal(got, []string{"workqueue.NewRateLimited"}) {
			t.Errorf("unnamed: %q, want [workqueue.NewRateLimited]", got)
		}
		c := r.Unnamed()[0]
		if c.Message != "NewRateLimited: removed" || c.Compatible || c.Package != mod+"/workqueue" {
			t.Errorf("change: %+v", c)
		}
		var out strings.Builder
		if err := r.Write(&out, "v0.1.0"); err != nil {
			t.Fatal(err)
		}
		for _, want := range []string{
			"- `workqueue.NewRateLimited` removed\n",
			"apicompat: 1 packages against v0.1.0: 1 incompatible (1 not named in CHANGELOG Unreleased), 0 compatible\n",
		} {
			if !strings.Contains(out.String(), want) {
				t.Errorf("the report lacks %q:\n%s", want, out.String())
			}
		}
	}
}

func TestRemovedFunctionNamedPasses(t *testing.T) {
	old := pkg(t, mod+"/workqueue", oldQueue)
	cur := pkg(t, mod+"/workqueue", newQueue)
	for _, line := range []string{
		"- `workqueue.NewRateLimited` removed: use `workqueue.New` with a limiter.",
		"- workqueue.NewRateLimited.",
		"- Removed workqueue.NewRateLimited",
	} {
		r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, changelog(line, ""))
		if !r.OK() {
			t.Errorf("the check fails though the Unreleased section says %q: %+v", line, r.Unnamed())
		}
		if got := r.Summary("v0.1.0"); got != "apicompat: 1 packages against v0.1.0: 1 incompatible (all named in CHANGELOG Unreleased), 0 compatible" {
			t.Errorf("summary: %s", got)
		}
	}

	// A released section naming it does not count: that release had it.
	r := Compare(mod, []*types.Package{old}, []*types.Package{cur},
		changelog("- `manager.Manager.Webhooks` takes a context.", "- `workqueue.NewRateLimited`."))
	if r.OK() {
		t.Error("the check passes on a removal named only in the 0.1.0 section")
	}
}

func TestMethodAndFieldNames(t *testing.T) {
	old := pkg(t, mod+"/workqueue", oldQueue)
	src := strings.NewReplacer(
		"func (q *Queue) Add(item int) {}", "func (q *Queue) Add(item string) {}",
		"func (q Queue) Len() int { return q.n }\n", "",
		"Workers int", "Workers string",
		"func (c *Cache[K, V]) Del(k K)   {}\n", "",
	).Replace(oldQueue)
	cur := pkg(t, mod+"/workqueue", src)
	r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, changelog("", ""))
	want := []string{"workqueue.Cache.Del", "workqueue.Options.Workers", "workqueue.Queue.Add", "workqueue.Queue.Len"}
	if got := changeNames(r.Unnamed()); !slices.Equal(got, want) {
		t.Fatalf("unnamed: %q, want %q (changes: %+v)", got, want, r.Changes)
	}
	var msgs []string
	for _, c := range r.Unnamed() {
		msgs = append(msgs, c.Message)
	}
	if !slices.Contains(msgs, "(*Queue).Add: changed from func(item int) to func(item string)") &&
		!slices.Contains(msgs, "(*Queue).Add: changed from func(int) to func(string)") {
		t.Errorf("no change message for (*Queue).Add in %q", msgs)
	}

	cl := changelog("- `workqueue.Queue.Add` takes a string.\n- `workqueue.Queue.Len`: removed.\n"+
		"- workqueue.Options.Workers is a string.\n- `workqueue.Cache.Del` removed.\n", "")
	if r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, cl); !r.OK() {
		t.Errorf("the check fails with every change named: %+v", r.Unnamed())
	}
	// Naming the type does not name its members, nor the other way round.
	cl = changelog("- `workqueue.Queue` and `workqueue.Options` changed; `workqueue.Cache.DelAll`.\n", "")
	if r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, cl); len(r.Unnamed()) != 4 {
		t.Errorf("unnamed: %q, want all four", changeNames(r.Unnamed()))
	}
}

func TestChangeName(t *testing.T) {
	p := types.NewPackage(mod+"/webhook", "webhook")
	for msg, want := range map[string]string{
		"Foo: removed":    "webhook.Foo",
		"(*T).M: removed": "webhook.T.M",
		"(T).M: removed":  "webhook.T.M",
		"T.M: removed":    "webhook.T.M",
		"(*T[K, V]).M: changed from func(K) to func(V)":              "webhook.T.M",
		"ServerOptions.Foo: changed from int to string":              "webhook.ServerOptions.Foo",
		"./conversion.Handler: removed":                              "conversion.Handler",
		"github.com/loom-k8s/loom/cache.(*Informer).Relist: removed": "cache.Informer.Relist",
		"(*inner).M, method set of *Server: removed":                 "webhook.Server.M",
	} {
		if got, _ := changeName(p, msg); got != want {
			t.Errorf("changeName(%q) = %q, want %q", msg, got, want)
		}
	}
	if _, also := changeName(p, "(*inner).M, method set of *Server: removed"); !slices.Equal(also, []string{"webhook.inner.M"}) {
		t.Errorf("also = %q", also)
	}
}

func TestAddedFunctionIsCompatible(t *testing.T) {
	old := pkg(t, mod+"/workqueue", oldQueue)
	cur := pkg(t, mod+"/workqueue", oldQueue+"\nfunc NewSharded(n int) []*Queue { return nil }\n")
	for _, cl := range []string{"", changelog("", "")} {
		r := Compare(mod, []*types.Package{old}, []*types.Package{cur}, cl)
		if !r.OK() || len(r.Incompatible()) != 0 {
			t.Errorf("an added function fails the check: %+v", r.Changes)
		}
		if len(r.Changes) != 1 || !r.Changes[0].Compatible || r.Changes[0].Name != "workqueue.NewSharded" || r.Changes[0].Message != "NewSharded: added" {
			t.Errorf("changes: %+v", r.Changes)
		}
		var out strings.Builder
		if err := r.Write(&out, "v0.1.0"); err != nil {
			t.Fatal(err)
		}
		if want := "compatible:   " + mod + "/workqueue: NewSharded: added\n"; !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
		if want := "0 incompatible (all named in CHANGELOG Unreleased), 1 compatible"; !strings.Contains(out.String(), want) {
			t.Errorf("the report lacks %q:\n%s", want, out.String())
		}
	}
}

func TestRemovedPackage(t *testing.T) {
	queue := pkg(t, mod+"/workqueue", oldQueue)
	shard := pkg(t, mod+"/shard", "package shard\n\nfunc Owner(key string) int { return 0 }\n")
	tracing := pkg(t, mod+"/tracing", "package tracing\n\nfunc Start() {}\n")
	old := []*types.Package{queue, shard}
	cur := []*types.Package{queue, tracing}

	r := Compare(mod, old, cur, changelog("- Sharding (`loom shard`) reworked; see sharding docs.\n", "- `shard`: owners.\n"))
	if r.OK() {
		t.Fatal("the check passes with a removed package the Unreleased section does not name")
	}
	if got := r.Unnamed(); len(got) != 1 || got[0].Name != "shard" || got[0].Message != "package "+mod+"/shard: removed" {
		t.Errorf("unnamed: %+v", got)
	}
	if r.Packages != 3 {
		t.Errorf("Packages = %d, want 3", r.Packages)
	}
	var added []string
	for _, c := range r.Changes {
		if c.Compatible {
			added = append(added, c.Name)
		}
	}
	if !slices.Equal(added, []string{"tracing"}) {
		t.Errorf("compatible: %q, want the added package tracing", added)
	}

	for _, line := range []string{
		"- `shard` removed: use `manager.Options.Shards`.",
		"- The package shard is gone.",
		"- " + mod + "/shard is gone.",
	} {
		if r := Compare(mod, old, cur, changelog(line, "")); !r.OK() {
			t.Errorf("the check fails with %q: %+v", line, r.Unnamed())
		}
	}
}

func TestUnreleasedSection(t *testing.T) {
	for _, tc := range []struct{ in, want string }{
		{"# C\n\n## [Unreleased]\n\nabc\n### Added\ndef\n## [0.1.0]\nold\n", "\nabc\n### Added\ndef\n"},
		{"# C\n## Unreleased\nlast\n", "last\n"},
		{"# C\n## [0.1.0]\nold\n", ""},
	} {
		if got, _ := unreleasedSection(tc.in); got != tc.want {
			t.Errorf("unreleasedSection(%q) = %q, want %q", tc.in, got, tc.want)
		}
	}
}

func TestBaselineRoundTripAndOrder(t *testing.T) {
	dir := t.TempDir()
	dep := pkg(t, mod+"/client", "package client\n\ntype Object interface{ GetName() string }\n")
	queue := pkg(t, mod+"/workqueue", "package workqueue\n\nimport \"github.com/loom-k8s/loom/client\"\n\nfunc Add(o client.Object) {}\n", dep)
	for _, v := range []string{"v0.9.0", "v0.10.0", "v0.2.0"} {
		if err := writeBaseline(filepath.Join(dir, v+baselineExt), []*types.Package{dep, queue}); err != nil {
			t.Fatal(err)
		}
	}
	for _, name := range []string{"v1.0" + baselineExt, baselineExt, "v2.0.0" + baselineExt + ".tmp"} { // ignored
		if err := os.WriteFile(filepath.Join(dir, name), nil, 0o644); err != nil {
			t.Fatal(err)
		}
	}
	v, file, err := latestBaseline(dir)
	if err != nil || v != "v0.10.0" || filepath.Base(file) != "v0.10.0"+baselineExt {
		t.Fatalf("latestBaseline = %s, %s, %v; want v0.10.0", v, file, err)
	}
	old, err := readBaseline(file)
	if err != nil {
		t.Fatal(err)
	}
	if len(old) != 2 || old[0].Path() != dep.Path() || old[1].Path() != queue.Path() {
		t.Fatalf("read %v", old)
	}
	if r := Compare(mod, old, []*types.Package{dep, queue}, ""); len(r.Changes) != 0 {
		t.Errorf("the round trip changes the API: %+v", r.Changes)
	}
	if _, _, err := latestBaseline(t.TempDir()); err == nil {
		t.Error("latestBaseline finds a baseline in an empty directory")
	}
}

func TestIsAPI(t *testing.T) {
	for path, want := range map[string]bool{
		mod + "/workqueue":            true,
		mod + "/testenv/e2e":          true,
		mod + "/internal/pki":         false,
		mod + "/webhook/internal/x":   false,
		mod + "/examples":             false,
		mod + "/examples/at/operator": false,
		mod + "/examplesfoo":          true,
		mod + "/internalish":          true,
	} {
		if got := isAPI(mod, path, "x"); got != want {
			t.Errorf("isAPI(%s) = %v, want %v", path, got, want)
		}
	}
	if isAPI(mod, mod+"/cmd/loom", "main") {
		t.Error("a command is API")
	}
}
