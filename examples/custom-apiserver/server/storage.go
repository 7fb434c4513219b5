package server

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"

	"k8s.io/apimachinery/pkg/api/meta"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
)

// Backend keeps the objects of every resource of the server, with one
// resourceVersion counter for all of them, in memory and, when it has a
// file, in that file too: every write rewrites the file (write to a
// temporary file, then rename) before it is acknowledged, so a restarted
// server finds what it acknowledged. The file holds the objects in the
// storage version, v1beta1, as JSON.
//
// This is deliberately simple: a whole-file rewrite per write suits an
// example's few hundred objects, not a production store.
type Backend struct {
	path  string // "" in memory only
	codec runtime.Codec
	dec   runtime.Decoder

	mu     sync.Mutex
	rv     uint64
	stores map[string]*Store // by resource
	loaded map[string][]runtime.Object
}

// fileFormat is the content of a storage file.
type fileFormat struct {
	ResourceVersion string            `json:"resourceVersion"`
	Objects         []json.RawMessage `json:"objects"`
}

// NewBackend returns an in-memory backend when path is empty, else one kept
// in the file at path, loaded now if it exists. Objects are encoded with
// codec and decoded with dec.
func NewBackend(path string, codec runtime.Codec, dec runtime.Decoder) (*Backend, error) {
	b := &Backend{path: path, codec: codec, dec: dec, stores: map[string]*Store{}, loaded: map[string][]runtime.Object{}}
	if path == "" {
		return b, nil
	}
	raw, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return b, nil
	}
	if err != nil {
		return nil, fmt.Errorf("storage file: %w", err)
	}
	var f fileFormat
	if err := json.Unmarshal(raw, &f); err != nil {
		return nil, fmt.Errorf("storage file %s: %w", path, err)
	}
	if b.rv, err = strconv.ParseUint(f.ResourceVersion, 10, 64); err != nil {
		return nil, fmt.Errorf("storage file %s: resourceVersion %q: %w", path, f.ResourceVersion, err)
	}
	for i, o := range f.Objects {
		obj, gvk, err := dec.Decode(o, nil, nil)
		if err != nil {
			return nil, fmt.Errorf("storage file %s: object %d: %w", path, i, err)
		}
		b.loaded[gvk.Kind] = append(b.loaded[gvk.Kind], obj)
	}
	return b, nil
}

// register adds a store and hands it the objects of its kind that were
// loaded from the file.
func (b *Backend) register(s *Store) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.stores[s.Resource.Resource] = s
	for _, o := range b.loaded[s.Kind] {
		m, err := meta.Accessor(o)
		if err != nil {
			return err
		}
		s.objects[key(m.GetNamespace(), m.GetName())] = o
	}
	delete(b.loaded, s.Kind)
	return nil
}

// nextRV returns the next resourceVersion. Callers hold b.mu.
func (b *Backend) nextRV() uint64 {
	b.rv++
	return b.rv
}

// persist writes every object to the file. Callers hold b.mu.
func (b *Backend) persist() error {
	if b.path == "" {
		return nil
	}
	f := fileFormat{ResourceVersion: strconv.FormatUint(b.rv, 10), Objects: []json.RawMessage{}}
	resources := make([]string, 0, len(b.stores))
	for r := range b.stores {
		resources = append(resources, r)
	}
	slices.Sort(resources)
	for _, r := range resources {
		s := b.stores[r]
		keys := make([]string, 0, len(s.objects))
		for k := range s.objects {
			keys = append(keys, k)
		}
		slices.Sort(keys)
		for _, k := range keys {
			var buf bytes.Buffer
			if err := b.codec.Encode(s.objects[k], &buf); err != nil {
				return fmt.Errorf("encode %s %s: %w", r, k, err)
			}
			f.Objects = append(f.Objects, bytes.TrimSpace(buf.Bytes()))
		}
	}
	out, err := json.MarshalIndent(f, "", " ")
	if err != nil {
		return err
	}
	tmp, err := os.CreateTemp(filepath.Dir(b.path), ".storage-*")
	if err != nil {
		return err
	}
	defer os.Remove(tmp.Name())
	if _, err := tmp.Write(out); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Sync(); err != nil {
		tmp.Close()
		return err
	}
	if err := tmp.Close(); err != nil {
		return err
	}
	return os.Rename(tmp.Name(), b.path)
}

// ResourceVersion is the backend's latest resourceVersion.
func (b *Backend) ResourceVersion() uint64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.rv
}

func key(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// setRV stamps obj with rv.
func setRV(obj runtime.Object, rv uint64) {
	m, _ := meta.Accessor(obj)
	m.SetResourceVersion(strconv.FormatUint(rv, 10))
}

// now is the creation time stamped on new objects.
var now = func() metav1.Time { return metav1.Now() }
