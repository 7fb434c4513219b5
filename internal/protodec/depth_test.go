package protodec

import (
	"errors"
	"fmt"
	"reflect"
	"slices"
	"strings"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/internal/intern"
)

// node is a recursive message, as a CRD's JSONSchemaProps is: a message
// of this type can nest without a bound set by its type.
type node struct {
	Name  string          `protobuf:"bytes,1,opt,name=name"`
	Child *node           `protobuf:"bytes,2,opt,name=child"`
	Kids  []node          `protobuf:"bytes,3,rep,name=kids"`
	Props map[string]node `protobuf:"bytes,4,rep,name=props"`
}

// wrapped holds a node one level down, so that the node's repeated
// fields are below the top level: decoded for sharing as parts, where
// the top-level message's are decoded as the items of a list.
type wrapped struct {
	Node node `protobuf:"bytes,1,opt,name=node"`
}

// decodeBoth decodes data as a node and, wrapped, as a wrapped (one level
// more, so at limit+1), with o, and checks that both give the same node
// or the same error; it returns the node's. With sharing, one may find
// data too deep where the other decodes it, taking a deep part from the
// table or from a shallower place in data (see MaxDepth): that one must
// then decode data right.
func decodeBoth(t *testing.T, data []byte, o intern.Options, limit int) (node, error) {
	t.Helper()
	var n node
	err := unmarshalWithLimit(data, &n, o, limit)
	var w wrapped
	werr := unmarshalWithLimit(appendBytesField(nil, 1, data), &w, o, limit+1)
	if o.Share != nil && (err == nil) != (werr == nil) && (errors.Is(err, ErrTooDeep) || errors.Is(werr, ErrTooDeep)) {
		got := n
		if err != nil {
			got = w.Node
		}
		var full node
		if rerr := refDecode(data, &full, 0, 1<<20); rerr != nil || !reflect.DeepEqual(got, full) {
			t.Fatalf("limit %d: decoded a part deeper than the limit as\n%+v\nwant\n%+v (%v)", limit, got, full, rerr)
		}
		return n, err
	}
	if (err == nil) != (werr == nil) || errors.Is(err, ErrTooDeep) != errors.Is(werr, ErrTooDeep) && !malformed(data) {
		t.Fatalf("limit %d: as a node: %v; wrapped: %v", limit, err, werr)
	}
	if err == nil && !reflect.DeepEqual(n, w.Node) {
		t.Fatalf("limit %d: as a node:\n%+v\nwrapped:\n%+v", limit, n, w.Node)
	}
	return n, err
}

// malformed reports whether data fails to decode as a node whatever the
// depth limit: a message both too deep and otherwise broken (truncated,
// say) may be refused for either reason first, depending on the order in
// which a decoder meets them, so both errors are right.
func malformed(data []byte) bool {
	var n node
	return refDecode(data, &n, 0, 1<<20) != nil
}

func appendVarint(b []byte, v uint64) []byte {
	for v >= 0x80 {
		b = append(b, byte(v)|0x80)
		v >>= 7
	}
	return append(b, byte(v))
}

// appendBytesField appends field num, of wire type 2, holding payload.
func appendBytesField(b []byte, num int, payload []byte) []byte {
	b = appendVarint(b, uint64(num)<<3|2)
	b = appendVarint(b, uint64(len(payload)))
	return append(b, payload...)
}

// nested returns a node message levels deep (the top level included),
// each level inside the one above through the fields nums in turn (2:
// child, 3: kids, 4: props), the innermost holding only a name.
func nested(levels int, nums ...int) []byte {
	msg := appendBytesField(nil, 1, []byte("leaf"))
	for i := levels - 2; i >= 0; i-- {
		num := nums[i%len(nums)]
		inner := msg
		if num == 4 { // a map entry: {1: key, 2: value}
			inner = appendBytesField(appendBytesField(nil, 1, []byte("k")), 2, msg)
		}
		msg = appendBytesField(nil, num, inner)
	}
	return msg
}

