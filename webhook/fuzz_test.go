package webhook

// Fuzz targets for what the webhook handlers read from their callers: an
// AdmissionReview or ConversionReview body comes from whoever reaches the
// webhook's port (the API server, but the handler cannot assume so), and
// the patches the mutating handlers compute are applied by the API server
// to the object as it was sent.

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/http"
	"net/http/httptest"
	"reflect"
	"strconv"
	"strings"
	"testing"
	"time"

	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// fuzzAnswerTimeout bounds one request to a handler: more is a hang.
const fuzzAnswerTimeout = 10 * time.Second

// fuzzServe sends body to h as a POST with the content type ct and
// returns the recorded answer. It fails the test if h panics past its own
// recovery, takes longer than fuzzAnswerTimeout, or recovers a panic of
// its own (a panic in the package's code, since the fuzz targets'
// validators, defaulters and conversions do not panic).
func fuzzServe(t *testing.T, h http.Handler, ct string, body []byte) *httptest.ResponseRecorder {
	t.Helper()
	p := &panics{}
	ctx := context.WithValue(t.Context(), panicsKey{}, p)
	req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/fuzz", bytes.NewReader(body))
	if ct != "" {
		req.Header.Set("Content-Type", ct)
	}
	rec := httptest.NewRecorder()
	done := make(chan any, 1)
	go func() {
		defer func() { done <- recover() }()
		h.ServeHTTP(rec, req)
	}()
	select {
	case v := <-done:
		if v != nil {
			t.Fatalf("the handler panicked: %v", v)
		}
	case <-time.After(fuzzAnswerTimeout):
		t.Fatalf("no answer within %v", fuzzAnswerTimeout)
	}
	if a, c := p.admission.Load(), p.conversion.Load(); a+c > 0 {
		t.Fatalf("the handler recovered %d admission and %d conversion panics: %s", a, c, rec.Body)
	}
	return rec
}

// checkClientError checks an answer other than 200: a 4xx with a
// message.
func checkClientError(t *testing.T, rec *httptest.ResponseRecorder) {
	t.Helper()
	if rec.Code < 400 || rec.Code > 499 {
		t.Fatalf("HTTP %d, want 200 or a 4xx: %s", rec.Code, rec.Body)
	}
	if !strings.HasPrefix(rec.Body.String(), "webhook: ") {
		t.Fatalf("HTTP %d without a message: %q", rec.Code, rec.Body)
	}
}

// fuzzContentTypes are the content types FuzzAdmissionReview and
// FuzzConversionReview send, picked by a byte of the input: mostly JSON.
var fuzzContentTypes = []string{"application/json", "application/json", "application/json", "application/json; charset=utf-8",
	"Application/JSON", "", "text/plain", "application/json;;"}

// fuzzValidator denies ConfigMaps with a key "deny", with 422 when it
// is "invalid"; warns on updates that drop keys.
type fuzzValidator struct{}

func (fuzzValidator) check(cm *corev1.ConfigMap) error {
	switch v, ok := cm.Data["deny"]; {
	case ok && v == "invalid":
		return apierrors.NewInvalid(schema.GroupKind{Kind: "ConfigMap"}, cm.Name, field.ErrorList{field.Invalid(field.NewPath("data", "deny"), v, "not allowed")})
	case ok:
		return errors.New("denied")
	}
	return nil
}

func (v fuzzValidator) ValidateCreate(_ context.Context, cm *corev1.ConfigMap) (Warnings, error) {
	return nil, v.check(cm)
}

func (v fuzzValidator) ValidateUpdate(_ context.Context, old, cm *corev1.ConfigMap) (Warnings, error) {
	if len(cm.Data) < len(old.Data) {
		return Warnings{"keys dropped"}, v.check(cm)
	}
	return nil, v.check(cm)
}

func (v fuzzValidator) ValidateDelete(_ context.Context, cm *corev1.ConfigMap) (Warnings, error) {
	return nil, v.check(cm)
}

// fuzzDefault fills in a data key and a label; a key "refuse" makes it
// fail.
func fuzzDefault(cm *corev1.ConfigMap) error {
	if _, ok := cm.Data["refuse"]; ok {
		return errors.New("refused")
	}
	if cm.Data == nil {
		cm.Data = map[string]string{}
	}
	if _, ok := cm.Data["color"]; !ok {
		cm.Data["color"] = "blue"
	}
	if cm.Labels == nil {
		cm.Labels = map[string]string{}
	}
	cm.Labels["defaulted"] = "true"
	return nil
}

