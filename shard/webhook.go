package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

// AdmissionOptions configure [Admission]. Ring and Members are required.
type AdmissionOptions struct {
	// Ring names the ring; Members is its membership, started by the
	// caller.
	Ring    string
	Members *Members
	// Kinds are the sharded kinds; objects of other kinds pass unchanged.
	Kinds []schema.GroupKind
	// ByBucket, when set, says which of Kinds are selected by bucket (see
	// Shard.ByBucket): their objects get the bucket label instead of the
	// shard label. Default nil: none.
	ByBucket func(schema.GroupKind) bool
	// Metrics counts the objects labelled (reason "new"). Nil means none.
	Metrics Metrics
}

// Admission returns the handler of the assignment webhook: it gives an
// object of a sharded kind that has no shard label the shard the ring
// gives it now, in the same request that creates or updates it, instead of
// a moment later from the leader's watch; an object of a kind selected by
// bucket gets its bucket label instead (see AdmissionOptions.ByBucket),
// whatever the ring. Any replica can answer, since
// each computes the ring from the Leases. An object with a shard label,
// one without a name yet (generateName), or one that comes while no shard
// is live passes unchanged: the leader's watch of unassigned objects
// labels what the webhook did not. Serve it with webhook.Admission (the
// manager's ShardWebhook does), and call it from a webhook made by
// [MutatingWebhook].
func Admission(opts AdmissionOptions) func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	label, drain, bucket := Label(opts.Ring), DrainLabel(opts.Ring), BucketLabel(opts.Ring)
	return func(_ context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		gk := schema.GroupKind{Group: req.Kind.Group, Kind: req.Kind.Kind}
		if !slices.Contains(opts.Kinds, gk) || req.Operation == admissionv1.Delete {
			return allowed()
		}
		var obj metav1.PartialObjectMetadata
		if err := json.Unmarshal(req.Object.Raw, &obj); err != nil {
			return allowed() // not ours to judge: the API server validates objects
		}
		if obj.Namespace == "" {
			obj.Namespace = req.Namespace
		}
		byBucket := opts.ByBucket != nil && opts.ByBucket(gk)
		key, want, ok := label, "", true
		switch {
		case obj.Name == "":
			return allowed()
		case byBucket:
			key, want = bucket, strconv.Itoa(Bucket(Key(gk, &obj)))
			ok = obj.Labels[bucket] != want
		case obj.Labels[label] != "":
			return allowed()
		default:
			want, ok = opts.Members.Ring().Shard(Key(gk, &obj))
		}
		if !ok {
			return allowed()
		}
		var ops []jsonPatchOp
		if obj.Labels == nil {
			ops = append(ops, jsonPatchOp{Op: "add", Path: "/metadata/labels", Value: map[string]string{key: want}})
		} else {
			ops = append(ops, jsonPatchOp{Op: "add", Path: labelPath(key), Value: want})
			if _, ok := obj.Labels[drain]; ok {
				ops = append(ops, jsonPatchOp{Op: "remove", Path: labelPath(drain)})
			}
			if _, ok := obj.Labels[label]; ok && byBucket {
				ops = append(ops, jsonPatchOp{Op: "remove", Path: labelPath(label)})
			}
		}
		patch, err := json.Marshal(ops)
		if err != nil {
			return allowed()
		}
		if opts.Metrics != nil {
			opts.Metrics.ObserveMove(opts.Ring, "new")
		}
		pt := admissionv1.PatchTypeJSONPatch
		return &admissionv1.AdmissionResponse{Allowed: true, Patch: patch, PatchType: &pt}
	}
}

func allowed() *admissionv1.AdmissionResponse { return &admissionv1.AdmissionResponse{Allowed: true} }

// MutatingWebhook returns the webhook that calls the assignment handler
// (see Admission) through cc, for creates and updates of the given
// resources' objects that have neither a shard label nor a bucket label. It fails open
// (failurePolicy Ignore) with a 1 s timeout, so a webhook that cannot
// answer delays no write by more than that, and the leader labels the
// object instead. Name it in a MutatingWebhookConfiguration.
func MutatingWebhook(ring string, resources []client.Resource, cc admissionregistrationv1.WebhookClientConfig) admissionregistrationv1.MutatingWebhook {
	ignore := admissionregistrationv1.Ignore
	none := admissionregistrationv1.SideEffectClassNone
	never := admissionregistrationv1.NeverReinvocationPolicy
	timeout := int32(1)
	w := admissionregistrationv1.MutatingWebhook{
		Name:                    fmt.Sprintf("%s.shard.loom.dev", ring),
		ClientConfig:            cc,
		FailurePolicy:           &ignore,
		SideEffects:             &none,
		TimeoutSeconds:          &timeout,
		ReinvocationPolicy:      &never,
		AdmissionReviewVersions: []string{"v1"},
		ObjectSelector: &metav1.LabelSelector{MatchExpressions: []metav1.LabelSelectorRequirement{
			{Key: Label(ring), Operator: metav1.LabelSelectorOpDoesNotExist},
			{Key: BucketLabel(ring), Operator: metav1.LabelSelectorOpDoesNotExist},
		}},
	}
	for _, r := range resources {
		scope := admissionregistrationv1.ClusterScope
		if r.Namespaced {
			scope = admissionregistrationv1.NamespacedScope
		}
		w.Rules = append(w.Rules, admissionregistrationv1.RuleWithOperations{
			Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create, admissionregistrationv1.Update},
			Rule: admissionregistrationv1.Rule{
				APIGroups: []string{r.Resource.Group}, APIVersions: []string{r.Resource.Version},
				Resources: []string{r.Resource.Resource}, Scope: &scope,
			},
		})
	}
	return w
}
