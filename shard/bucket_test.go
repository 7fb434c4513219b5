package shard

import (
	"slices"
	"strconv"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
)

// TestBucketSelector checks that the selector of a set of buckets matches
// exactly the objects labelled with one of them, whichever way it is
// written, and never one without the label.
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
		})
	}
}

// TestWantAndCovers checks the bookkeeping of the buckets a shard's
// informers hold: a bucket counts as held once the lists that began
// after it was wanted are done, a bucket no longer wanted stops counting
// at once, and a Covered call for buckets wanted before is ignored.
func TestWantAndCovers(t *testing.T) {
	members := &Members{ring: NewRing([]string{"a"}, RingOptions{})}
	kinds := []schema.GroupKind{{Kind: "Widget"}, {Kind: "ConfigMap"}}
	s, err := New(nil, ShardOptions{Ring: "r", Identity: "a", Kinds: kinds, Members: members})
	if err != nil {
		t.Fatal(err)
	}
	widget := schema.GroupKind{Kind: "Widget"}
	// Before Reconciles, both kinds count as selected by bucket.
	if !s.ByBucket(widget) || !s.ByBucket(schema.GroupKind{Kind: "ConfigMap"}) || s.ByBucket(schema.GroupKind{Kind: "Secret"}) {
		t.Fatal("ByBucket before Reconciles")
	}
	s.Reconciles(widget)
	if s.ByBucket(widget) || !s.ByBucket(schema.GroupKind{Kind: "ConfigMap"}) {
		t.Fatal("ByBucket after Reconciles(Widget)")
	}
	// Widgets that the ring of a and b gives to a and to b.
	ab := NewRing([]string{"a", "b"}, RingOptions{})
	var stays, leaves *metav1.ObjectMeta
	for i := 0; stays == nil || leaves == nil; i++ {
		o := &metav1.ObjectMeta{Namespace: "ns", Name: "w-" + strconv.Itoa(i)}
		if sh, _ := ab.Shard(Key(widget, o)); sh == "a" {
			stays = o
		} else {
			leaves = o
		}
	}
	if s.Covers(widget, stays) || s.BucketSelector() != BucketLabel("r")+"=none" {
		t.Fatal("a bucket is held before Want")
	}
	all, changed := s.Want()
	if !changed || len(all) != Buckets || s.Covers(widget, stays) {
		t.Fatalf("Want: %d buckets, changed %v; covered before the lists", len(all), changed)
	}
	if _, changed := s.Want(); changed {
		t.Fatal("Want changed with the same ring")
	}
	s.Covered(all)
	if !s.Covers(widget, stays) || !s.Covers(widget, leaves) {
		t.Fatal("not covered after Covered")
	}
	members.ring = ab
	half, changed := s.Want()
	if !changed || !s.Covers(widget, stays) || s.Covers(widget, leaves) {
		t.Fatal("after the ring grew: a kept bucket must stay covered, a lost one must not")
	}
	members.ring = NewRing([]string{"a"}, RingOptions{})
	again, _ := s.Want()
	s.Covered(half) // the lists of the previous Want ended late
	if s.Covers(widget, leaves) {
		t.Fatal("a Covered call for buckets wanted before counted")
	}
	s.Covered(again)
	if !s.Covers(widget, leaves) {
		t.Fatal("not covered after the lists of the last Want")
	}
	// With every sharded kind reconciled, nothing waits for buckets.
	s.Reconciles(schema.GroupKind{Kind: "ConfigMap"})
	members.ring = ab
	s.Want()
	if !s.Covers(widget, leaves) {
		t.Error("Covers is false with no kind selected by bucket")
	}
}
