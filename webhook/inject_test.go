package webhook_test

import (
	"encoding/base64"
	"errors"
	"net"
	"sync"
	"testing"
	"testing/fstest"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/webhook"
)

// injectREST connects to the package's shared control plane.
func injectREST(t *testing.T) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

const injectCRDs = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: things.inject.example.com
spec:
  group: inject.example.com
  names: {kind: Thing, plural: things, singular: thing, listKind: ThingList}
  scope: Namespaced
  conversion:
    strategy: Webhook
    webhook:
      conversionReviewVersions: ["v1"]
      clientConfig:
        service: {namespace: inject-system, name: inject-webhook, path: /convert, port: 443}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
  - name: v2
    served: true
    storage: false
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
---
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: plainthings.inject.example.com
spec:
  group: inject.example.com
  names: {kind: PlainThing, plural: plainthings, singular: plainthing, listKind: PlainThingList}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

// injectFixtures creates a validating and a mutating webhook configuration
// (two webhooks each, by service, one with a path and one without) and the
// CRDs above, and removes them when the test ends.
func injectFixtures(t *testing.T, rc *rest.Client) (vc *client.Client[*admissionregistrationv1.ValidatingWebhookConfiguration], mc *client.Client[*admissionregistrationv1.MutatingWebhookConfiguration], crds *client.Client[*unstructured.Unstructured]) {
	t.Helper()
	ctx := t.Context()
	var err error
	if vc, err = client.For[admissionregistrationv1.ValidatingWebhookConfiguration](rc, client.Options{}); err != nil {
		t.Fatal(err)
	}
	if mc, err = client.For[admissionregistrationv1.MutatingWebhookConfiguration](rc, client.Options{}); err != nil {
		t.Fatal(err)
	}
	if crds, err = client.For[unstructured.Unstructured](rc, client.Options{Resource: crd.Resource()}); err != nil {
		t.Fatal(err)
	}
	path := "/validate-things"
	none := admissionregistrationv1.SideEffectClassNone
	ignore := admissionregistrationv1.Ignore
	// Rules for a resource nobody creates, and failurePolicy Ignore: other
	// tests sharing the control plane are not affected.
	rules := []admissionregistrationv1.RuleWithOperations{{
		Operations: []admissionregistrationv1.OperationType{admissionregistrationv1.Create},
		Rule:       admissionregistrationv1.Rule{APIGroups: []string{"inject.example.com"}, APIVersions: []string{"v1"}, Resources: []string{"things"}},
	}}
	svc := func(p *string) admissionregistrationv1.WebhookClientConfig {
		return admissionregistrationv1.WebhookClientConfig{Service: &admissionregistrationv1.ServiceReference{
			Namespace: "inject-system", Name: "inject-webhook", Path: p,
		}}
	}
	_, err = vc.Create(ctx, &admissionregistrationv1.ValidatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "inject-validating"},
		Webhooks: []admissionregistrationv1.ValidatingWebhook{
			{Name: "path.inject.example.com", ClientConfig: svc(&path), Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
			{Name: "nopath.inject.example.com", ClientConfig: svc(nil), Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = vc.Delete(t.Context(), "inject-validating", metav1.DeleteOptions{}) })
	mpath := "/mutate-things"
	_, err = mc.Create(ctx, &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "inject-mutating"},
		Webhooks: []admissionregistrationv1.MutatingWebhook{
			{Name: "path.inject.example.com", ClientConfig: svc(&mpath), Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
			{Name: "nopath.inject.example.com", ClientConfig: svc(nil), Rules: rules, SideEffects: &none, FailurePolicy: &ignore, AdmissionReviewVersions: []string{"v1"}},
		},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mc.Delete(t.Context(), "inject-mutating", metav1.DeleteOptions{}) })
	objs, err := crd.Read(fstest.MapFS{"crds.yaml": {Data: []byte(injectCRDs)}})
	if err != nil {
		t.Fatal(err)
	}
	if err := crd.Install(ctx, rc, objs, crd.Options{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = crd.Uninstall(t.Context(), rc, objs, crd.Options{}) })
	return vc, mc, crds
}

// injected is what one webhook's clientConfig holds.
type injected struct {
	caBundle string
	url      string // "" when none
	svcPath  string // "-" when there is no service
}

