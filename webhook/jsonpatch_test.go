package webhook

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"strconv"
	"strings"
	"testing"
)

func TestJSONPatch(t *testing.T) {
	cases := []struct {
		name, from, to string
		removals       bool
		want           string
	}{
		{name: "equal", from: `{"a":1,"b":[1,2]}`, to: `{"b":[1,2],"a":1}`, want: ``},
		{name: "add and replace", from: `{"spec":{"x":1}}`, to: `{"spec":{"x":2,"y":"new"}}`,
			want: `[{"op":"replace","path":"/spec/x","value":2},{"op":"add","path":"/spec/y","value":"new"}]`},
		{name: "removal dropped", from: `{"a":1,"unknown":true}`, to: `{"a":1}`, want: ``},
		{name: "removal kept", from: `{"a":1,"gone":true}`, to: `{"a":1}`, removals: true, want: `[{"op":"remove","path":"/gone"}]`},
		{name: "escaped names", from: `{"metadata":{"annotations":{}}}`, to: `{"metadata":{"annotations":{"example.com/a~b":"v"}}}`,
			want: `[{"op":"add","path":"/metadata/annotations/example.com~1a~0b","value":"v"}]`},
		{name: "array element", from: `{"l":[{"n":"a"},{"n":"b"}]}`, to: `{"l":[{"n":"a"},{"n":"c"}]}`,
			want: `[{"op":"replace","path":"/l/1/n","value":"c"}]`},
		{name: "array grown", from: `{"l":[1]}`, to: `{"l":[1,2,3]}`,
			want: `[{"op":"add","path":"/l/1","value":2},{"op":"add","path":"/l/2","value":3}]`},
		{name: "array shrunk, even without removals", from: `{"l":[1,2,3]}`, to: `{"l":[1]}`,
			want: `[{"op":"remove","path":"/l/2"},{"op":"remove","path":"/l/1"}]`},
		{name: "unknown fields inside a grown list survive", from: `{"items":[{"name":"a","extra":1}]}`, to: `{"items":[{"name":"a"},{"name":"b"}]}`,
			want: `[{"op":"add","path":"/items/1","value":{"name":"b"}}]`},
		{name: "null added", from: `{}`, to: `{"x":null}`, want: `[{"op":"add","path":"/x","value":null}]`},
		{name: "type changes", from: `{"x":{"a":1}}`, to: `{"x":"s"}`, want: `[{"op":"replace","path":"/x","value":"s"}]`},
		{name: "int64 numbers exact", from: `{"n":9007199254740993}`, to: `{"n":9007199254740995}`,
			want: `[{"op":"replace","path":"/n","value":9007199254740995}]`},
		{name: "same number", from: `{"f":1.5,"i":3}`, to: `{"i":3,"f":1.5}`, want: ``},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			got, err := jsonPatch([]byte(tc.from), []byte(tc.to), tc.removals)
			if err != nil {
				t.Fatal(err)
			}
			if string(got) != tc.want {
				t.Fatalf("patch\n got %s\nwant %s", got, tc.want)
			}
		})
	}
	if _, err := jsonPatch([]byte(`{`), []byte(`{}`), false); err == nil {
		t.Fatal("a broken original gave no error")
	}
}

// TestJSONPatchApplies: for random pairs of documents, applying the patch
// (with removals) to the first gives the second.
func TestJSONPatchApplies(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for i := range 2000 {
		a, b := randomDoc(r, 3), randomDoc(r, 3)
		if r.IntN(2) == 0 {
			b = mutateDoc(r, deepCopyJSON(a))
		}
		from, _ := json.Marshal(a)
		to, _ := json.Marshal(b)
		patch, err := jsonPatch(from, to, true)
		if err != nil {
			t.Fatal(err)
		}
		doc, _ := decodeJSONValue(from)
		if patch != nil {
			var ops []map[string]any
			if err := json.Unmarshal(patch, &ops); err != nil {
				t.Fatal(err)
			}
			doc = applyPatch(t, doc, ops)
		}
		want, _ := decodeJSONValue(to)
		gotJSON, _ := json.Marshal(doc)
		wantJSON, _ := json.Marshal(want)
		if string(gotJSON) != string(wantJSON) {
			t.Fatalf("case %d: from %s to %s: patch %s gives %s", i, from, to, patch, gotJSON)
		}
	}
}