type fuzzDefaulter struct{}

func (fuzzDefaulter) Default(_ context.Context, cm *corev1.ConfigMap) error { return fuzzDefault(cm) }

// fuzzMutate defaults, and removes things too: the key "drop", the
// binary data, the owner references.
func fuzzMutate(cm *corev1.ConfigMap) error {
	if err := fuzzDefault(cm); err != nil {
		return err
	}
	delete(cm.Data, "drop")
	cm.BinaryData = nil
	cm.OwnerReferences = nil
	return nil
}

func fuzzAdmissionBody(t interface{ Fatal(...any) }, op admissionv1.Operation, obj, old string) []byte {
	req := &admissionv1.AdmissionRequest{UID: "u-1", Operation: op,
		Kind: metav1.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Resource: metav1.GroupVersionResource{Version: "v1", Resource: "configmaps"}}
	if obj != "" {
		req.Object = runtime.RawExtension{Raw: []byte(obj)}
	}
	if old != "" {
		req.OldObject = runtime.RawExtension{Raw: []byte(old)}
	}
	b, err := json.Marshal(&admissionv1.AdmissionReview{TypeMeta: metav1.TypeMeta{APIVersion: "admission.k8s.io/v1", Kind: "AdmissionReview"}, Request: req})
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// FuzzAdmissionReview sends arbitrary bodies to a validating, a
// defaulting and a mutating handler built by ValidatorFor, DefaulterFor
// and Mutating for ConfigMaps. Each must answer in time, without a
// panic, either a 4xx with a message or 200 with an AdmissionReview of
// the same apiVersion and kind whose response has the request's uid, a
// 4xx status on a denial (a 500 only for an object the patch cannot be
// computed from, see below: nothing here fails inside), and on an
// allowed mutation a JSON patch that, applied to the object as sent,
// gives the mutated object (with the fields the Go type lacks kept,
// unless the handler removes them).
func FuzzAdmissionReview(f *testing.F) {
	cm := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","namespace":"ns","labels":{"app":"web"},"ownerReferences":[{"apiVersion":"v1","kind":"Pod","name":"p","uid":"1"}]},"data":{"k":"v","drop":"x"},"binaryData":{"b":"AAE="}}`
	unknown := `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"b","futureMeta":{"x":[1,2.5,null]}},"data":{"color":"red"},"futureField":[{"a":1}],"a/b~c":true}`
	for _, seed := range []struct {
		body []byte
		ct   uint8
	}{
		{fuzzAdmissionBody(f, admissionv1.Create, cm, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Create, unknown, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Update, unknown, cm), 3},
		{fuzzAdmissionBody(f, admissionv1.Delete, "", `{"data":{"deny":"invalid"}}`), 0},
		{fuzzAdmissionBody(f, admissionv1.Create, `{"data":{"refuse":""}}`, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Create, `{"data":7}`, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Create, `{}`, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Connect, "", ""), 0},
		{[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"operation":"CREATE"}}`), 0},
		{[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":null}`), 0},
		{[]byte(`{"apiVersion":"admission.k8s.io/v1","kind":"AdmissionReview","request":{"uid":"x","operation":"UPDATE","object":null,"oldObject":[]}}`), 0},
		{[]byte(`{`), 0},
		{[]byte(``), 0},
		{[]byte(`null`), 6},
		{fuzzAdmissionBody(f, admissionv1.Create, `{"x":1e400}`, ""), 0},
		{fuzzAdmissionBody(f, admissionv1.Create, `{"data":{"a":"1"},"data":{"b":"\ud800"}}`, ""), 0},
	} {
		f.Add(seed.body, seed.ct)
	}
	handlers := []struct {
		name  string
		h     http.Handler
		apply func(*corev1.ConfigMap) error // what the handler does to an object, nil for none
		keep  bool                          // fields the Go type lacks are kept
	}{
		{"validator", ValidatorFor[corev1.ConfigMap](fuzzValidator{}), nil, false},
		{"defaulter", DefaulterFor[corev1.ConfigMap](fuzzDefaulter{}), fuzzDefault, true},
		{"mutating", Mutating[corev1.ConfigMap](func(_ context.Context, _ *admissionv1.AdmissionRequest, cm *corev1.ConfigMap) error {
			return fuzzMutate(cm)
		}, MutatingOptions{AllowRemovals: true}), fuzzMutate, false},
	}
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		contentType := fuzzContentTypes[int(ct)%len(fuzzContentTypes)]
		for _, h := range handlers {
			rec := fuzzServe(t, h.h, contentType, body)
			if rec.Code != http.StatusOK {
				checkClientError(t, rec)
				continue
			}
			if got := rec.Header().Get("Content-Type"); got != "application/json" {
				t.Fatalf("%s: content type %q", h.name, got)
			}
			var in, out admissionv1.AdmissionReview
			if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
				t.Fatalf("%s: answered 200 to a body that is not a review (%v)", h.name, err)
			}
			if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
				t.Fatalf("%s: the answer is not an AdmissionReview: %v: %s", h.name, err, rec.Body)
			}
			if out.APIVersion != "admission.k8s.io/v1" || out.Kind != "AdmissionReview" || out.Request != nil {
				t.Fatalf("%s: answer %s", h.name, rec.Body)
			}
			resp := out.Response
			if resp == nil || resp.UID != in.Request.UID || resp.UID == "" {
				t.Fatalf("%s: answer %s lacks the response or the request's uid %q", h.name, rec.Body, in.Request.UID)
			}
			if !resp.Allowed {
				if resp.Result == nil || resp.Result.Message == "" || resp.Patch != nil {
					t.Fatalf("%s: denial %s, want a status with a message and no patch", h.name, rec.Body)
				}
				if code := resp.Result.Code; code == http.StatusInternalServerError && h.apply != nil && notJSONObject(in.Request.Object.Raw) {
					// The object decodes into the Go type but is not one
					// the patch can be computed from (a number out of
					// float64's range in a field the type lacks): the
					// API server never sends such an object, since it
					// cannot decode it either.
				} else if code < 400 || code > 499 {
					t.Fatalf("%s: denial %s, want a 4xx status", h.name, rec.Body)
				}
				continue
			}
			if h.apply == nil || (in.Request.Operation != admissionv1.Create && in.Request.Operation != admissionv1.Update) {
				if resp.Patch != nil || resp.PatchType != nil {
					t.Fatalf("%s: a patch for %s: %s", h.name, in.Request.Operation, rec.Body)
				}
				continue
			}
			checkAdmissionPatch(t, h.name, in.Request.Object.Raw, resp, h.apply, h.keep)
		}
	})
}

