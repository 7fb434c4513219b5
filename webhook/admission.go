package webhook

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"mime"
	"net/http"
	"reflect"
	"sync"

	"go.opentelemetry.io/otel/trace"
	admissionv1 "k8s.io/api/admission/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"

	"github.com/loom-k8s/loom/internal/jsondec"
)

// maxReviewBytes bounds a review's body. The API server limits objects to
// about 3 MiB in etcd; a review carries up to two of them.
const maxReviewBytes = 7 << 20

// Warnings are sent back with an admission answer; kubectl prints each as
// "Warning: ...".
type Warnings []string

// AdmissionFunc answers one admission request. It is the low-level form:
// ValidatorFor and Mutating build one from typed methods or a typed
// function.
type AdmissionFunc func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse

// Admission serves AdmissionReviews (admission.k8s.io/v1) with f. A body
// that is not a review (wrong content type, not JSON, no request, no uid)
// gets 400 Bad Request and a message naming the problem; a panic in f is
// recovered and answered with a denial (500), so one bad object cannot take
// the webhook down.
func Admission(f AdmissionFunc) http.Handler {
	return http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		review, status, err := readReview(r)
		if err != nil {
			http.Error(w, "webhook: "+err.Error(), status)
			return
		}
		resp := call(r.Context(), f, review.Request)
		resp.UID = review.Request.UID
		traceAdmission(trace.SpanFromContext(r.Context()), review.Request, resp)
		out := admissionv1.AdmissionReview{TypeMeta: review.TypeMeta, Response: resp}
		w.Header().Set("Content-Type", "application/json")
		if err := json.NewEncoder(w).Encode(&out); err != nil {
			return // the connection is gone
		}
	})
}

func call(ctx context.Context, f AdmissionFunc, req *admissionv1.AdmissionRequest) (resp *admissionv1.AdmissionResponse) {
	defer func() {
		if p := recover(); p != nil {
			notePanic(ctx, false)
			resp = Denied(apierrors.NewInternalError(fmt.Errorf("webhook panicked: %v", p)))
		}
	}()
	resp = f(ctx, req)
	if resp == nil {
		resp = Denied(apierrors.NewInternalError(errors.New("webhook returned no answer")))
	}
	return resp
}

func readReview(r *http.Request) (*admissionv1.AdmissionReview, int, error) {
	body, status, err := readBody(r)
	if err != nil {
		return nil, status, err
	}
	var review admissionv1.AdmissionReview
	if err := json.Unmarshal(body, &review); err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("the body is not an AdmissionReview: %w", err)
	}
	if review.APIVersion != "admission.k8s.io/v1" || review.Kind != "AdmissionReview" {
		return nil, http.StatusBadRequest, fmt.Errorf("got apiVersion %q kind %q, want admission.k8s.io/v1 AdmissionReview", review.APIVersion, review.Kind)
	}
	if review.Request == nil {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview has no request")
	}
	if review.Request.UID == "" {
		return nil, http.StatusBadRequest, errors.New("the AdmissionReview's request has no uid")
	}
	return &review, 0, nil
}

// readBody reads a review's body: JSON, and at most maxReviewBytes. On
// error it returns the HTTP status to answer with.
func readBody(r *http.Request) ([]byte, int, error) {
	if mt, _, _ := mime.ParseMediaType(r.Header.Get("Content-Type")); mt != "application/json" {
		return nil, http.StatusUnsupportedMediaType, fmt.Errorf("content type %q, want application/json", r.Header.Get("Content-Type"))
	}
	body, err := io.ReadAll(io.LimitReader(r.Body, maxReviewBytes+1))
	if err != nil {
		return nil, http.StatusBadRequest, fmt.Errorf("reading the review: %w", err)
	}
	if len(body) > maxReviewBytes {
		return nil, http.StatusRequestEntityTooLarge, fmt.Errorf("review larger than %d bytes", maxReviewBytes)
	}
	return body, 0, nil
}

// Allowed answers yes, with optional warnings.
func Allowed(warnings ...string) *admissionv1.AdmissionResponse {
	return &admissionv1.AdmissionResponse{Allowed: true, Warnings: warnings}
}

// Denied answers no because of err. An error carrying an API status (such
// as apierrors.NewInvalid or NewForbidden, found with errors.As) is sent
// with its code, reason and details; any other error as 403 Forbidden with
// its message. The API server shows the message to the client, as
// `admission webhook "NAME" denied the request: MESSAGE`.
func Denied(err error, warnings ...string) *admissionv1.AdmissionResponse {
	var st apierrors.APIStatus
	var status metav1.Status
	if errors.As(err, &st) {
		status = st.Status()
	} else {
		status = metav1.Status{Status: metav1.StatusFailure, Code: http.StatusForbidden, Reason: metav1.StatusReasonForbidden, Message: err.Error()}
	}
	return &admissionv1.AdmissionResponse{Allowed: false, Result: &status, Warnings: warnings}
}

// Validator validates the objects of one type, for a validating webhook
// (see ValidatorFor). An error denies the request (see Denied); warnings
// go back either way.
type Validator[T runtime.Object] interface {
	ValidateCreate(ctx context.Context, obj T) (Warnings, error)
	ValidateUpdate(ctx context.Context, oldObj, obj T) (Warnings, error)
	ValidateDelete(ctx context.Context, obj T) (Warnings, error)
}