// TestDepthLimit: a node nested MaxDepth levels decodes; one nested a
// level more fails with a *DepthError that matches ErrTooDeep and names
// the fields down to it.
func TestDepthLimit(t *testing.T) {
	var ok node
	if err := Unmarshal(nested(MaxDepth, 2), &ok); err != nil {
		t.Fatalf("%d levels: %v", MaxDepth, err)
	}
	levels, n := 1, &ok
	for ; n.Child != nil; n = n.Child {
		levels++
	}
	if levels != MaxDepth || n.Name != "leaf" {
		t.Fatalf("decoded %d levels, innermost named %q, want %d and leaf", levels, n.Name, MaxDepth)
	}

	for _, tc := range []struct {
		name string
		opts intern.Options
	}{{"plain", intern.Options{}}, {"sharing", intern.Options{Share: intern.New(), Structs: true}}} {
		t.Run(tc.name, func(t *testing.T) {
			var got node
			err := UnmarshalWith(nested(MaxDepth+1, 2), &got, tc.opts)
			if !errors.Is(err, ErrTooDeep) {
				t.Fatalf("%d levels: got %v, want ErrTooDeep", MaxDepth+1, err)
			}
			var de *DepthError
			if !errors.As(err, &de) || de.Limit != MaxDepth {
				t.Fatalf("error %#v is not a *DepthError with Limit %d", err, MaxDepth)
			}
			if p := de.Path(); len(p) != MaxDepth || slices.ContainsFunc(p, func(s string) bool { return s != "child" }) {
				t.Fatalf("path of %d names (first %q), want %d times child", len(p), p[:min(3, len(p))], MaxDepth)
			}
			if msg := err.Error(); !strings.Contains(msg, "more than 10000 levels deep, at child.child") || len(msg) > 300 {
				t.Fatalf("message %q", msg)
			}
		})
	}
}

// TestDepthLimitEveryPath checks the limit through each way a message
// nests (a pointer, a repeated field, a map's values), with and without
// sharing (which decodes parts with decoders of their own), at a low
// limit: limit levels decode, limit+1 do not, and the error's path names
// the fields.
func TestDepthLimitEveryPath(t *testing.T) {
	const limit = 6
	for _, nums := range [][]int{{2}, {3}, {4}, {3, 4, 2}, {4, 3}} {
		for _, sharing := range []bool{false, true} {
			name := fmt.Sprintf("fields %v sharing %v", nums, sharing)
			// Decode each twice, so that with sharing the second meets
			// its parts again: they are decoded by decoders of their own
			// and put in the table. A table of its own for each message
			// (see TestDepthLimitTable).
			var ok, deep intern.Options
			if sharing {
				ok = intern.Options{Share: intern.New(), Structs: true}
				deep = intern.Options{Share: intern.New(), Structs: true}
			}
			for range 2 {
				got, err := decodeBoth(t, nested(limit, nums...), ok, limit)
				if err != nil {
					t.Fatalf("%s: %d levels: %v", name, limit, err)
				}
				var want node
				if err := refDecode(nested(limit, nums...), &want, 0, 1<<20); err != nil {
					t.Fatal(err)
				}
				if !reflect.DeepEqual(&got, &want) {
					t.Fatalf("%s: got %+v, want %+v", name, got, want)
				}
				_, err = decodeBoth(t, nested(limit+1, nums...), deep, limit)
				var de *DepthError
				if !errors.As(err, &de) || !errors.Is(err, ErrTooDeep) || de.Limit != limit {
					t.Fatalf("%s: %d levels: got %v, want a *DepthError", name, limit+1, err)
				}
				var wantPath []string
				for i := range limit {
					wantPath = append(wantPath, map[int]string{2: "child", 3: "kids", 4: "props"}[nums[i%len(nums)]])
				}
				if p := de.Path(); !slices.Equal(p, wantPath) {
					t.Fatalf("%s: path %q, want %q", name, p, wantPath)
				}
			}
		}
	}
}

// TestDepthLimitTable: a part of a message taken from the table is not
// decoded again, so its depth does not count: a message that is too deep
// decodes when its deep part was put in the table by the decode of a
// shallower message.
func TestDepthLimitTable(t *testing.T) {
	const limit = 4
	o := intern.Options{Share: intern.New(), Structs: true}
	for range 3 { // its parts met often enough to be put in the table
		if _, err := decodeBoth(t, nested(limit, 2), o, limit); err != nil {
			t.Fatal(err)
		}
	}
	// nested(limit+1) is a node whose child is nested(limit).
	var got node
	if err := unmarshalWithLimit(nested(limit+1, 2), &got, o, limit); err != nil {
		t.Fatalf("with its part in the table: %v", err)
	}
	var want node
	if err := refDecode(nested(limit+1, 2), &want, 0, 1<<20); err != nil || !reflect.DeepEqual(&got, &want) {
		t.Fatalf("got %+v, want %+v (%v)", got, want, err)
	}
}