// notJSONObject reports whether raw is not a JSON object as the patch
// computation reads one.
func notJSONObject(raw []byte) bool {
	_, err := decodeJSONValue(raw)
	return err != nil
}

// checkAdmissionPatch checks that resp's patch, applied to raw, gives the
// object raw decodes to, changed by apply: as the Go type sees it, and
// with keep, with the members of raw the Go type lacks.
func checkAdmissionPatch(t *testing.T, name string, raw []byte, resp *admissionv1.AdmissionResponse, apply func(*corev1.ConfigMap) error, keep bool) {
	t.Helper()
	var want corev1.ConfigMap
	if err := decodeTyped(raw, &want); err != nil {
		t.Fatalf("%s: allowed an object that does not decode: %v", name, err)
	}
	if err := apply(&want); err != nil {
		t.Fatalf("%s: allowed an object the mutation refuses: %v", name, err)
	}
	orig, err := decodeJSONValue(raw)
	if err != nil {
		t.Fatalf("%s: allowed an object that is not a JSON object: %v", name, err)
	}
	patched := any(orig)
	if resp.Patch != nil || resp.PatchType != nil {
		if resp.PatchType == nil || *resp.PatchType != admissionv1.PatchTypeJSONPatch || len(resp.Patch) == 0 {
			t.Fatalf("%s: patch type %v with patch %s", name, resp.PatchType, resp.Patch)
		}
		patched, err = applyJSONPatch(orig, resp.Patch)
		if err != nil {
			t.Fatalf("%s: the patch %s does not apply to %s: %v", name, resp.Patch, raw, err)
		}
	}
	pb, err := json.Marshal(patched)
	if err != nil {
		t.Fatal(err)
	}
	var got corev1.ConfigMap
	if err := decodeTyped(pb, &got); err != nil {
		t.Fatalf("%s: the patched object %s does not decode: %v", name, pb, err)
	}
	if !reflect.DeepEqual(&got, &want) {
		t.Fatalf("%s: the patched object %s decodes to\n%+v\nwant\n%+v", name, pb, got, want)
	}
	wb, _ := json.Marshal(&want)
	wantDoc, err := decodeJSONValue(wb)
	if err != nil {
		t.Fatal(err)
	}
	if keep {
		wantDoc = mergeKeeping(orig, wantDoc)
	}
	if !jsonEqual(patched, wantDoc) {
		t.Fatalf("%s: the patch %s turns %s into\n%s\nwant\n%s", name, resp.Patch, raw, pb, mustMarshal(wantDoc))
	}
}

