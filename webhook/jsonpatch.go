package webhook

import (
	"encoding/json"
	"fmt"
	"reflect"
	"sort"
	"strconv"
	"strings"

	"github.com/loom-k8s/loom/internal/jsondec"
)

// patchOp is one RFC 6902 operation.
type patchOp struct {
	Op    string `json:"op"`
	Path  string `json:"path"`
	Value any    `json:"value,omitempty"`
}

// jsonPatch returns the RFC 6902 patch that turns the JSON document from
// into to, or nil when they are equal. Objects are compared key by key,
// arrays item by item with trailing items added or removed (correct, if not
// always the shortest patch). Numbers are compared as int64
// (integers that fit) or float64 values, as apimachinery's util/json reads
// them.
// Without removals, members present in from and missing in to stay.
func jsonPatch(from, to []byte, removals bool) ([]byte, error) {
	a, err := decodeJSONValue(from)
	if err != nil {
		return nil, fmt.Errorf("webhook: the original object: %w", err)
	}
	b, err := decodeJSONValue(to)
	if err != nil {
		return nil, fmt.Errorf("webhook: the mutated object: %w", err)
	}
	var ops []patchOp
	diffJSON("", a, b, removals, &ops)
	if len(ops) == 0 {
		return nil, nil
	}
	return json.Marshal(ops)
}

func decodeJSONValue(data []byte) (any, error) {
	return jsondec.Object(data)
}

func diffJSON(path string, a, b any, removals bool, ops *[]patchOp) {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			break
		}
		keys := make([]string, 0, len(av)+len(bv))
		for k := range av {
			keys = append(keys, k)
		}
		for k := range bv {
			if _, in := av[k]; !in {
				keys = append(keys, k)
			}
		}
		sort.Strings(keys)
		for _, k := range keys {
			p := path + "/" + escapePointer(k)
			x, inA := av[k]
			y, inB := bv[k]
			switch {
			case inA && inB:
				diffJSON(p, x, y, removals, ops)
			case inB:
				*ops = append(*ops, patchOp{Op: "add", Path: p, Value: valueOrNull(y)})
			case removals:
				*ops = append(*ops, patchOp{Op: "remove", Path: p})
			}
		}
		return
	case []any:
		bv, ok := b.([]any)
		if !ok {
			break
		}
		// Items both lists have are compared one by one, so that fields
		// the Go type lacks survive inside them too; items beyond are
		// removed (last first) or added. A shorter list is never an
		// artefact of decoding, so its removals are always kept.
		n := min(len(av), len(bv))
		for i := range n {
			diffJSON(path+"/"+strconv.Itoa(i), av[i], bv[i], removals, ops)
		}
		for i := len(av) - 1; i >= n; i-- {
			*ops = append(*ops, patchOp{Op: "remove", Path: path + "/" + strconv.Itoa(i)})
		}
		for i := n; i < len(bv); i++ {
			*ops = append(*ops, patchOp{Op: "add", Path: path + "/" + strconv.Itoa(i), Value: valueOrNull(bv[i])})
		}
		return
	}
	if !reflect.DeepEqual(a, b) {
		*ops = append(*ops, patchOp{Op: "replace", Path: path, Value: valueOrNull(b)})
	}
}

// nullValue marshals as JSON null, which omitempty would otherwise drop.
type nullValue struct{}

func (nullValue) MarshalJSON() ([]byte, error) { return []byte("null"), nil }

func valueOrNull(v any) any {
	if v == nil {
		return nullValue{}
	}
	return v
}

var pointerEscaper = strings.NewReplacer("~", "~0", "/", "~1")

// escapePointer escapes a member name for a JSON pointer (RFC 6901).
func escapePointer(s string) string {
	if !strings.ContainsAny(s, "~/") {
		return s
	}
	return pointerEscaper.Replace(s)
}
