package shard

import (
	"errors"
	"fmt"
	"strings"

	"k8s.io/apimachinery/pkg/util/validation"
)

// RingLabel labels every shard Lease with the name of its ring, so that
// the replicas of one ring find each other's Leases.
const RingLabel = "shard.loom.dev/ring"

// BucketLabel holds the bucket (see [Bucket]) of an object of a sharded
// kind: the bucket of its key (see [Key]), so an owned object carries its
// owner's. Its value, a decimal number, is written once and never changes
// with the ring: each shard's informers select the buckets it claims, and
// buckets change hands between shards without a write to any object.
func BucketLabel(ring string) string { return "bucket.shard.loom.dev/" + ring }

// ErrInvalid is wrapped by the errors of options that cannot name a ring,
// a shard or its Lease.
var ErrInvalid = errors.New("shard: invalid options")

// validate checks that ring makes valid label keys and that identity is a
// valid label value and, after the ring name, a valid Lease name.
func validate(ring, identity string) error {
	if ring == "" {
		return fmt.Errorf("%w: the ring name is required", ErrInvalid)
	}
	if l := BucketLabel(ring); len(validation.IsQualifiedName(l)) > 0 {
		return fmt.Errorf("%w: ring %q makes the label %q: %s", ErrInvalid, ring, l, strings.Join(validation.IsQualifiedName(l), "; "))
	}
	if identity == "" {
		return nil
	}
	if errs := validation.IsValidLabelValue(identity); len(errs) > 0 {
		return fmt.Errorf("%w: identity %q is not a label value: %s", ErrInvalid, identity, strings.Join(errs, "; "))
	}
	if errs := validation.IsDNS1123Subdomain(leaseName(ring, identity)); len(errs) > 0 {
		return fmt.Errorf("%w: ring %q and identity %q make the Lease name %q: %s", ErrInvalid, ring, identity, leaseName(ring, identity), strings.Join(errs, "; "))
	}
	return nil
}

// leaseName is the name of a shard's Lease.
func leaseName(ring, identity string) string { return ring + "-" + identity }