func mustMarshal(v any) []byte {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	return b
}

// fuzzThing is a kind with two versions: v1, the hub, with a size in
// millimetres; v2 with it in centimetres, as a string.
type fuzzThingV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	SizeMM            int64             `json:"sizeMM"`
	Tags              map[string]string `json:"tags,omitempty"`
}

type fuzzThingV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	SizeCM            string   `json:"sizeCM"`
	Tags              []string `json:"tags,omitempty"`
}

func (o *fuzzThingV1) DeepCopyObject() runtime.Object { c := *o; return &c }
func (o *fuzzThingV2) DeepCopyObject() runtime.Object { c := *o; return &c }
func (*fuzzThingV1) Hub()                             {}

func (o *fuzzThingV2) ConvertTo(h Hub) error {
	hub := h.(*fuzzThingV1)
	hub.ObjectMeta = o.ObjectMeta
	cm, err := strconv.ParseInt(o.SizeCM, 10, 32)
	if err != nil {
		return fmt.Errorf("sizeCM: %w", err)
	}
	hub.SizeMM = cm * 10
	for _, tag := range o.Tags {
		k, v, _ := strings.Cut(tag, "=")
		if hub.Tags == nil {
			hub.Tags = map[string]string{}
		}
		hub.Tags[k] = v
	}
	return nil
}

func (o *fuzzThingV2) ConvertFrom(h Hub) error {
	hub := h.(*fuzzThingV1)
	o.ObjectMeta = hub.ObjectMeta
	o.SizeCM = strconv.FormatInt(hub.SizeMM/10, 10)
	for k, v := range hub.Tags {
		o.Tags = append(o.Tags, k+"="+v)
	}
	return nil
}

const fuzzGroup = "things.fuzz.loom.dev"

func fuzzThingScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: fuzzGroup, Version: "v1", Kind: "Thing"}, &fuzzThingV1{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: fuzzGroup, Version: "v2", Kind: "Thing"}, &fuzzThingV2{})
	return s
}