// readInjected returns the client configs of the fixtures, keyed by
// "validating/<webhook>", "mutating/<webhook>" and "crd", and their
// resourceVersions.
func readInjected(t *testing.T, vc *client.Client[*admissionregistrationv1.ValidatingWebhookConfiguration], mc *client.Client[*admissionregistrationv1.MutatingWebhookConfiguration], crds *client.Client[*unstructured.Unstructured]) (map[string]injected, []string) {
	t.Helper()
	ctx := t.Context()
	out := map[string]injected{}
	conv := func(cc admissionregistrationv1.WebhookClientConfig) injected {
		in := injected{caBundle: string(cc.CABundle), svcPath: "-"}
		if cc.URL != nil {
			in.url = *cc.URL
		}
		if cc.Service != nil {
			in.svcPath = ""
			if cc.Service.Path != nil {
				in.svcPath = *cc.Service.Path
			}
		}
		return in
	}
	v, err := vc.Get(ctx, "inject-validating", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range v.Webhooks {
		out["validating/"+w.Name] = conv(w.ClientConfig)
	}
	m, err := mc.Get(ctx, "inject-mutating", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, w := range m.Webhooks {
		out["mutating/"+w.Name] = conv(w.ClientConfig)
	}
	c, err := crds.Get(ctx, "things.inject.example.com", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	cc, _, _ := unstructured.NestedMap(c.Object, "spec", "conversion", "webhook", "clientConfig")
	b64, _, _ := unstructured.NestedString(cc, "caBundle")
	ca, err := base64.StdEncoding.DecodeString(b64)
	if err != nil {
		t.Fatal(err)
	}
	in := injected{caBundle: string(ca), svcPath: "-"}
	in.url, _, _ = unstructured.NestedString(cc, "url")
	if svc, ok := cc["service"].(map[string]any); ok {
		in.svcPath, _, _ = unstructured.NestedString(svc, "path")
	}
	out["crd"] = in
	return out, []string{v.ResourceVersion, m.ResourceVersion, c.GetResourceVersion()}
}

func checkInjected(t *testing.T, got map[string]injected, want map[string]injected) {
	t.Helper()
	if len(got) != len(want) {
		t.Errorf("%d client configs, want %d", len(got), len(want))
	}
	for k, w := range want {
		if g := got[k]; g != w {
			t.Errorf("%s: caBundle %d bytes, url %q, service path %q; want caBundle %d bytes, url %q, service path %q",
				k, len(g.caBundle), g.url, g.svcPath, len(w.caBundle), w.url, w.svcPath)
		}
	}
}

func testBundle(t *testing.T) []byte {
	t.Helper()
	c := newCerts(t, webhook.CertOptions{Dir: t.TempDir(), IPs: []net.IP{net.ParseIP("127.0.0.1")}})
	if err := c.Ensure(); err != nil {
		t.Fatal(err)
	}
	return c.CABundle()
}

func TestInject(t *testing.T) {
	ctx := t.Context()
	rc := injectREST(t)
	vc, mc, crds := injectFixtures(t, rc)
	inj := &webhook.Injector{
		REST:              rc,
		ValidatingConfigs: []string{"inject-validating"},
		MutatingConfigs:   []string{"inject-mutating"},
		CRDs:              []string{"things.inject.example.com"},
	}

	// By service: only the bundle changes.
	b1 := string(testBundle(t))
	if err := inj.Inject(ctx, []byte(b1)); err != nil {
		t.Fatal(err)
	}
	got, rv := readInjected(t, vc, mc, crds)
	checkInjected(t, got, map[string]injected{
		"validating/path.inject.example.com":   {caBundle: b1, svcPath: "/validate-things"},
		"validating/nopath.inject.example.com": {caBundle: b1},
		"mutating/path.inject.example.com":     {caBundle: b1, svcPath: "/mutate-things"},
		"mutating/nopath.inject.example.com":   {caBundle: b1},
		"crd":                                  {caBundle: b1, svcPath: "/convert"},
	})
	v, _ := vc.Get(ctx, "inject-validating", metav1.GetOptions{})
	managers := map[string]bool{}
	for _, f := range v.ManagedFields {
		managers[f.Manager] = true
	}
	if !managers[webhook.DefaultInjectFieldManager] {
		t.Errorf("managedFields name %v, not %q", managers, webhook.DefaultInjectFieldManager)
	}

	// Again: no write.
	if err := inj.Inject(ctx, []byte(b1)); err != nil {
		t.Fatal(err)
	}
	if _, rv2 := readInjected(t, vc, mc, crds); !slicesEqual(rv, rv2) {
		t.Errorf("injecting the same bundle again wrote: resourceVersions %v, then %v", rv, rv2)
	}

	// With a URL: service references become URLs with their paths.
	b2 := string(testBundle(t))
	inj.URL = "https://127.0.0.1:9443"
	if err := inj.Inject(ctx, []byte(b2)); err != nil {
		t.Fatal(err)
	}
	got, rv = readInjected(t, vc, mc, crds)
	checkInjected(t, got, map[string]injected{
		"validating/path.inject.example.com":   {caBundle: b2, url: "https://127.0.0.1:9443/validate-things", svcPath: "-"},
		"validating/nopath.inject.example.com": {caBundle: b2, url: "https://127.0.0.1:9443", svcPath: "-"},
		"mutating/path.inject.example.com":     {caBundle: b2, url: "https://127.0.0.1:9443/mutate-things", svcPath: "-"},
		"mutating/nopath.inject.example.com":   {caBundle: b2, url: "https://127.0.0.1:9443", svcPath: "-"},
		"crd":                                  {caBundle: b2, url: "https://127.0.0.1:9443/convert", svcPath: "-"},
	})
	if err := inj.Inject(ctx, []byte(b2)); err != nil {
		t.Fatal(err)
	}
	if _, rv2 := readInjected(t, vc, mc, crds); !slicesEqual(rv, rv2) {
		t.Errorf("injecting the same bundle and URL again wrote: resourceVersions %v, then %v", rv, rv2)
	}

	// Another URL (a new port): the paths are kept from the URLs. Several
	// injectors at once: conflicts are retried.
	inj.URL = "https://127.0.0.1:9444/"
	var wg sync.WaitGroup
	errs := make([]error, 4)
	for i := range errs {
		wg.Go(func() { errs[i] = inj.Inject(ctx, []byte(b1)) })
	}
	wg.Wait()
	if err := errors.Join(errs...); err != nil {
		t.Fatal(err)
	}
	got, _ = readInjected(t, vc, mc, crds)
	checkInjected(t, got, map[string]injected{
		"validating/path.inject.example.com":   {caBundle: b1, url: "https://127.0.0.1:9444/validate-things", svcPath: "-"},
		"validating/nopath.inject.example.com": {caBundle: b1, url: "https://127.0.0.1:9444", svcPath: "-"},
		"mutating/path.inject.example.com":     {caBundle: b1, url: "https://127.0.0.1:9444/mutate-things", svcPath: "-"},
		"mutating/nopath.inject.example.com":   {caBundle: b1, url: "https://127.0.0.1:9444", svcPath: "-"},
		"crd":                                  {caBundle: b1, url: "https://127.0.0.1:9444/convert", svcPath: "-"},
	})

	// Missing objects and a CRD without a conversion webhook are named in
	// typed errors; the other objects are injected all the same.
	bad := &webhook.Injector{
		REST:              rc,
		ValidatingConfigs: []string{"inject-missing", "inject-validating"},
		MutatingConfigs:   []string{"inject-missing-too"},
		CRDs:              []string{"plainthings.inject.example.com"},
		FieldManager:      "inject-test",
	}
	err := bad.Inject(ctx, []byte(b2))
	if !apierrors.IsNotFound(err) {
		t.Errorf("Inject of a missing object: %v, want a NotFound", err)
	}
	if !errors.Is(err, webhook.ErrNoConversionWebhook) {
		t.Errorf("Inject into a CRD without a conversion webhook: %v, want ErrNoConversionWebhook", err)
	}
	var named []string
	for _, e := range err.(interface{ Unwrap() []error }).Unwrap() {
		var ie *webhook.InjectError
		if !errors.As(e, &ie) {
			t.Fatalf("error %v is not an *InjectError", e)
		}
		named = append(named, ie.Kind+"/"+ie.Name)
	}
	want := []string{"ValidatingWebhookConfiguration/inject-missing", "MutatingWebhookConfiguration/inject-missing-too", "CustomResourceDefinition/plainthings.inject.example.com"}
	if !slicesEqual(named, want) {
		t.Errorf("errors name %v, want %v", named, want)
	}
	if got, _ := readInjected(t, vc, mc, crds); got["validating/path.inject.example.com"].caBundle != b2 {
		t.Error("an object after a missing one was not injected")
	}
}

func TestInjectBadInput(t *testing.T) {
	rc, err := rest.New(config.Config{Host: "https://127.0.0.1:1"}, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	bundle := []byte("-----BEGIN CERTIFICATE-----\n")
	for _, tc := range []struct {
		name   string
		inj    webhook.Injector
		bundle []byte
		want   error
	}{
		{"no REST", webhook.Injector{}, bundle, webhook.ErrInjectNoREST},
		{"empty bundle", webhook.Injector{REST: rc}, nil, webhook.ErrInjectNoBundle},
		{"http URL", webhook.Injector{REST: rc, URL: "http://127.0.0.1:9443"}, bundle, webhook.ErrInjectURL},
		{"URL with a path", webhook.Injector{REST: rc, URL: "https://127.0.0.1:9443/webhooks"}, bundle, webhook.ErrInjectURL},
		{"URL with a query", webhook.Injector{REST: rc, URL: "https://127.0.0.1:9443?x=1"}, bundle, webhook.ErrInjectURL},
		{"not a URL", webhook.Injector{REST: rc, URL: "::"}, bundle, webhook.ErrInjectURL},
		{"nothing to do", webhook.Injector{REST: rc, URL: "https://127.0.0.1:9443"}, bundle, nil},
	} {
		t.Run(tc.name, func(t *testing.T) {
			if err := tc.inj.Inject(t.Context(), tc.bundle); !errors.Is(err, tc.want) {
				t.Errorf("Inject: %v, want %v", err, tc.want)
			}
		})
	}
}
