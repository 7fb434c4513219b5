// Package kubeconfig checks that docs/kubeconfig.md covers every field of
// the kubeconfig format as client-go defines it (clientcmd/api/v1), so
// that the table comparing Loom with kubectl cannot silently miss one when
// client-go adds a field.
package kubeconfig

import (
	"os"
	"reflect"
	"slices"
	"strings"
	"testing"

	"k8s.io/apimachinery/pkg/runtime"
	clientcmdv1 "k8s.io/client-go/tools/clientcmd/api/v1"
)

const table = "../../docs/kubeconfig.md"

// fieldPaths returns the JSON path of every field reachable from typ, in
// kubeconfig notation (users[].user.exec.env[].name), and separately the
// paths of map-valued fields, whose keys the table may also list.
func fieldPaths(typ reflect.Type, prefix string, paths, maps *[]string) {
	for f := range typ.Fields() {
		if !f.IsExported() {
			continue
		}
		name, opts, _ := strings.Cut(f.Tag.Get("json"), ",")
		if name == "-" {
			continue
		}
		ft := f.Type
		for ft.Kind() == reflect.Pointer {
			ft = ft.Elem()
		}
		if f.Anonymous && (name == "" || strings.Contains(opts, "inline")) {
			fieldPaths(ft, prefix, paths, maps)
			continue
		}
		if name == "" {
			name = f.Name
		}
		path := name
		if prefix != "" {
			path = prefix + "." + name
		}
		*paths = append(*paths, path)
		switch {
		case ft.Kind() == reflect.Map:
			*maps = append(*maps, path)
		case ft.Kind() == reflect.Slice && isObject(ft.Elem()):
			fieldPaths(deref(ft.Elem()), path+"[]", paths, maps)
		case isObject(ft):
			fieldPaths(ft, path, paths, maps)
		}
	}
}

func deref(t reflect.Type) reflect.Type {
	for t.Kind() == reflect.Pointer {
		t = t.Elem()
	}
	return t
}

// isObject reports whether t is a struct with fields of its own in the
// file format; an embedded object (runtime.RawExtension) is a value.
func isObject(t reflect.Type) bool {
	t = deref(t)
	return t.Kind() == reflect.Struct && t.PkgPath() != reflect.TypeFor[runtime.RawExtension]().PkgPath()
}

// tablePaths returns the first cell of each row of the markdown tables in
// the file, without its backticks.
func tablePaths(t *testing.T) []string {
	t.Helper()
	b, err := os.ReadFile(table)
	if err != nil {
		t.Fatal(err)
	}
	var paths []string
	for line := range strings.Lines(string(b)) {
		cells := strings.Split(line, "|")
		if !strings.HasPrefix(line, "|") || len(cells) < 4 {
			continue
		}
		cell := strings.TrimSpace(cells[1])
		if !strings.HasPrefix(cell, "`") || !strings.HasSuffix(cell, "`") {
			continue // the header, the separator, or not a field row
		}
		paths = append(paths, strings.Trim(cell, "`"))
	}
	return paths
}

func TestDocCoversEveryKubeconfigField(t *testing.T) {
	var want, maps []string
	fieldPaths(reflect.TypeFor[clientcmdv1.Config](), "", &want, &maps)
	// The walk itself: a few paths it must find at each depth.
	for _, p := range []string{"kind", "clusters[].cluster.server", "users[].user.exec.env[].value", "contexts[].context.extensions[].extension", "preferences.colors"} {
		if !slices.Contains(want, p) {
			t.Fatalf("the walk of clientcmd/api/v1.Config missed %s; it found %v", p, want)
		}
	}
	got := tablePaths(t)
	if len(got) == 0 {
		t.Fatalf("no field rows found in %s", table)
	}
	for _, p := range want {
		if !slices.Contains(got, p) {
			t.Errorf("%s has no row for `%s`", table, p)
		}
	}
	seen := map[string]bool{}
	for _, p := range got {
		if seen[p] {
			t.Errorf("%s has two rows for `%s`", table, p)
		}
		seen[p] = true
		if slices.Contains(want, p) || slices.ContainsFunc(maps, func(m string) bool { return strings.HasPrefix(p, m+".") }) {
			continue
		}
		t.Errorf("%s has a row for `%s`, which is not a kubeconfig field", table, p)
	}
}
