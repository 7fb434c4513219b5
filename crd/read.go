package crd

import (
	"bufio"
	"bytes"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"os"
	"path/filepath"
	"sort"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	utilyaml "k8s.io/apimachinery/pkg/util/yaml"
	"sigs.k8s.io/yaml"
)

// ReadError says which file, and which YAML document in it (counted from
// 1), could not be read as a CustomResourceDefinition.
type ReadError struct {
	File string
	Doc  int // 0 when the file itself could not be read
	Err  error
}

func (e *ReadError) Error() string {
	if e.Doc == 0 {
		return fmt.Sprintf("crd: %s: %v", e.File, e.Err)
	}
	return fmt.Sprintf("crd: %s: document %d: %v", e.File, e.Doc, e.Err)
}

func (e *ReadError) Unwrap() error { return e.Err }

// ErrNotCRD is wrapped in a *ReadError for a document that is not an
// apiextensions.k8s.io/v1 CustomResourceDefinition, or has no name.
var ErrNotCRD = errors.New("not an apiextensions.k8s.io/v1 CustomResourceDefinition with a name")

// ErrNoCRDs is returned when the patterns given to Read match no CRD.
var ErrNoCRDs = errors.New("crd: no CustomResourceDefinition found")

// Read returns the CRDs in the files of fsys that match the patterns (in
// the syntax of fs.Glob; default "*.yaml" and "*.yml"), in file-name order.
// A file may hold several YAML documents, separated by "---"; empty
// documents are skipped. Any other document, or a pattern matching nothing
// at all, is an error: a manifest folder that silently installs nothing is a
// bug worth failing on.
func Read(fsys fs.FS, patterns ...string) ([]*unstructured.Unstructured, error) {
	if len(patterns) == 0 {
		patterns = []string{"*.yaml", "*.yml"}
	}
	seen := map[string]bool{}
	var files []string
	for _, p := range patterns {
		m, err := fs.Glob(fsys, p)
		if err != nil {
			return nil, fmt.Errorf("crd: pattern %q: %w", p, err)
		}
		for _, f := range m {
			if !seen[f] {
				seen[f] = true
				files = append(files, f)
			}
		}
	}
	sort.Strings(files)
	var out []*unstructured.Unstructured
	for _, f := range files {
		data, err := fs.ReadFile(fsys, f)
		if err != nil {
			return nil, &ReadError{File: f, Err: err}
		}
		crds, err := parse(f, data)
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w for %s", ErrNoCRDs, strings.Join(patterns, ", "))
	}
	return out, nil
}

// ReadFiles is Read over paths on disk: each path is a file, or a folder
// whose *.yaml and *.yml files are read (not recursively).
func ReadFiles(paths ...string) ([]*unstructured.Unstructured, error) {
	var out []*unstructured.Unstructured
	for _, p := range paths {
		st, err := os.Stat(p)
		if err != nil {
			return nil, &ReadError{File: p, Err: err}
		}
		var crds []*unstructured.Unstructured
		if st.IsDir() {
			crds, err = Read(os.DirFS(p))
		} else {
			crds, err = Read(os.DirFS(filepath.Dir(p)), escapeGlob(filepath.Base(p)))
		}
		if err != nil {
			return nil, err
		}
		out = append(out, crds...)
	}
	if len(out) == 0 {
		return nil, ErrNoCRDs
	}
	return out, nil
}

func escapeGlob(name string) string {
	var b strings.Builder
	for _, r := range name {
		if strings.ContainsRune(`*?[\`, r) {
			b.WriteByte('\\')
		}
		b.WriteRune(r)
	}
	return b.String()
}

func parse(file string, data []byte) ([]*unstructured.Unstructured, error) {
	r := utilyaml.NewYAMLReader(bufio.NewReader(bytes.NewReader(data)))
	var out []*unstructured.Unstructured
	for doc := 1; ; doc++ {
		raw, err := r.Read()
		if errors.Is(err, io.EOF) {
			return out, nil
		}
		if err != nil {
			return nil, &ReadError{File: file, Doc: doc, Err: err}
		}
		if len(bytes.TrimSpace(stripComments(raw))) == 0 {
			continue
		}
		var m map[string]any
		if err := yaml.Unmarshal(raw, &m); err != nil {
			return nil, &ReadError{File: file, Doc: doc, Err: err}
		}
		if m == nil {
			continue
		}
		u := &unstructured.Unstructured{Object: m}
		if u.GetAPIVersion() != "apiextensions.k8s.io/v1" || u.GetKind() != "CustomResourceDefinition" || u.GetName() == "" {
			return nil, &ReadError{File: file, Doc: doc, Err: fmt.Errorf("%w (found apiVersion %q, kind %q, name %q)",
				ErrNotCRD, u.GetAPIVersion(), u.GetKind(), u.GetName())}
		}
		out = append(out, u)
	}
}

// stripComments drops comment lines, so a document of only comments counts
// as empty.
func stripComments(b []byte) []byte {
	var out []byte
	for _, line := range bytes.Split(b, []byte("\n")) {
		if t := bytes.TrimSpace(line); len(t) > 0 && t[0] != '#' {
			out = append(out, line...)
		}
	}
	return out
}
