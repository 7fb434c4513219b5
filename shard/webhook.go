package shard

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"

	admissionv1 "k8s.io/api/admission/v1"
	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

// AdmissionOptions configure [Admission]. Ring is required.
type AdmissionOptions struct {
	// Ring names the ring.
	Ring string
	// Kinds are the sharded kinds; objects of other kinds pass unchanged.
	Kinds []schema.GroupKind
	// Metrics counts the objects labelled (reason "new"). Nil means none.
	Metrics Metrics
}

// Admission returns the handler of the assignment webhook: it gives an
// object of a sharded kind its bucket label (see BucketLabel) in the same
// request that creates or updates it, instead of a moment later from the
// leader's watch of unlabelled objects. The bucket depends on the object's
// key alone, not on the ring, so any replica can answer, whatever it
// knows of the others. An object without a name yet (generateName) passes
// unchanged, and the leader labels it. Serve it with webhook.Admission
// (the manager's ShardWebhook does), and call it from a webhook made by
// [MutatingWebhook].
func Admission(opts AdmissionOptions) func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
	bucket := BucketLabel(opts.Ring)
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
		want := bucketValue(gk, &obj)
		if obj.Name == "" || obj.Labels[bucket] == want {
			return allowed()
		}
		op := jsonPatchOp{Op: "add", Path: labelPath(bucket), Value: want}
		if obj.Labels == nil {
			op = jsonPatchOp{Op: "add", Path: "/metadata/labels", Value: map[string]string{bucket: want}}
		}
		patch, err := json.Marshal([]jsonPatchOp{op})
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
// resources' objects that have no bucket label. It fails open
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
