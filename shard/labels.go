package shard

import (
	"errors"
	"fmt"
	"maps"
	"strconv"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
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

// SetBucket gives obj, of kind gk, its bucket label for ring, as the
// assignment webhook would: before it is created, so that it is in its
// shard's cache from its first watch event, and neither the webhook nor
// the leader has to label it. The labels are replaced by a copy, so a map
// obj shares with another object (one read from a cache, say) is left
// alone. An object that has neither a name nor a controller owner yet
// (generateName) is left unlabelled: its key is not known before the API
// server names it, and the leader labels it.
func SetBucket(ring string, gk schema.GroupKind, obj metav1.Object) {
	if obj.GetName() == "" {
		ref := metav1.GetControllerOf(obj)
		if ref == nil {
			return
		}
		if _, err := schema.ParseGroupVersion(ref.APIVersion); err != nil {
			return
		}
	}
	key, want := BucketLabel(ring), bucketValue(gk, obj)
	if obj.GetLabels()[key] == want {
		return
	}
	labels := maps.Clone(obj.GetLabels())
	if labels == nil {
		labels = map[string]string{}
	}
	labels[key] = want
	obj.SetLabels(labels)
}

// bucketValue is the value of obj's bucket label: its bucket, in decimal.
func bucketValue(gk schema.GroupKind, obj metav1.Object) string {
	return strconv.Itoa(Bucket(Key(gk, obj)))
}

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