// FuzzConversionReview sends arbitrary bodies to a Conversion handler for
// a kind with a hub and a spoke version. It must answer in time, without
// a panic, either a 4xx with a message or 200 with a ConversionReview of
// the same apiVersion and kind whose response has the request's uid and
// either a success with one object per object sent, each in the desired
// version and of the kind sent, or a failure with a 422 status (never a
// 500: the scheme is complete, and its conversions do not panic).
func FuzzConversionReview(f *testing.F) {
	v1 := `{"apiVersion":"` + fuzzGroup + `/v1","kind":"Thing","metadata":{"name":"a","namespace":"ns"},"sizeMM":120,"tags":{"a":"b"}}`
	v2 := `{"apiVersion":"` + fuzzGroup + `/v2","kind":"Thing","metadata":{"name":"a"},"sizeCM":"12","tags":["a=b","c"]}`
	review := func(to string, objs ...string) []byte {
		return []byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c-1","desiredAPIVersion":"` + to + `","objects":[` + strings.Join(objs, ",") + `]}}`)
	}
	for _, seed := range [][]byte{
		review(fuzzGroup+"/v2", v1),
		review(fuzzGroup+"/v1", v2, v1),
		review(fuzzGroup+"/v2", v2),
		review(fuzzGroup+"/v1", `{"apiVersion":"`+fuzzGroup+`/v2","kind":"Thing","sizeCM":"x"}`),
		review(fuzzGroup+"/v9", v1),
		review("other.dev/v1", v1),
		review(fuzzGroup+"/v2", `{"apiVersion":"`+fuzzGroup+`/v1","kind":"Other"}`),
		review(fuzzGroup+"/v2", `[1]`, `null`, `{}`),
		review(fuzzGroup + "/v2"),
		review("a/b/c", v1),
		review("", v1),
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c-1","desiredAPIVersion":"v1","objects":null}}`),
		[]byte(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`),
		[]byte(`{`),
	} {
		f.Add(seed, uint8(0))
	}
	h := Conversion(fuzzThingScheme())
	f.Fuzz(func(t *testing.T, body []byte, ct uint8) {
		rec := fuzzServe(t, h, fuzzContentTypes[int(ct)%len(fuzzContentTypes)], body)
		if rec.Code != http.StatusOK {
			checkClientError(t, rec)
			return
		}
		var in, out conversionReview
		if err := json.Unmarshal(body, &in); err != nil || in.Request == nil {
			t.Fatalf("answered 200 to a body that is not a review (%v)", err)
		}
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil {
			t.Fatalf("the answer is not a ConversionReview: %v: %s", err, rec.Body)
		}
		if out.APIVersion != "apiextensions.k8s.io/v1" || out.Kind != "ConversionReview" || out.Request != nil {
			t.Fatalf("answer %s", rec.Body)
		}
		resp := out.Response
		if resp == nil || resp.UID == "" || resp.UID != in.Request.UID {
			t.Fatalf("answer %s lacks the response or the request's uid %q", rec.Body, in.Request.UID)
		}
		switch resp.Result.Status {
		case metav1.StatusFailure:
			if resp.Result.Code != http.StatusUnprocessableEntity || resp.Result.Message == "" || resp.ConvertedObjects != nil {
				t.Fatalf("failure %s, want 422 with a message and no objects", rec.Body)
			}
			return
		case metav1.StatusSuccess:
		default:
			t.Fatalf("result %s", rec.Body)
		}
		if len(resp.ConvertedObjects) != len(in.Request.Objects) {
			t.Fatalf("%d objects converted of %d: %s", len(resp.ConvertedObjects), len(in.Request.Objects), rec.Body)
		}
		to, err := schema.ParseGroupVersion(in.Request.DesiredAPIVersion)
		if err != nil {
			t.Fatalf("converted to %q: %v", in.Request.DesiredAPIVersion, err)
		}
		for i, obj := range resp.ConvertedObjects {
			var got, sent metav1.TypeMeta
			if err := json.Unmarshal(obj.Raw, &got); err != nil {
				t.Fatalf("object %d: converted to %s: %v", i, obj.Raw, err)
			}
			_ = json.Unmarshal(in.Request.Objects[i].Raw, &sent)
			if gv, err := schema.ParseGroupVersion(got.APIVersion); err != nil || gv != to || got.Kind != sent.Kind {
				t.Fatalf("object %d: converted to %s %s, want %s %s", i, got.APIVersion, got.Kind, to, sent.Kind)
			}
		}
	})
}

// FuzzJSONPatch: for two arbitrary JSON documents, jsonPatch either
// fails (exactly when one is not a JSON object) or returns a patch that,
// applied as RFC 6902 says (applyJSONPatch), turns the first into the
// second; without removals, into the second with the members of the
// first that the second lacks.
func FuzzJSONPatch(f *testing.F) {
	for _, s := range [][2]string{
		{`{"a":1,"b":[1,2]}`, `{"b":[1,2],"a":1}`},
		{`{"spec":{"x":1}}`, `{"spec":{"x":2,"y":"new"}}`},
		{`{"a":1,"gone":true}`, `{"a":1}`},
		{`{"metadata":{"annotations":{}}}`, `{"metadata":{"annotations":{"example.com/a~b":"v","~1":null}}}`},
		{`{"l":[{"n":"a","x":1},{"n":"b"}]}`, `{"l":[{"n":"a"},{"n":"c"},{"n":"d"}]}`},
		{`{"l":[1,2,3],"m":{"k":[]}}`, `{"l":[1],"m":{"k":[[{}]]}}`},
		{`{"x":{"a":1}}`, `{"x":"s"}`},
		{`{"n":9007199254740993,"f":1.5,"e":1e3}`, `{"n":9007199254740995,"f":1.50,"e":1000}`},
		{`{"":{"":""}}`, `{"":{"":"","/":0}}`},
		{`[]`, `{}`},
		{`{`, `{}`},
	} {
		f.Add([]byte(s[0]), []byte(s[1]))
	}
	f.Fuzz(func(t *testing.T, from, to []byte) {
		checkJSONPatch(t, from, to)
	})
}

// FuzzJSONPatchMutation is FuzzJSONPatch for a document and a random
// mutation of it (as a mutating webhook changes an object), the case
// where patches are made of many small operations deep inside.
func FuzzJSONPatchMutation(f *testing.F) {
	f.Add([]byte(`{"apiVersion":"v1","kind":"ConfigMap","metadata":{"name":"a","labels":{"a/b":"c"}},"data":{"k":"v"}}`), uint64(1))
	f.Add([]byte(`{"a":{"b":[1,{"c":null}],"c/d":{"e~f":2}},"g":[[],{}]}`), uint64(2))
	f.Add([]byte(`{"spec":{"containers":[{"name":"a","env":[{"name":"X","value":"1"}]},{"name":"b"}]}}`), uint64(3))
	f.Fuzz(func(t *testing.T, doc []byte, seed uint64) {
		v, err := decodeJSONValue(doc)
		if err != nil {
			return
		}
		r := rand.New(rand.NewPCG(seed, seed>>32))
		mutated := mutateDeep(r, deepCopyValue(v))
		to, err := json.Marshal(mutated)
		if err != nil {
			t.Fatal(err)
		}
		checkJSONPatch(t, doc, to)
	})
}

// mutateDeep changes v at random places, deep inside too: members and
// items removed, replaced, added; lists grown and shrunk.
func mutateDeep(r *rand.Rand, v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			switch r.IntN(6) {
			case 0:
				delete(x, k)
			case 1:
				x[k] = randomValue(r, 2)
			case 2, 3:
				x[k] = mutateDeep(r, e)
			}
		}
		if r.IntN(3) == 0 {
			x[randomKey(r)] = randomValue(r, 2)
		}
		return x
	case []any:
		for i := range x {
			if r.IntN(2) == 0 {
				x[i] = mutateDeep(r, x[i])
			}
		}
		switch r.IntN(4) {
		case 0:
			if len(x) > 0 {
				return x[:r.IntN(len(x))]
			}
		case 1:
			return append(x, randomValue(r, 2))
		}
		return x
	}
	if r.IntN(4) == 0 {
		return randomValue(r, 1)
	}
	return v
}

func deepCopyValue(v any) any {
	switch x := v.(type) {
	case map[string]any:
		m := make(map[string]any, len(x))
		for k, e := range x {
			m[k] = deepCopyValue(e)
		}
		return m
	case []any:
		l := make([]any, len(x))
		for i, e := range x {
			l[i] = deepCopyValue(e)
		}
		return l
	}
	return v
}

// checkJSONPatch checks jsonPatch(from, to) with and without removals.
func checkJSONPatch(t *testing.T, from, to []byte) {
	t.Helper()
	a, errA := decodeJSONValue(from)
	b, errB := decodeJSONValue(to)
	if jsonDepth(a) > 9990 || jsonDepth(b) > 9990 {
		return // a patch's value nests two levels deeper, past encoding/json's limit
	}
	for _, removals := range []bool{true, false} {
		patch, err := jsonPatch(from, to, removals)
		if errA != nil || errB != nil {
			if err == nil {
				t.Fatalf("a patch from %q to %q, which are not both JSON objects (%v, %v)", from, to, errA, errB)
			}
			return
		}
		if err != nil {
			t.Fatalf("from %s to %s: %v", from, to, err)
		}
		want := any(b)
		if !removals {
			want = mergeKeeping(a, b)
		}
		got, err := applyJSONPatch(deepCopyValue(a), patch)
		if err != nil {
			t.Fatalf("removals %v: the patch %s from %s to %s does not apply: %v", removals, patch, from, to, err)
		}
		if !jsonEqual(got, want) {
			t.Fatalf("removals %v: the patch %s turns %s into\n%s\nwant\n%s", removals, patch, from, mustMarshal(got), mustMarshal(want))
		}
		if patch == nil && !jsonEqual(a, want) {
			t.Fatalf("removals %v: no patch from %s to %s", removals, from, to)
		}
	}
}

// jsonDepth returns how many objects and lists v nests.
func jsonDepth(v any) int {
	d := 0
	switch x := v.(type) {
	case map[string]any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
	case []any:
		for _, e := range x {
			d = max(d, jsonDepth(e))
		}
	default:
		return 0
	}
	return d + 1
}

// mergeKeeping returns b with the members of objects in a that the
// matching objects of b lack, at any depth (through the items that lists
// in both have): what a patch without removals makes.
func mergeKeeping(a, b any) any {
	switch av := a.(type) {
	case map[string]any:
		bv, ok := b.(map[string]any)
		if !ok {
			return b
		}
		out := make(map[string]any, len(av)+len(bv))
		for k, x := range av {
			out[k] = x
		}
		for k, y := range bv {
			if x, in := av[k]; in {
				out[k] = mergeKeeping(x, y)
			} else {
				out[k] = y
			}
		}
		return out
	case []any:
		bv, ok := b.([]any)
		if !ok {
			return b
		}
		out := make([]any, len(bv))
		for i, y := range bv {
			if i < len(av) {
				out[i] = mergeKeeping(av[i], y)
			} else {
				out[i] = y
			}
		}
		return out
	}
	return b
}

// jsonEqual reports whether two decoded JSON values are equal as JSON:
// numbers by value, whether int64 or float64 (0 and -0 alike), an integer
// against a float64 at float64's precision.
func jsonEqual(a, b any) bool {
	switch x := a.(type) {
	case map[string]any:
		y, ok := b.(map[string]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for k, v := range x {
			w, in := y[k]
			if !in || !jsonEqual(v, w) {
				return false
			}
		}
		return true
	case []any:
		y, ok := b.([]any)
		if !ok || len(x) != len(y) {
			return false
		}
		for i := range x {
			if !jsonEqual(x[i], y[i]) {
				return false
			}
		}
		return true
	case int64:
		switch y := b.(type) {
		case int64:
			return x == y
		case float64:
			// A float64 read from a decimal text is the nearest double
			// to it; an integer of that text compares at the same
			// precision (20000000000000110.0 reads as
			// 20000000000000112, and 20000000000000110 rounds to it).
			return float64(x) == y
		}
		return false
	case float64:
		if _, ok := b.(int64); ok {
			return jsonEqual(b, a)
		}
		y, ok := b.(float64)
		return ok && x == y
	}
	return reflect.DeepEqual(a, b)
}

// applyJSONPatch applies an RFC 6902 patch of add, remove and replace
// operations to doc (a decoded JSON value, changed in place) as strictly
// as the RFC says: a replaced or removed member or item must exist, an
// item is added at an index no larger than the list's length (or "-"),
// every parent on a path must exist, and a pointer's ~ escapes must be
// ~0 or ~1.
func applyJSONPatch(doc any, patch []byte) (any, error) {
	if patch == nil { // jsonPatch's "nothing to do"
		return doc, nil
	}
	dec := json.NewDecoder(bytes.NewReader(patch))
	dec.UseNumber()
	var list any
	if err := dec.Decode(&list); err != nil {
		return nil, fmt.Errorf("the patch is not JSON: %w", err)
	}
	if dec.More() {
		return nil, errors.New("the patch has more than one value")
	}
	ops, ok := numbers(list).([]any)
	if !ok {
		return nil, errors.New("the patch is not a list")
	}
	for i, o := range ops {
		op, ok := o.(map[string]any)
		if !ok {
			return nil, fmt.Errorf("operation %d is not an object", i)
		}
		kind, _ := op["op"].(string)
		path, ok := op["path"].(string)
		if !ok {
			return nil, fmt.Errorf("operation %d has no path", i)
		}
		val, hasVal := op["value"]
		switch kind {
		case "add", "replace":
			if !hasVal {
				return nil, fmt.Errorf("operation %d (%s %s) has no value", i, kind, path)
			}
		case "remove":
			if hasVal {
				return nil, fmt.Errorf("operation %d (remove %s) has a value", i, path)
			}
		default:
			return nil, fmt.Errorf("operation %d: op %q", i, kind)
		}
		if len(op) != map[bool]int{true: 3, false: 2}[hasVal] {
			return nil, fmt.Errorf("operation %d has other members: %v", i, op)
		}
		tokens, err := splitPointer(path)
		if err != nil {
			return nil, fmt.Errorf("operation %d: %w", i, err)
		}
		if doc, err = patchAt(doc, tokens, kind, val); err != nil {
			return nil, fmt.Errorf("operation %d (%s %s): %w", i, kind, path, err)
		}
	}
	return doc, nil
}

// numbers replaces the json.Numbers in v by int64 or float64 values, as
// decodeJSONValue reads numbers: int64 when they are integers that fit.
func numbers(v any) any {
	switch x := v.(type) {
	case map[string]any:
		for k, e := range x {
			x[k] = numbers(e)
		}
	case []any:
		for i, e := range x {
			x[i] = numbers(e)
		}
	case json.Number:
		if i, err := strconv.ParseInt(string(x), 10, 64); err == nil {
			return i
		}
		f, err := strconv.ParseFloat(string(x), 64)
		if err != nil {
			panic(fmt.Sprintf("number %s in a patch: %v", x, err))
		}
		return f
	}
	return v
}

// splitPointer splits an RFC 6901 JSON pointer into its unescaped
// tokens.
func splitPointer(p string) ([]string, error) {
	if p == "" {
		return nil, nil
	}
	if p[0] != '/' {
		return nil, fmt.Errorf("pointer %q does not start with /", p)
	}
	tokens := strings.Split(p[1:], "/")
	for i, tok := range tokens {
		for j := 0; j < len(tok); j++ {
			if tok[j] == '~' && (j+1 == len(tok) || (tok[j+1] != '0' && tok[j+1] != '1')) {
				return nil, fmt.Errorf("pointer %q: bad escape", p)
			}
		}
		tokens[i] = strings.ReplaceAll(strings.ReplaceAll(tok, "~1", "/"), "~0", "~")
	}
	return tokens, nil
}

// patchAt applies one operation at tokens below cur and returns the new
// value of cur.
func patchAt(cur any, tokens []string, op string, val any) (any, error) {
	if len(tokens) == 0 { // the whole document
		if op == "remove" {
			return nil, errors.New("removing the whole document")
		}
		return val, nil
	}
	tok, last := tokens[0], len(tokens) == 1
	switch c := cur.(type) {
	case map[string]any:
		child, in := c[tok]
		if !last {
			if !in {
				return nil, fmt.Errorf("no member %q", tok)
			}
			nc, err := patchAt(child, tokens[1:], op, val)
			if err != nil {
				return nil, err
			}
			c[tok] = nc
			return c, nil
		}
		switch {
		case op == "add":
			c[tok] = val
		case !in:
			return nil, fmt.Errorf("no member %q to %s", tok, op)
		case op == "remove":
			delete(c, tok)
		default:
			c[tok] = val
		}
		return c, nil
	case []any:
		if last && op == "add" && tok == "-" {
			return append(c, val), nil
		}
		i, err := strconv.Atoi(tok)
		if err != nil || i < 0 || strconv.Itoa(i) != tok {
			return nil, fmt.Errorf("bad index %q", tok)
		}
		if last && op == "add" {
			if i > len(c) {
				return nil, fmt.Errorf("adding at %d to a list of %d", i, len(c))
			}
			return append(c[:i:i], append([]any{val}, c[i:]...)...), nil
		}
		if i >= len(c) {
			return nil, fmt.Errorf("index %d of a list of %d", i, len(c))
		}
		switch {
		case !last:
			nc, err := patchAt(c[i], tokens[1:], op, val)
			if err != nil {
				return nil, err
			}
			c[i] = nc
			return c, nil
		case op == "remove":
			return append(c[:i:i], c[i+1:]...), nil
		default:
			c[i] = val
			return c, nil
		}
	default:
		return nil, fmt.Errorf("%T has no member %q", cur, tok)
	}
}