func randomDoc(r *rand.Rand, depth int) map[string]any {
	m := map[string]any{}
	for range r.IntN(4) {
		m[randomKey(r)] = randomValue(r, depth-1)
	}
	return m
}

func randomKey(r *rand.Rand) string {
	return []string{"a", "b", "c/d", "e~f", "g"}[r.IntN(5)]
}

func randomValue(r *rand.Rand, depth int) any {
	switch n := r.IntN(6); {
	case n == 0 && depth > 0:
		return randomDoc(r, depth)
	case n == 1 && depth > 0:
		l := make([]any, r.IntN(3))
		for i := range l {
			l[i] = randomValue(r, depth-1)
		}
		return l
	case n == 2:
		return nil
	case n == 3:
		return r.IntN(3)
	default:
		return strconv.Itoa(r.IntN(3))
	}
}

func mutateDoc(r *rand.Rand, m map[string]any) map[string]any {
	for k, v := range m {
		switch r.IntN(4) {
		case 0:
			delete(m, k)
		case 1:
			m[k] = randomValue(r, 2)
		case 2:
			if sub, ok := v.(map[string]any); ok {
				m[k] = mutateDoc(r, sub)
			}
		}
	}
	if r.IntN(2) == 0 {
		m[randomKey(r)] = randomValue(r, 2)
	}
	return m
}

func deepCopyJSON(m map[string]any) map[string]any {
	b, _ := json.Marshal(m)
	var out map[string]any
	_ = json.Unmarshal(b, &out)
	return out
}

// applyPatch applies add, replace and remove operations: enough to check
// the patches jsonPatch makes.
func applyPatch(t *testing.T, doc any, ops []map[string]any) any {
	t.Helper()
	for _, op := range ops {
		path := op["path"].(string)
		val := normalize(op["value"])
		if path == "" {
			doc = val
			continue
		}
		tokens := strings.Split(path[1:], "/")
		for i := range tokens {
			tokens[i] = strings.NewReplacer("~1", "/", "~0", "~").Replace(tokens[i])
		}
		parent := doc
		for _, tok := range tokens[:len(tokens)-1] {
			switch p := parent.(type) {
			case map[string]any:
				parent = p[tok]
			case []any:
				idx, _ := strconv.Atoi(tok)
				parent = p[idx]
			}
		}
		last := tokens[len(tokens)-1]
		switch p := parent.(type) {
		case map[string]any:
			if op["op"] == "remove" {
				delete(p, last)
			} else {
				p[last] = val
			}
		case []any:
			idx, _ := strconv.Atoi(last)
			switch op["op"] {
			case "replace":
				p[idx] = val
			case "add", "remove":
				// Lists grow and shrink: set the new list in its parent.
				var next []any
				if op["op"] == "add" {
					if idx != len(p) {
						t.Fatalf("add at %d of a list of %d (only appends are made)", idx, len(p))
					}
					next = append(p[:len(p):len(p)], val)
				} else {
					if idx != len(p)-1 {
						t.Fatalf("remove at %d of a list of %d (only the last is removed)", idx, len(p))
					}
					next = p[:idx]
				}
				doc = setAt(doc, tokens[:len(tokens)-1], next)
			}
		default:
			t.Fatalf("path %s: parent is %T", path, parent)
		}
	}
	return doc
}

// normalize gives v the number types decodeJSONValue gives.
// setAt replaces the value at the path of tokens in doc.
func setAt(doc any, tokens []string, v any) any {
	if len(tokens) == 0 {
		return v
	}
	switch p := doc.(type) {
	case map[string]any:
		p[tokens[0]] = setAt(p[tokens[0]], tokens[1:], v)
	case []any:
		i, _ := strconv.Atoi(tokens[0])
		p[i] = setAt(p[i], tokens[1:], v)
	}
	return doc
}

func normalize(v any) any {
	b, _ := json.Marshal(map[string]any{"v": v})
	out, err := decodeJSONValue(b)
	if err != nil {
		panic(fmt.Sprint(err))
	}
	return out.(map[string]any)["v"]
}
