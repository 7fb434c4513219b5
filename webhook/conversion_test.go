package webhook_test

import (
	"bytes"
	"encoding/json"
	"errors"
	"net/http"
	"net/http/httptest"
	"strings"
	"testing"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/webhook"
)

// Three versions of Gizmo: v1 is the hub with a size in millimetres; v2
// has it in centimetres as a string; v3 splits a name into two fields.
type gizmoV1 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	SizeMM            int    `json:"sizeMM"`
	Name              string `json:"name"`
}

type gizmoV2 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	SizeCM            string `json:"sizeCM"`
	Name              string `json:"name"`
}

type gizmoV3 struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	SizeMM            int    `json:"sizeMM"`
	First, Last       string `json:",omitempty"`
}

func (g *gizmoV1) DeepCopyObject() runtime.Object { c := *g; return &c }
func (g *gizmoV2) DeepCopyObject() runtime.Object { c := *g; return &c }
func (g *gizmoV3) DeepCopyObject() runtime.Object { c := *g; return &c }

func (*gizmoV1) Hub() {}

func (g *gizmoV2) ConvertTo(h webhook.Hub) error {
	hub := h.(*gizmoV1)
	hub.ObjectMeta, hub.Name = g.ObjectMeta, g.Name
	var cm int
	if err := json.Unmarshal([]byte(g.SizeCM), &cm); err != nil {
		return errors.New("sizeCM is not a whole number")
	}
	hub.SizeMM = cm * 10
	return nil
}

func (g *gizmoV2) ConvertFrom(h webhook.Hub) error {
	hub := h.(*gizmoV1)
	g.ObjectMeta, g.Name = hub.ObjectMeta, hub.Name
	b, _ := json.Marshal(hub.SizeMM / 10)
	g.SizeCM = string(b)
	return nil
}

func (g *gizmoV3) ConvertTo(h webhook.Hub) error {
	if g.First == "panic" {
		panic("asked to")
	}
	hub := h.(*gizmoV1)
	hub.ObjectMeta, hub.SizeMM = g.ObjectMeta, g.SizeMM
	hub.Name = strings.TrimSpace(g.First + " " + g.Last)
	return nil
}

func (g *gizmoV3) ConvertFrom(h webhook.Hub) error {
	hub := h.(*gizmoV1)
	g.ObjectMeta, g.SizeMM = hub.ObjectMeta, hub.SizeMM
	g.First, g.Last, _ = strings.Cut(hub.Name, " ")
	return nil
}

func gizmoScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	g := "gizmos.test.loom.dev"
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: g, Version: "v1", Kind: "Gizmo"}, &gizmoV1{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: g, Version: "v2", Kind: "Gizmo"}, &gizmoV2{})
	s.AddKnownTypeWithName(schema.GroupVersionKind{Group: g, Version: "v3", Kind: "Gizmo"}, &gizmoV3{})
	return s
}

type convReview struct {
	APIVersion string `json:"apiVersion"`
	Kind       string `json:"kind"`
	Request    *struct {
		UID               string            `json:"uid"`
		DesiredAPIVersion string            `json:"desiredAPIVersion"`
		Objects           []json.RawMessage `json:"objects"`
	} `json:"request,omitempty"`
	Response *struct {
		UID              string            `json:"uid"`
		ConvertedObjects []json.RawMessage `json:"convertedObjects"`
		Result           metav1.Status     `json:"result"`
	} `json:"response,omitempty"`
}

func convert(t *testing.T, h http.Handler, to string, objs ...string) (int, convReview, string) {
	t.Helper()
	body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c-1","desiredAPIVersion":"` + to + `","objects":[` + strings.Join(objs, ",") + `]}}`
	req := httptest.NewRequest(http.MethodPost, "/convert", bytes.NewReader([]byte(body)))
	req.Header.Set("Content-Type", "application/json")
	rec := httptest.NewRecorder()
	h.ServeHTTP(rec, req)
	var out convReview
	if rec.Code == 200 {
		if err := json.Unmarshal(rec.Body.Bytes(), &out); err != nil || out.Response == nil || out.Response.UID != "c-1" || out.Kind != "ConversionReview" {
			t.Fatalf("answer %s: %v", rec.Body, err)
		}
	}
	return rec.Code, out, rec.Body.String()
}

