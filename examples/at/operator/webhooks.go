package operator

import (
	"context"
	"fmt"
	"net/http"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/util/validation/field"

	"github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	"github.com/loom-k8s/loom/webhook"
)

// The webhooks, from which controller-gen writes config/webhook/manifests.yaml
// (with a Service reference, for a cluster; tests and local runs switch it
// to a URL with webhook.Injector). Both see v1alpha1: with the default
// matchPolicy (Equivalent), the API server converts a v1beta1 request
// through the conversion webhook before calling them.
//
// +kubebuilder:webhook:path=/validate-at,mutating=false,failurePolicy=fail,sideEffects=None,groups=cnat.programming-kubernetes.info,resources=ats,verbs=create;update,versions=v1alpha1,name=vat.cnat.programming-kubernetes.info,admissionReviewVersions=v1
// +kubebuilder:webhook:path=/default-at,mutating=true,failurePolicy=fail,sideEffects=None,groups=cnat.programming-kubernetes.info,resources=ats,verbs=create;update,versions=v1alpha1,name=mat.cnat.programming-kubernetes.info,admissionReviewVersions=v1

// DefaultCommand is what the defaulting webhook puts in an At without a
// command.
const DefaultCommand = `echo "Kubernetes native rocks!"`

// Webhooks returns the At's webhook handlers by path: validation,
// defaulting and conversion between v1alpha1 and v1beta1. now may be nil
// for time.Now.
func Webhooks(now func() time.Time) map[string]http.Handler {
	if now == nil {
		now = time.Now
	}
	return map[string]http.Handler{
		"/validate-at": webhook.ValidatorFor[v1alpha1.At](&Validator{Now: now}),
		"/default-at":  webhook.DefaulterFor[v1alpha1.At](Defaulter{}),
		"/convert":     webhook.Conversion(Scheme()),
	}
}

// RegisterWebhooks registers Webhooks on srv.
func RegisterWebhooks(srv *webhook.Server, now func() time.Time) {
	for path, h := range Webhooks(now) {
		srv.Register(path, h)
	}
}

// Validator rejects an At whose schedule is in the past when it is created,
// or when its schedule is changed. An At left alone is not rejected later,
// when its time has passed (updates of its finalizer must go through).
type Validator struct {
	Now func() time.Time
}

func (v *Validator) ValidateCreate(_ context.Context, at *v1alpha1.At) (webhook.Warnings, error) {
	return nil, v.checkSchedule(at)
}

func (v *Validator) ValidateUpdate(_ context.Context, old, at *v1alpha1.At) (webhook.Warnings, error) {
	if old.Spec.Schedule == at.Spec.Schedule {
		return nil, nil
	}
	if old.Status.Phase != "" && old.Status.Phase != v1alpha1.PhasePending {
		return nil, invalid(at, field.Forbidden(field.NewPath("spec", "schedule"), "cannot change once the At is "+string(old.Status.Phase)))
	}
	return nil, v.checkSchedule(at)
}

func (v *Validator) ValidateDelete(context.Context, *v1alpha1.At) (webhook.Warnings, error) {
	return nil, nil
}

func (v *Validator) checkSchedule(at *v1alpha1.At) error {
	p := field.NewPath("spec", "schedule")
	when, err := time.Parse(time.RFC3339, at.Spec.Schedule)
	if err != nil {
		return invalid(at, field.Invalid(p, at.Spec.Schedule, "not an RFC 3339 time"))
	}
	if now := v.Now(); when.Before(now.Add(-time.Second)) {
		return invalid(at, field.Invalid(p, at.Spec.Schedule,
			fmt.Sprintf("is in the past (now is %s)", now.UTC().Format(time.RFC3339))))
	}
	return nil
}

func invalid(at *v1alpha1.At, errs ...*field.Error) error {
	return apierrors.NewInvalid(v1alpha1.GroupVersion.WithKind("At").GroupKind(), at.Name, errs)
}

// Defaulter fills in the command of an At that has none.
type Defaulter struct{}

func (Defaulter) Default(_ context.Context, at *v1alpha1.At) error {
	if at.Spec.Command == "" {
		at.Spec.Command = DefaultCommand
	}
	return nil
}
