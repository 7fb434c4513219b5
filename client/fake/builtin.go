package fake

import (
	"bytes"
	"compress/gzip"
	_ "embed"
	"encoding/json"
	"fmt"
	"io"
	"sync"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"

	"github.com/loom-k8s/loom/internal/apischeme"
)

// builtinData is what kube-apiserver serves for the built-in kinds,
// captured by `go generate` (internal/gen): aggregated discovery and the
// OpenAPI v3 schemas of every group version.
//
//go:embed builtin.json.gz
var builtinData []byte

// builtins is builtinData parsed, shared by every Server: the type
// converter takes a moment to build.
type builtins struct {
	version   string
	core      apidiscoveryv2.APIGroupDiscoveryList // /api
	groups    apidiscoveryv2.APIGroupDiscoveryList // /apis
	schemas   map[string]*spec.Schema
	converter managedfields.TypeConverter
	scheme    *runtime.Scheme
}

var loadBuiltins = sync.OnceValues(func() (*builtins, error) {
	zr, err := gzip.NewReader(bytes.NewReader(builtinData))
	if err != nil {
		return nil, fmt.Errorf("fake: built-in data: %w", err)
	}
	raw, err := io.ReadAll(zr)
	if err != nil {
		return nil, fmt.Errorf("fake: built-in data: %w", err)
	}
	var d struct {
		Version   string                     `json:"version"`
		Discovery map[string]json.RawMessage `json:"discovery"`
		Schemas   map[string]*spec.Schema    `json:"schemas"`
	}
	if err := json.Unmarshal(raw, &d); err != nil {
		return nil, fmt.Errorf("fake: built-in data: %w", err)
	}
	b := &builtins{version: d.Version, schemas: d.Schemas, scheme: runtime.NewScheme()}
	if err := json.Unmarshal(d.Discovery["/api"], &b.core); err != nil {
		return nil, fmt.Errorf("fake: built-in discovery: %w", err)
	}
	if err := json.Unmarshal(d.Discovery["/apis"], &b.groups); err != nil {
		return nil, fmt.Errorf("fake: built-in discovery: %w", err)
	}
	if b.converter, err = managedfields.NewTypeConverter(d.Schemas, false); err != nil {
		return nil, fmt.Errorf("fake: built-in schemas: %w", err)
	}
	if err := apischeme.AddToScheme(b.scheme); err != nil {
		return nil, fmt.Errorf("fake: %w", err)
	}
	return b, nil
})
