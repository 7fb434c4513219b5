package shard

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
)

// TestBucketSelector checks that the selector of a set of buckets matches
// exactly the objects labelled with one of them, whichever way it is
// written, and never one without the label; and that keepBuckets keeps
// exactly the objects it selects, and those without the label.
func TestBucketSelector(t *testing.T) {
	l := BucketLabel("r")
	r3 := NewRing([]string{"a", "b", "c"}, RingOptions{})
	r2 := NewRing([]string{"a", "b"}, RingOptions{})
	for _, tc := range []struct {
		name string
		bs   []int
		form string // what the selector starts with after the label
	}{
		{"none", nil, "=none"},
		{"all", NewRing([]string{"a"}, RingOptions{}).Buckets("a"), ""},
		{"a third", r3.Buckets("a"), " in ("},
		{"more than half", append(r2.Buckets("a"), r3.Buckets("c")...), "," + l + " notin ("},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bs := slices.Clone(tc.bs)
			slices.Sort(bs)
			bs = slices.Compact(bs)
			sel := bucketSelector(l, bs)
			if !strings.HasPrefix(sel, l+tc.form) {
				t.Fatalf("selector %.80q..., want it to start with %q", sel, l+tc.form)
			}
			parsed, err := labels.Parse(sel)
			if err != nil {
				t.Fatalf("selector does not parse: %v", err)
			}
			for b := range Buckets {
				want := slices.Contains(bs, b)
				if got := parsed.Matches(labels.Set{l: strconv.Itoa(b)}); got != want {
					t.Fatalf("bucket %d: matched %v, want %v", b, got, want)
				}
			}
			if parsed.Matches(labels.Set{"other": "1"}) {
				t.Error("an object without the label matches")
			}
			keep, err := keepBuckets(l, bs)
			if err != nil {
				t.Fatal(err)
			}
			values := []string{"01", "x", "", "1024", "-1"}
			for b := range Buckets {
				values = append(values, strconv.Itoa(b))
			}
			for _, v := range values {
				set := labels.Set{l: v}
				if got, want := keep(&metav1.ObjectMeta{Labels: set}), parsed.Matches(set); got != want {
					t.Fatalf("label %q: kept %v, selected %v", v, got, want)
				}
			}
			if !keep(&metav1.ObjectMeta{Labels: map[string]string{"other": "1"}}) {
				t.Error("a cached object without the label, which a Transform took off, is let go")
			}
		})
	}
}
