package fake

import (
	"bytes"
	"encoding/json"
	"fmt"
	"reflect"
	"strconv"
	"strings"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	utiljson "k8s.io/apimachinery/pkg/util/json"
	"sigs.k8s.io/yaml"
)

// decodeObject decodes a JSON object the way Unstructured holds one:
// integers as int64.
func decodeObject(data []byte) (map[string]any, error) {
	var v any
	if err := utiljson.Unmarshal(data, &v); err != nil {
		return nil, err
	}
	m, ok := v.(map[string]any)
	if !ok {
		return nil, fmt.Errorf("the body is not a JSON object")
	}
	return m, nil
}

func yamlToJSON(data []byte) ([]byte, error) {
	if t := bytes.TrimSpace(data); len(t) > 0 && t[0] == '{' {
		return data, nil
	}
	return yaml.YAMLToJSON(data)
}

func deepCopy(m map[string]any) map[string]any {
	if m == nil {
		return nil
	}
	return runtime.DeepCopyJSON(m)
}

func encode(m map[string]any) []byte {
	data, err := json.Marshal(m)
	if err != nil {
		panic(err) // decoded JSON always encodes
	}
	return data
}

func u(m map[string]any) *unstructured.Unstructured { return &unstructured.Unstructured{Object: m} }

func metadata(obj map[string]any) map[string]any {
	m, _ := obj["metadata"].(map[string]any)
	if m == nil {
		m = map[string]any{}
		obj["metadata"] = m
	}
	return m
}

func str(m map[string]any, k string) string {
	s, _ := m[k].(string)
	return s
}

// getPath returns the value at a dotted path.
func getPath(obj map[string]any, path []string) (any, bool) {
	var cur any = obj
	for _, p := range path {
		m, ok := cur.(map[string]any)
		if !ok {
			return nil, false
		}
		if cur, ok = m[p]; !ok {
			return nil, false
		}
	}
	return cur, true
}

// setPath sets the value at a dotted path, making the maps on the way.
func setPath(obj map[string]any, path []string, v any) {
	m := obj
	for _, p := range path[:len(path)-1] {
		next, ok := m[p].(map[string]any)
		if !ok {
			next = map[string]any{}
			m[p] = next
		}
		m = next
	}
	m[path[len(path)-1]] = v
}

// fieldString formats a field's value as a field selector compares it.
func fieldString(v any) string {
	switch v := v.(type) {
	case string:
		return v
	case bool:
		return strconv.FormatBool(v)
	case int64:
		return strconv.FormatInt(v, 10)
	case float64:
		return strconv.FormatFloat(v, 'f', -1, 64)
	case nil:
		return ""
	}
	return fmt.Sprint(v)
}

// without returns a shallow copy of obj without the given top-level keys.
func without(obj map[string]any, keys ...string) map[string]any {
	out := make(map[string]any, len(obj))
	for k, v := range obj {
		out[k] = v
	}
	for _, k := range keys {
		delete(out, k)
	}
	return out
}

func equalJSON(a, b any) bool { return reflect.DeepEqual(a, b) }

// sameButVersion reports whether two objects differ at most in
// metadata.resourceVersion.
func sameButVersion(a, b map[string]any) bool {
	am, bm := without(metadata(a), "resourceVersion"), without(metadata(b), "resourceVersion")
	return equalJSON(without(a, "metadata"), without(b, "metadata")) && equalJSON(am, bm)
}

func stringSlice(v any) []string {
	l, _ := v.([]any)
	out := make([]string, 0, len(l))
	for _, x := range l {
		if s, ok := x.(string); ok {
			out = append(out, s)
		}
	}
	return out
}

func lower(s string) string { return strings.ToLower(s) }
