package shard

import (
	"slices"
	"testing"
)

// TestClaimsRoundTrip: the claims annotation carries any set of buckets
// through, and a value that is not a bitmap of every bucket is an error.
func TestClaimsRoundTrip(t *testing.T) {
	r := NewRing([]string{"a", "b", "c"}, RingOptions{})
	for _, bs := range [][]int{nil, {0}, {Buckets - 1}, r.Buckets("b"), NewRing([]string{"a"}, RingOptions{}).Buckets("a")} {
		got, err := DecodeClaims(EncodeClaims(bs))
		if err != nil {
			t.Fatal(err)
		}
		var back []int
		for b, c := range got {
			if c {
				back = append(back, b)
			}
		}
		if !slices.Equal(back, bs) {
			t.Fatalf("round trip of %d buckets gave %d", len(bs), len(back))
		}
	}
	for _, bad := range []string{"zz", "00", EncodeClaims(nil) + "00"} {
		if _, err := DecodeClaims(bad); err == nil {
			t.Errorf("DecodeClaims(%.10q...) gave no error", bad)
		}
	}
}
