package apicheck_test

import (
	"fmt"
	"go/ast"
	"go/parser"
	"go/token"
	"go/types"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"testing"

	"github.com/loom-k8s/loom/internal/apicheck"
	"github.com/loom-k8s/loom/internal/modload"
)

// TestModule checks the exported API of every package of this module,
// loaded from the compiler's export data: no exported field, function,
// method, variable, constant or type may mention a type from an internal
// package, which users of the module could not name.
func TestModule(t *testing.T) {
	m, err := modload.Load(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	checked := 0
	for _, p := range m.Packages {
		switch {
		case p.Err != "":
			t.Errorf("%s: %s", p.ImportPath, p.Err)
			continue
		case p.Name == "main" || apicheck.IsInternal(p.ImportPath) || p.Export == "":
			continue // no importable API
		}
		pkg, err := m.Import(p.ImportPath)
		if err != nil {
			t.Errorf("loading %s: %v", p.ImportPath, err)
			continue
		}
		checked++
		for _, v := range apicheck.Check(pkg) {
			pos := m.Fset.Position(v.Pos)
			t.Errorf("%s:%d: %s mentions %s", filepath.Base(pos.Filename), pos.Line, v.Where, v.Type)
		}
	}
	t.Logf("checked the exported API of %d packages", checked)
}

// sourceImporter type-checks packages from source held in memory.
type sourceImporter struct {
	fset *token.FileSet
	srcs map[string]string
	pkgs map[string]*types.Package
}

func (im *sourceImporter) Import(path string) (*types.Package, error) {
	if p, ok := im.pkgs[path]; ok {
		return p, nil
	}
	src, ok := im.srcs[path]
	if !ok {
		return nil, fmt.Errorf("no package %s", path)
	}
	f, err := parser.ParseFile(im.fset, path+"/x.go", src, 0)
	if err != nil {
		return nil, err
	}
	conf := types.Config{Importer: im}
	p, err := conf.Check(path, im.fset, []*ast.File{f}, nil)
	if err != nil {
		return nil, err
	}
	im.pkgs[path] = p
	return p, nil
}

const secret = `package secret

type Clock interface{ Now() int }
type Fake struct{}
type Num int
type Pair[K, V any] struct{}
`

// TestCheck runs Check on small packages that import the internal
// package example.com/m/internal/secret.
func TestCheck(t *testing.T) {
	const s = "example.com/m/internal/secret."
	tests := []struct {
		name string
		path string // default example.com/m/p
		src  string // the declarations of package p, which imports secret
		want []string
	}{
		{"exported field", "", `type Options struct{ Clock secret.Clock }`,
			[]string{"p.Options.Clock: " + s + "Clock"}},
		{"unexported field", "", `type Options struct{ clock secret.Clock }`, nil},
		{"unexported type not in the API", "", `type options struct{ Clock secret.Clock }`, nil},
		{"unexported type returned by an exported function", "",
			`type impl struct{ Clock secret.Clock }
			func New() *impl { return nil }`,
			[]string{"p.impl.Clock: " + s + "Clock"}},
		{"parameter", "", `func F(c secret.Clock) {}`,
			[]string{"p.F: parameter c: " + s + "Clock"}},
		{"unnamed result", "", `func G() (secret.Num, error) { return 0, nil }`,
			[]string{"p.G: result #0: " + s + "Num"}},
		{"unexported function", "", `func g(c secret.Clock) {}`, nil},
		{"exported method", "",
			`type T struct{}
			func (*T) M(n secret.Num) {}
			func (T) m(n secret.Num) {}`,
			[]string{"p.T.M: parameter n: " + s + "Num"}},
		{"interface method", "", `type I interface{ M() secret.Num; m(secret.Fake) }`,
			[]string{"p.I.M: result #0: " + s + "Num"}},
		{"embedded interface", "", `type I interface{ secret.Clock }`,
			[]string{"p.I: " + s + "Clock"}},
		{"embedded struct", "", `type S struct{ secret.Fake }`,
			[]string{"p.S.Fake: " + s + "Fake"}},
		{"variable and constant", "",
			`var V map[string]func(chan secret.Num)
			const C secret.Num = 1`,
			[]string{"p.C: " + s + "Num", "p.V: parameter #0: " + s + "Num"}},
		{"type definition", "", `type D []*secret.Fake`,
			[]string{"p.D: " + s + "Fake"}},
		{"alias", "", `type A = secret.Fake`,
			[]string{"p.A: " + s + "Fake"}},
		{"type argument", "",
			`type Box[T any] struct{ V T }
			var B Box[secret.Num]
			var P *secret.Pair[int, int]`,
			[]string{"p.B: " + s + "Num", "p.P: " + s + "Pair"}},
		{"constraint", "", `func H[T secret.Clock](t T) {}`,
			[]string{"p.H type parameter T: " + s + "Clock"}},
		{"union constraint", "", `type Number interface{ ~string | secret.Num }`,
			[]string{"p.Number: " + s + "Num"}},
		{"recursive types are walked once", "",
			`type List struct{ Next *List; Clock secret.Clock }
			type Ord[T any] interface{ Less(T) bool }
			func Sort[T Ord[T]](x []T) {}
			var L, M List`,
			[]string{"p.List.Clock: " + s + "Clock"}},
		{"no internal type", "", `type T struct{ N int }; func F(T) error { return nil }`, nil},
		{"internal package itself", "example.com/m/internal/p", `type T struct{ C secret.Clock }`, nil},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			path := tt.path
			if path == "" {
				path = "example.com/m/p"
			}
			src := "package p\n\nimport \"example.com/m/internal/secret\"\n\nvar _ secret.Num\n\n" + tt.src + "\n"
			im := &sourceImporter{
				fset: token.NewFileSet(),
				srcs: map[string]string{"example.com/m/internal/secret": secret, path: src},
				pkgs: map[string]*types.Package{},
			}
			pkg, err := im.Import(path)
			if err != nil {
				t.Fatal(err)
			}
			var got []string
			for _, v := range apicheck.Check(pkg) {
				if !v.Pos.IsValid() {
					t.Errorf("%s: no position", v.Where)
				}
				got = append(got, v.Where+": "+v.Type)
			}
			slices.Sort(got)
			if !slices.Equal(got, tt.want) {
				t.Errorf("violations:\n%s\nwant:\n%s", strings.Join(got, "\n"), strings.Join(tt.want, "\n"))
			}
		})
	}
}

