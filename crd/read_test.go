package crd_test

import (
	"errors"
	"io/fs"
	"os"
	"path/filepath"
	"testing"
	"testing/fstest"

	"github.com/loom-k8s/loom/crd"
)

const widgetCRD = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.read.example.com
spec:
  group: read.example.com
  names: {kind: Widget, plural: widgets, singular: widget, listKind: WidgetList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}
`

func TestRead(t *testing.T) {
	gadget := `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: gadgets.read.example.com
`
	cases := []struct {
		name     string
		files    map[string]string
		patterns []string
		want     []string // CRD names, in order
		err      error
		file     string // the file a *ReadError names
		doc      int
	}{
		{name: "one file", files: map[string]string{"w.yaml": widgetCRD}, want: []string{"widgets.read.example.com"}},
		{name: "several documents and comments", files: map[string]string{
			"all.yaml": "# generated\n---\n" + widgetCRD + "---\n# nothing here\n---\n" + gadget,
		}, want: []string{"widgets.read.example.com", "gadgets.read.example.com"}},
		{name: "files in name order", files: map[string]string{"b.yaml": widgetCRD, "a.yml": gadget},
			want: []string{"gadgets.read.example.com", "widgets.read.example.com"}},
		{name: "pattern", files: map[string]string{"crd/w.yaml": widgetCRD, "rbac/role.yaml": "kind: ClusterRole"},
			patterns: []string{"crd/*.yaml"}, want: []string{"widgets.read.example.com"}},
		{name: "not a CRD", files: map[string]string{"x.yaml": widgetCRD + "---\napiVersion: v1\nkind: ConfigMap\nmetadata: {name: x}\n"},
			err: crd.ErrNotCRD, file: "x.yaml", doc: 2},
		{name: "old apiVersion", files: map[string]string{"x.yaml": "apiVersion: apiextensions.k8s.io/v1beta1\nkind: CustomResourceDefinition\nmetadata: {name: a.b}\n"},
			err: crd.ErrNotCRD, file: "x.yaml", doc: 1},
		{name: "no name", files: map[string]string{"x.yaml": "apiVersion: apiextensions.k8s.io/v1\nkind: CustomResourceDefinition\n"},
			err: crd.ErrNotCRD, file: "x.yaml", doc: 1},
		{name: "bad YAML", files: map[string]string{"x.yaml": "kind: [unclosed\n"}, file: "x.yaml", doc: 1},
		{name: "nothing found", files: map[string]string{"README.md": "hi"}, err: crd.ErrNoCRDs},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			fsys := fstest.MapFS{}
			for n, c := range tc.files {
				fsys[n] = &fstest.MapFile{Data: []byte(c)}
			}
			got, err := crd.Read(fsys, tc.patterns...)
			if tc.err != nil || tc.file != "" {
				if err == nil {
					t.Fatalf("Read: no error, want one")
				}
				if tc.err != nil && !errors.Is(err, tc.err) {
					t.Fatalf("Read: %v, want %v", err, tc.err)
				}
				if tc.file != "" {
					var re *crd.ReadError
					if !errors.As(err, &re) || re.File != tc.file || re.Doc != tc.doc {
						t.Fatalf("Read: %v, want a *ReadError for %s document %d", err, tc.file, tc.doc)
					}
				}
				return
			}
			if err != nil {
				t.Fatal(err)
			}
			var names []string
			for _, c := range got {
				names = append(names, c.GetName())
			}
			if len(names) != len(tc.want) {
				t.Fatalf("got %v, want %v", names, tc.want)
			}
			for i := range names {
				if names[i] != tc.want[i] {
					t.Fatalf("got %v, want %v", names, tc.want)
				}
			}
		})
	}
}

func TestReadFiles(t *testing.T) {
	dir := t.TempDir()
	if err := os.WriteFile(filepath.Join(dir, "w[1].yaml"), []byte(widgetCRD), 0o600); err != nil {
		t.Fatal(err)
	}
	for _, p := range []string{dir, filepath.Join(dir, "w[1].yaml")} {
		got, err := crd.ReadFiles(p)
		if err != nil || len(got) != 1 || got[0].GetName() != "widgets.read.example.com" {
			t.Fatalf("ReadFiles(%s) = %v, %v", p, got, err)
		}
	}
	_, err := crd.ReadFiles(filepath.Join(dir, "missing.yaml"))
	var re *crd.ReadError
	if !errors.As(err, &re) || !errors.Is(err, fs.ErrNotExist) {
		t.Fatalf("ReadFiles(missing) = %v, want a *ReadError wrapping fs.ErrNotExist", err)
	}
}
