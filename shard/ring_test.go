package shard

import (
	"fmt"
	"testing"
)

func keys(n int) []string {
	ks := make([]string, n)
	for i := range ks {
		ks[i] = fmt.Sprintf("example.com/Widget/team-%02d/widget-%05d", i%37, i)
	}
	return ks
}

func members(n int) []string {
	ms := make([]string, n)
	for i := range ms {
		ms[i] = fmt.Sprintf("widget-operator-%d", i)
	}
	return ms
}

func assign(r *Ring, ks []string) map[string]string {
	m := make(map[string]string, len(ks))
	for _, k := range ks {
		s, ok := r.Shard(k)
		if !ok {
			panic("no shard")
		}
		m[k] = s
	}
	return m
}

// TestRingBalance checks that each of N members gets between 0.8/N and
// 1.25/N of 20,000 keys.
func TestRingBalance(t *testing.T) {
	ks := keys(20000)
	for _, n := range []int{1, 2, 3, 5, 8} {
		count := map[string]int{}
		for _, s := range assign(NewRing(members(n), RingOptions{}), ks) {
			count[s]++
		}
		if len(count) != n {
			t.Fatalf("%d members, %d got keys", n, len(count))
		}
		for m, c := range count {
			share := float64(c) / float64(len(ks)) * float64(n)
			if share < 0.8 || share > 1.25 {
				t.Errorf("%d members: %s has %d keys, %.2f of a fair share", n, m, c, share)
			}
		}
	}
}

// TestRingMovement checks that adding a member to N moves at most
// 1.3/(N+1) of the keys, all to the new member, and that removing it
// again moves them back.
func TestRingMovement(t *testing.T) {
	ks := keys(20000)
	for n := 1; n <= 6; n++ {
		before := assign(NewRing(members(n), RingOptions{}), ks)
		grown := NewRing(members(n+1), RingOptions{})
		after := assign(grown, ks)
		newcomer := members(n + 1)[n]
		moved := 0
		for k, s := range after {
			if s != before[k] {
				moved++
				if s != newcomer {
					t.Fatalf("%d -> %d members: %s moved from %s to %s, not to the new member", n, n+1, k, before[k], s)
				}
			}
		}
		if limit := 1.3 / float64(n+1); float64(moved)/float64(len(ks)) > limit {
			t.Errorf("%d -> %d members moved %d of %d keys, more than %.3f", n, n+1, moved, len(ks), limit)
		}
		back := assign(NewRing(members(n), RingOptions{}), ks)
		for k, s := range back {
			if s != before[k] {
				t.Fatalf("removing %s moved %s from %s to %s", newcomer, k, before[k], s)
			}
		}
	}
}

// TestRingIsTheSameEverywhere checks that the order of members, and
// duplicates or empty names, do not change the assignment.
func TestRingIsTheSameEverywhere(t *testing.T) {
	ks := keys(2000)
	a := assign(NewRing([]string{"a", "b", "c"}, RingOptions{}), ks)
	b := assign(NewRing([]string{"c", "", "a", "b", "a"}, RingOptions{}), ks)
	for k := range a {
		if a[k] != b[k] {
			t.Fatalf("%s: %s in one ring, %s in the other", k, a[k], b[k])
		}
	}
	if got := NewRing([]string{"c", "", "a", "b", "a"}, RingOptions{}).Members(); fmt.Sprint(got) != "[a b c]" {
		t.Errorf("Members() = %v", got)
	}
}

func TestEmptyRing(t *testing.T) {
	for _, ms := range [][]string{nil, {""}} {
		if s, ok := NewRing(ms, RingOptions{}).Shard("x"); ok || s != "" {
			t.Errorf("members %q: Shard = %q, %v; want none", ms, s, ok)
		}
	}
}

func TestRingHas(t *testing.T) {
	r := NewRing([]string{"c", "a", "b", "a"}, RingOptions{VirtualNodes: 1})
	for _, tc := range []struct {
		member string
		want   bool
	}{{"a", true}, {"b", true}, {"c", true}, {"", false}, {"d", false}, {"aa", false}} {
		if got := r.Has(tc.member); got != tc.want {
			t.Errorf("Has(%q) = %v, want %v", tc.member, got, tc.want)
		}
	}
	if NewRing(nil, RingOptions{}).Has("a") {
		t.Error("an empty ring has a member")
	}
}

// TestHashIsFixed pins the hash: replicas built from different versions
// of this package must agree on the assignment. The values were
// computed apart from this code, from the definitions of FNV-1a and the
// SplitMix64 finalizer.
func TestHashIsFixed(t *testing.T) {
	for s, want := range map[string]uint64{"": 0xf52a15e9a9b5e89b, "a": 0x02c0bdbf481420f8} {
		if got := hashString(s); got != want {
			t.Errorf("hashString(%q) = %#x, want %#x", s, got, want)
		}
	}
}

// TestRingBuckets checks that every bucket has one owner, that Buckets
// lists each member's buckets, and that a key goes to its bucket's owner.
func TestRingBuckets(t *testing.T) {
	r := NewRing(members(3), RingOptions{})
	seen := make([]int, Buckets)
	for _, m := range r.Members() {
		bs := r.Buckets(m)
		if len(bs) == 0 {
			t.Fatalf("%s owns no bucket", m)
		}
		for _, b := range bs {
			seen[b]++
			if o, _ := r.Owner(b); o != m {
				t.Fatalf("Buckets(%s) has %d, whose owner is %s", m, b, o)
			}
		}
	}
	for b, n := range seen {
		if n != 1 {
			t.Fatalf("bucket %d listed %d times", b, n)
		}
	}
	for _, k := range keys(500) {
		b := Bucket(k)
		if b < 0 || b >= Buckets {
			t.Fatalf("Bucket(%q) = %d", k, b)
		}
		s, _ := r.Shard(k)
		if o, _ := r.Owner(b); o != s {
			t.Fatalf("%s: Shard says %s, its bucket's owner is %s", k, s, o)
		}
	}
	for _, b := range []int{-1, Buckets} {
		if _, ok := r.Owner(b); ok {
			t.Errorf("Owner(%d) reports an owner", b)
		}
	}
	if bs := r.Buckets("stranger"); bs != nil {
		t.Errorf("Buckets(stranger) = %v", bs)
	}
	if _, ok := NewRing(nil, RingOptions{}).Owner(0); ok {
		t.Error("an empty ring owns a bucket")
	}
}