func TestIsInternal(t *testing.T) {
	tests := []struct {
		path string
		want bool
	}{
		{"internal", true},
		{"internal/clock", true},
		{"github.com/loom-k8s/loom/internal/clock", true},
		{"github.com/loom-k8s/loom/internal", true},
		{"github.com/loom-k8s/loom/cache/internal", true},
		{"github.com/loom-k8s/loom/internalx/clock", false},
		{"github.com/loom-k8s/loom/xinternal", false},
		{"github.com/loom-k8s/loom/workqueue", false},
	}
	for _, tt := range tests {
		if got := apicheck.IsInternal(tt.path); got != tt.want {
			t.Errorf("IsInternal(%q) = %v, want %v", tt.path, got, tt.want)
		}
	}
}

// TestNoHandTypedResources fails when an example or a scaffold template
// spells a resource's plural by hand: the manager resolves every type
// from its scheme and the API server's discovery, and the code users copy
// should show that.
func TestNoHandTypedResources(t *testing.T) {
	gomod, err := exec.Command("go", "env", "GOMOD").Output()
	if err != nil {
		t.Fatalf("go env GOMOD: %v", err)
	}
	root := filepath.Dir(strings.TrimSpace(string(gomod)))
	walked := 0
	for _, dir := range []string{"examples", filepath.Join("cmd", "loom", "scaffold")} {
		err := filepath.WalkDir(filepath.Join(root, dir), func(path string, d os.DirEntry, err error) error {
			if err != nil || d.IsDir() {
				return err
			}
			if !strings.HasSuffix(path, ".go") && !strings.HasSuffix(path, ".tmpl") && !strings.HasSuffix(path, ".md") {
				return nil
			}
			walked++
			b, err := os.ReadFile(path)
			if err != nil {
				return err
			}
			for i, line := range strings.Split(string(b), "\n") {
				if strings.Contains(line, `WithResource("`) {
					rel, _ := filepath.Rel(root, path)
					t.Errorf("%s:%d types a resource by hand: %s", rel, i+1, strings.TrimSpace(line))
				}
			}
			return nil
		})
		if err != nil {
			t.Fatal(err)
		}
	}
	if walked == 0 {
		t.Fatal("found no example or template to read")
	}
}