// TestDepthLimitPod: a Pod whose deepest part is 8 levels down decodes
// at a limit of 8 and not of 7, where the error names the fields down to
// the part.
func TestDepthLimitPod(t *testing.T) {
	pod := examplePod()
	sel := &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{{Key: "app", Operator: metav1.LabelSelectorOpIn, Values: []string{"web"}}}}
	pod.Spec.Affinity = &corev1.Affinity{PodAffinity: &corev1.PodAffinity{
		PreferredDuringSchedulingIgnoredDuringExecution: []corev1.WeightedPodAffinityTerm{{
			Weight: 1, PodAffinityTerm: corev1.PodAffinityTerm{LabelSelector: sel, TopologyKey: "zone"}}}}}
	data, _ := pod.Marshal()
	// pod > spec > affinity > podAffinity > weighted term > term >
	// labelSelector > matchExpressions item: 8 levels.
	const depth = 8
	var got corev1.Pod
	if err := unmarshalWithLimit(data, &got, intern.Options{}, depth); err != nil {
		t.Fatalf("limit %d: %v", depth, err)
	}
	if !reflect.DeepEqual(pod, &got) {
		t.Fatal("decoded Pod differs")
	}
	err := unmarshalWithLimit(data, &corev1.Pod{}, intern.Options{}, depth-1)
	var de *DepthError
	if !errors.As(err, &de) {
		t.Fatalf("limit %d: got %v, want a *DepthError", depth-1, err)
	}
	want := "spec.affinity.podAffinity.preferredDuringSchedulingIgnoredDuringExecution.podAffinityTerm.labelSelector.matchExpressions"
	if p := strings.Join(de.Path(), "."); p != want {
		t.Fatalf("path %s, want %s", p, want)
	}
}

// refDecode is a plain reference decoder for node, with its own depth
// count: depth is the caller's, and a message deeper than limit fails
// with ErrTooDeep.
func refDecode(b []byte, n *node, depth, limit int) error {
	if depth >= limit {
		return ErrTooDeep
	}
	for len(b) > 0 {
		num, wt, _, data, rest, err := next(b)
		if err != nil {
			return err
		}
		b = rest
		if num < 1 || num > 4 {
			continue
		}
		if wt != 2 {
			return fmt.Errorf("field %d: wire type %d", num, wt)
		}
		switch num {
		case 1:
			n.Name = string(data)
		case 2:
			if n.Child == nil {
				n.Child = &node{}
			}
			if err := refDecode(data, n.Child, depth+1, limit); err != nil {
				return err
			}
		case 3:
			n.Kids = append(n.Kids, node{})
			if err := refDecode(data, &n.Kids[len(n.Kids)-1], depth+1, limit); err != nil {
				return err
			}
		case 4:
			// Like the generated code, the entry's last key and last
			// value count, and the value is decoded once, at the end.
			var key string
			var val []byte
			haveVal := false
			for len(data) > 0 {
				num, wt, _, payload, rest, err := next(data)
				if err != nil {
					return err
				}
				data = rest
				if num != 1 && num != 2 {
					continue
				}
				if wt != 2 {
					return fmt.Errorf("map entry field %d: wire type %d", num, wt)
				}
				if num == 1 {
					key = string(payload)
				} else {
					val, haveVal = payload, true
				}
			}
			var v node
			if haveVal {
				if err := refDecode(val, &v, depth+1, limit); err != nil {
					return err
				}
			}
			if n.Props == nil {
				n.Props = map[string]node{}
			}
			n.Props[key] = v
		}
	}
	return nil
}

// FuzzDepth decodes arbitrary bytes as a node, a recursive message, at a
// low depth limit, with and without sharing: the result must be the
// reference decoder's, and ErrTooDeep must come exactly when the
// reference finds the message too deep.
func FuzzDepth(f *testing.F) {
	f.Add(nested(4, 2), uint8(4))
	f.Add(nested(5, 3, 4), uint8(4))
	f.Add(nested(9, 4, 2, 3), uint8(8))
	f.Add(append(nested(3, 3), nested(6, 3)...), uint8(5))
	f.Fuzz(func(t *testing.T, data []byte, limit uint8) {
		lim := int(limit%16) + 1
		var want node
		werr := refDecode(data, &want, 0, lim)
		for _, o := range []intern.Options{{}, {Share: intern.New(), Structs: true}} {
			// Twice: with sharing, the second decode meets the parts
			// the first put in the table.
			for range 2 {
				got, gerr := decodeBoth(t, data, o, lim)
				if o.Share != nil && gerr == nil && errors.Is(werr, ErrTooDeep) {
					// A part deeper than the limit can come from the
					// table or from a shallower place in data
					// (TestDepthLimitTable): the result must still be
					// right.
					var full node
					if err := refDecode(data, &full, 0, 1<<20); err != nil || !reflect.DeepEqual(&got, &full) {
						t.Fatalf("limit %d, deep part from the table:\n got %+v\nwant %+v (%v)", lim, got, full, err)
					}
					continue
				}
				if (gerr == nil) != (werr == nil) || errors.Is(gerr, ErrTooDeep) != errors.Is(werr, ErrTooDeep) && !malformed(data) {
					t.Fatalf("limit %d, sharing %v: got error %v, reference %v", lim, o.Share != nil, gerr, werr)
				}
				if gerr == nil && werr == nil && !reflect.DeepEqual(&got, &want) {
					t.Fatalf("limit %d, sharing %v:\n got %+v\nwant %+v", lim, o.Share != nil, got, want)
				}
			}
		}
	})
}