func TestConversionHubAndSpoke(t *testing.T) {
	h := webhook.Conversion(gizmoScheme())
	const g = "gizmos.test.loom.dev"
	v1 := `{"apiVersion":"` + g + `/v1","kind":"Gizmo","metadata":{"name":"a","namespace":"ns"},"sizeMM":120,"name":"Ada Lovelace"}`
	v2 := `{"apiVersion":"` + g + `/v2","kind":"Gizmo","metadata":{"name":"a","namespace":"ns"},"sizeCM":"12","name":"Ada Lovelace"}`
	v3 := `{"apiVersion":"` + g + `/v3","kind":"Gizmo","metadata":{"name":"a","namespace":"ns"},"sizeMM":120,"First":"Ada","Last":"Lovelace"}`
	byVersion := map[string]string{"v1": v1, "v2": v2, "v3": v3}
	// Every version to every other: hub to spoke, spoke to hub, spoke to
	// spoke through the hub, and identity.
	for from, src := range byVersion {
		for to, want := range byVersion {
			t.Run(from+"→"+to, func(t *testing.T) {
				code, out, body := convert(t, h, g+"/"+to, src)
				if code != 200 || out.Response.Result.Status != metav1.StatusSuccess || len(out.Response.ConvertedObjects) != 1 {
					t.Fatalf("HTTP %d: %s", code, body)
				}
				var got, exp map[string]any
				_ = json.Unmarshal(out.Response.ConvertedObjects[0], &got)
				_ = json.Unmarshal([]byte(want), &exp)
				delete(got["metadata"].(map[string]any), "creationTimestamp")
				gb, _ := json.Marshal(got)
				eb, _ := json.Marshal(exp)
				if string(gb) != string(eb) {
					t.Fatalf("got  %s\nwant %s", gb, eb)
				}
			})
		}
	}
	// Several objects in one review keep their order.
	code, out, body := convert(t, h, g+"/v1", v2, v3)
	if code != 200 || len(out.Response.ConvertedObjects) != 2 {
		t.Fatalf("two objects: %s", body)
	}
}

func TestConversionFailures(t *testing.T) {
	h := webhook.Conversion(gizmoScheme())
	const g = "gizmos.test.loom.dev"
	cases := []struct {
		name, to, obj, message string
	}{
		{"conversion error names the object", g + "/v1", `{"apiVersion":"` + g + `/v2","kind":"Gizmo","metadata":{"name":"b","namespace":"ns"},"sizeCM":"x"}`, "Gizmo ns/b: converting"},
		{"unknown version", g + "/v9", `{"apiVersion":"` + g + `/v1","kind":"Gizmo","metadata":{"name":"b"}}`, "not registered"},
		{"unknown kind", g + "/v2", `{"apiVersion":"` + g + `/v1","kind":"Gadget","metadata":{"name":"b"}}`, "not registered"},
		{"other group", "other.dev/v1", `{"apiVersion":"` + g + `/v1","kind":"Gizmo","metadata":{"name":"b"}}`, "cannot convert from group"},
		{"no kind", g + "/v2", `{"metadata":{"name":"b"}}`, "no apiVersion or kind"},
		{"not an object", g + "/v2", `[1]`, "not a JSON object"},
	}
	for _, tc := range cases {
		t.Run(tc.name, func(t *testing.T) {
			code, out, body := convert(t, h, tc.to, tc.obj)
			if code != 200 || out.Response.Result.Status != metav1.StatusFailure || !strings.Contains(out.Response.Result.Message, tc.message) {
				t.Fatalf("HTTP %d %s, want a failure with %q", code, body, tc.message)
			}
		})
	}
	for _, body := range []string{`{`, `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview"}`,
		`{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"x","desiredAPIVersion":"a/b/c"}}`} {
		req := httptest.NewRequest(http.MethodPost, "/convert", strings.NewReader(body))
		req.Header.Set("Content-Type", "application/json")
		rec := httptest.NewRecorder()
		h.ServeHTTP(rec, req)
		if rec.Code != 400 {
			t.Errorf("malformed review %s: HTTP %d %s, want 400", body, rec.Code, rec.Body)
		}
	}
}

// TestConversionPanicsCounted: a panic in a conversion is answered as a
// failure and recorded for the server's metrics as a conversion panic; a
// conversion that fails without panicking, or succeeds, records none.
func TestConversionPanicsCounted(t *testing.T) {
	h := webhook.Conversion(gizmoScheme())
	const g = "gizmos.test.loom.dev"
	tests := []struct {
		name, first   string
		wantPanics    int
		wantSuccesses bool
	}{
		{"converts", "Ada", 0, true},
		{"panics", "panic", 1, false},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			v3 := `{"apiVersion":"` + g + `/v3","kind":"Gizmo","metadata":{"name":"a","namespace":"ns"},"sizeMM":120,"First":"` + tt.first + `","Last":"L"}`
			body := `{"apiVersion":"apiextensions.k8s.io/v1","kind":"ConversionReview","request":{"uid":"c-1","desiredAPIVersion":"` + g + `/v1","objects":[` + v3 + `]}}`
			ctx, counts := webhook.CountPanics(t.Context())
			req := httptest.NewRequestWithContext(ctx, http.MethodPost, "/convert", strings.NewReader(body))
			req.Header.Set("Content-Type", "application/json")
			rec := httptest.NewRecorder()
			h.ServeHTTP(rec, req)
			ok := rec.Code == 200 && strings.Contains(rec.Body.String(), `"status":"Success"`)
			if ok != tt.wantSuccesses {
				t.Fatalf("HTTP %d: %s", rec.Code, rec.Body)
			}
			if adm, conv := counts(); adm != 0 || conv != tt.wantPanics {
				t.Errorf("panics recorded: admission %d, conversion %d; want 0, %d", adm, conv, tt.wantPanics)
			}
		})
	}
}
