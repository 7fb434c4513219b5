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

// Label is the label that assigns an object to a shard of ring: its value
// is the shard's identity. A sharded replica's informers select the
// objects whose label names it.
func Label(ring string) string { return "shard.loom.dev/" + ring }

// DrainLabel marks an object that is moving off a live shard. The shard
// that holds it finishes any reconcile of it in flight, then removes both
// labels; only then is it assigned to its new shard.
func DrainLabel(ring string) string { return "drain.shard.loom.dev/" + ring }

// BucketLabel holds the bucket (see [Bucket]) of an object of a kind that
// is selected by bucket: a sharded kind that no sharded controller
// reconciles, whose objects follow their controller owner (see
// [Shard.ByBucket]). Its value, a decimal number, is written once and
// never changes with the ring, so such objects are never moved: each
// shard selects the buckets the ring gives it.
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
	for _, l := range []string{Label(ring), DrainLabel(ring), BucketLabel(ring)} {
		if errs := validation.IsQualifiedName(l); len(errs) > 0 {
			return fmt.Errorf("%w: ring %q makes the label %q: %s", ErrInvalid, ring, l, strings.Join(errs, "; "))
		}
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
