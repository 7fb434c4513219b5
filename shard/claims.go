package shard

import (
	"encoding/hex"
	"fmt"
)

// ClaimsAnnotation, on a shard's Lease, lists the buckets the shard
// claims: those it holds and those the ring gives it. It is a bitmap of
// Buckets bits in hexadecimal, bucket b being bit b%8 of byte b/8.
const ClaimsAnnotation = "shard.loom.dev/claims"

// EncodeClaims returns the ClaimsAnnotation value of the buckets bs.
func EncodeClaims(bs []int) string {
	var m [Buckets / 8]byte
	for _, b := range bs {
		m[b/8] |= 1 << (b % 8)
	}
	return hex.EncodeToString(m[:])
}

// DecodeClaims returns, by bucket, whether v, a value of
// ClaimsAnnotation, claims it. An empty v claims none.
func DecodeClaims(v string) ([Buckets]bool, error) {
	var out [Buckets]bool
	if v == "" {
		return out, nil
	}
	m, err := hex.DecodeString(v)
	if err != nil || len(m) != Buckets/8 {
		return out, fmt.Errorf("shard: annotation %s is not a bitmap of %d buckets", ClaimsAnnotation, Buckets)
	}
	for b := range Buckets {
		out[b] = m[b/8]&(1<<(b%8)) != 0
	}
	return out, nil
}