// Defaulter fills in defaults of the objects of one type, in place, for a
// mutating webhook (see DefaulterFor).
type Defaulter[T runtime.Object] interface {
	Default(ctx context.Context, obj T) error
}

// ValidatorFor serves a Validator: create, update (with the old object) and
// delete (the object being deleted; the API server sends it as oldObject)
// requests go to the matching method; other operations (CONNECT) are
// allowed.
func ValidatorFor[E any, T interface {
	*E
	runtime.Object
}](v Validator[T]) http.Handler {
	return Admission(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		var warnings Warnings
		var err error
		switch req.Operation {
		case admissionv1.Create:
			obj, derr := decode[E, T](req.Object, "object")
			if derr != nil {
				return badObject(derr)
			}
			warnings, err = v.ValidateCreate(ctx, obj)
		case admissionv1.Update:
			obj, derr := decode[E, T](req.Object, "object")
			if derr != nil {
				return badObject(derr)
			}
			old, derr := decode[E, T](req.OldObject, "oldObject")
			if derr != nil {
				return badObject(derr)
			}
			warnings, err = v.ValidateUpdate(ctx, old, obj)
		case admissionv1.Delete:
			old, derr := decode[E, T](req.OldObject, "oldObject")
			if derr != nil {
				return badObject(derr)
			}
			warnings, err = v.ValidateDelete(ctx, old)
		default:
			return Allowed()
		}
		if err != nil {
			return Denied(err, warnings...)
		}
		return Allowed(warnings...)
	})
}

// DefaulterFor serves a Defaulter: the object of a create or update is
// decoded, defaulted in place, and answered with the JSON patch between the
// two. The patch only adds and replaces: "remove" operations are left out,
// because a field missing from the Go type (an unknown or newer field)
// would otherwise be removed from the object; a defaulter that must clear a
// field should use Mutating with AllowRemovals.
func DefaulterFor[E any, T interface {
	*E
	runtime.Object
}](d Defaulter[T]) http.Handler {
	return Mutating[E, T](func(ctx context.Context, _ *admissionv1.AdmissionRequest, obj T) error {
		return d.Default(ctx, obj)
	}, MutatingOptions{})
}

// MutatingOptions configure Mutating.
type MutatingOptions struct {
	// AllowRemovals keeps "remove" operations in the patch. Default false:
	// they are dropped, so that fields the Go type does not know survive.
	AllowRemovals bool
}

// Mutating serves a mutating webhook from a function that changes obj in
// place. Requests other than create and update are allowed unchanged. The
// answer carries the JSON patch (RFC 6902) from the object as sent to the
// object as changed; none when nothing changed.
func Mutating[E any, T interface {
	*E
	runtime.Object
}](mutate func(ctx context.Context, req *admissionv1.AdmissionRequest, obj T) error, opts MutatingOptions) http.Handler {
	return Admission(func(ctx context.Context, req *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
		if req.Operation != admissionv1.Create && req.Operation != admissionv1.Update {
			return Allowed()
		}
		obj, err := decode[E, T](req.Object, "object")
		if err != nil {
			return badObject(err)
		}
		if err := mutate(ctx, req, obj); err != nil {
			return Denied(err)
		}
		patched, err := json.Marshal(obj)
		if err != nil {
			return Denied(apierrors.NewInternalError(fmt.Errorf("encoding the mutated object: %w", err)))
		}
		patch, err := jsonPatch(req.Object.Raw, patched, opts.AllowRemovals)
		if err != nil {
			return Denied(apierrors.NewInternalError(err))
		}
		resp := Allowed()
		if len(patch) > 0 {
			pt := admissionv1.PatchTypeJSONPatch
			resp.Patch, resp.PatchType = patch, &pt
		}
		return resp
	})
}

func decode[E any, T interface {
	*E
	runtime.Object
}](raw runtime.RawExtension, field string) (T, error) {
	if len(raw.Raw) == 0 {
		return nil, fmt.Errorf("the request has no %s", field)
	}
	obj := T(new(E))
	if err := decodeTyped(raw.Raw, obj); err != nil {
		return nil, fmt.Errorf("decoding the request's %s into %s: %w", field, reflect.TypeFor[E]().Name(), err)
	}
	return obj, nil
}

var fastTypes sync.Map // reflect.Type → bool

// decodeTyped decodes JSON into obj with internal/jsondec's typed decoder
// (the semantics of apimachinery's util/json, differential-tested), for
// types it can plan, and with encoding/json otherwise (types that decode
// themselves, such as Unstructured).
func decodeTyped(data []byte, obj any) error {
	t := reflect.TypeOf(obj)
	ok, found := fastTypes.Load(t)
	if !found {
		ok = t.Kind() == reflect.Pointer && t.Elem().Kind() == reflect.Struct &&
			!t.Implements(reflect.TypeFor[json.Unmarshaler]()) && jsondec.TypedSupported(t.Elem())
		fastTypes.Store(t, ok)
	}
	if ok.(bool) {
		return jsondec.Decode(data, obj)
	}
	return json.Unmarshal(data, obj)
}

func badObject(err error) *admissionv1.AdmissionResponse {
	return Denied(apierrors.NewBadRequest("webhook: " + err.Error()))
}
