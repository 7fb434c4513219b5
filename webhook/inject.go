package webhook

import (
	"bytes"
	"context"
	"encoding/base64"
	"errors"
	"fmt"
	"net/url"
	"strings"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/rest"
)

// DefaultInjectFieldManager is the field manager of Injector's updates
// unless Injector.FieldManager is set.
const DefaultInjectFieldManager = "loom-webhook-ca-injector"

// Errors of Injector.Inject. Problems with one object come wrapped in an
// *InjectError that names it.
var (
	ErrInjectNoREST   = errors.New("webhook: Injector.REST is nil")
	ErrInjectNoBundle = errors.New("webhook: empty CA bundle")
	// ErrInjectURL: Injector.URL must be https://host[:port], with no
	// path, query or fragment (the API server calls only https).
	ErrInjectURL = errors.New("webhook: Injector.URL must be https://host[:port] with no path, query or fragment")
	// ErrNoConversionWebhook: the CRD's spec.conversion.strategy is not
	// Webhook, or it has no spec.conversion.webhook.clientConfig.
	ErrNoConversionWebhook = errors.New("the CRD has no conversion webhook (spec.conversion.strategy is not Webhook)")
	// ErrNoClientConfig: a webhook has neither a service nor a URL to take
	// a path from.
	ErrNoClientConfig = errors.New("a webhook clientConfig has neither service nor url")
)

// InjectError says which object Inject could not update, and why. A
// missing object wraps the server's NotFound (apierrors.IsNotFound
// reports it).
type InjectError struct {
	// Kind is "ValidatingWebhookConfiguration", "MutatingWebhookConfiguration"
	// or "CustomResourceDefinition".
	Kind string
	Name string
	Err  error
}

func (e *InjectError) Error() string {
	return "webhook: injecting the CA bundle into " + e.Kind + " " + e.Name + ": " + e.Err.Error()
}

func (e *InjectError) Unwrap() error { return e.Err }

// Injector writes a CA bundle (and optionally a URL) into webhook
// configurations and CRDs on the API server: the caBundle of every webhook
// of the named ValidatingWebhookConfigurations and
// MutatingWebhookConfigurations (admissionregistration.k8s.io/v1), and of
// the conversion webhook of the named CRDs. The objects must exist (apply
// your manifests first). Register Inject with Certs.OnRotate to keep them
// current.
//
// Each object is read, changed and updated with optimistic concurrency
// (re-read and retried on a 409 Conflict), and only if something changes:
// injecting the same bundle again writes nothing.
type Injector struct {
	// REST is the connection to the API server. Required.
	REST *rest.Client
	// ValidatingConfigs and MutatingConfigs name ValidatingWebhookConfiguration
	// and MutatingWebhookConfiguration objects.
	ValidatingConfigs, MutatingConfigs []string
	// CRDs name CustomResourceDefinitions with spec.conversion.strategy
	// Webhook; their spec.conversion.webhook.clientConfig gets the bundle.
	CRDs []string
	// URL, when set (such as "https://127.0.0.1:9443"), switches each
	// webhook's clientConfig to the URL form: url is URL followed by the
	// path of its service reference (service.path), and service is
	// removed; a clientConfig that has a url already keeps its path under
	// the new URL. This is how tests and local runs, where the API server
	// calls a webhook on this machine, use manifests written for
	// in-cluster Services. Default "": service and url are left as they
	// are.
	URL string
	// FieldManager names the writer in managedFields. Default
	// DefaultInjectFieldManager.
	FieldManager string
}

// Inject writes caBundle (PEM) into every named object. It goes on after an
// object fails, and returns the errors of all that failed, joined, each an
// *InjectError.
func (i *Injector) Inject(ctx context.Context, caBundle []byte) error {
	if i.REST == nil {
		return ErrInjectNoREST
	}
	if len(bytes.TrimSpace(caBundle)) == 0 {
		return ErrInjectNoBundle
	}
	base, err := injectBaseURL(i.URL)
	if err != nil {
		return err
	}
	opts := metav1.UpdateOptions{FieldManager: i.FieldManager}
	if opts.FieldManager == "" {
		opts.FieldManager = DefaultInjectFieldManager
	}
	var errs []error
	if len(i.ValidatingConfigs) > 0 {
		c, err := client.For[admissionregistrationv1.ValidatingWebhookConfiguration](i.REST, client.Options{})
		if err != nil {
			return err
		}
		for _, name := range i.ValidatingConfigs {
			errs = append(errs, injectInto(ctx, c, "ValidatingWebhookConfiguration", name, opts,
				func(obj *admissionregistrationv1.ValidatingWebhookConfiguration) (bool, error) {
					hooks := make([]hookRef, len(obj.Webhooks))
					for j := range obj.Webhooks {
						hooks[j] = hookRef{obj.Webhooks[j].Name, &obj.Webhooks[j].ClientConfig}
					}
					return injectHooks(hooks, caBundle, base)
				}))
		}
	}
	if len(i.MutatingConfigs) > 0 {
		c, err := client.For[admissionregistrationv1.MutatingWebhookConfiguration](i.REST, client.Options{})
		if err != nil {
			return err
		}
		for _, name := range i.MutatingConfigs {
			errs = append(errs, injectInto(ctx, c, "MutatingWebhookConfiguration", name, opts,
				func(obj *admissionregistrationv1.MutatingWebhookConfiguration) (bool, error) {
					hooks := make([]hookRef, len(obj.Webhooks))
					for j := range obj.Webhooks {
						hooks[j] = hookRef{obj.Webhooks[j].Name, &obj.Webhooks[j].ClientConfig}
					}
					return injectHooks(hooks, caBundle, base)
				}))
		}
	}
	if len(i.CRDs) > 0 {
		c, err := client.For[unstructured.Unstructured](i.REST, client.Options{Resource: crd.Resource()})
		if err != nil {
			return err
		}
		for _, name := range i.CRDs {
			errs = append(errs, injectInto(ctx, c, "CustomResourceDefinition", name, opts,
				func(obj *unstructured.Unstructured) (bool, error) {
					return injectCRD(obj, caBundle, base)
				}))
		}
	}
	return errors.Join(errs...)
}

// injectInto reads the named object, lets set change it, and updates it if
// set reports a change, again from a fresh read on a conflict.
func injectInto[T client.Object](ctx context.Context, c *client.Client[T], kind, name string, opts metav1.UpdateOptions, set func(T) (bool, error)) error {
	err := client.RetryOnConflict(ctx, client.Backoff{}, func() error {
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		changed, err := set(obj)
		if err != nil || !changed {
			return err
		}
		_, err = c.Update(ctx, obj, opts)
		return err
	})
	if err != nil {
		return &InjectError{Kind: kind, Name: name, Err: err}
	}
	return nil
}

// injectBaseURL checks Injector.URL and returns it without a trailing
// slash ("" when unset).
func injectBaseURL(s string) (string, error) {
	if s == "" {
		return "", nil
	}
	u, err := url.Parse(s)
	if err != nil || u.Scheme != "https" || u.Host == "" || u.User != nil ||
		(u.Path != "" && u.Path != "/") || u.RawQuery != "" || u.ForceQuery || u.Fragment != "" {
		return "", fmt.Errorf("%w: %q", ErrInjectURL, s)
	}
	return strings.TrimSuffix(s, "/"), nil
}

// injectClientConfig sets the bundle (and with base, the URL) of one
// admission webhook, reporting whether anything changed.
func injectClientConfig(cc *admissionregistrationv1.WebhookClientConfig, caBundle []byte, base string) (bool, error) {
	changed := false
	if !bytes.Equal(cc.CABundle, caBundle) {
		cc.CABundle = bytes.Clone(caBundle)
		changed = true
	}
	if base == "" {
		return changed, nil
	}
	var svcPath *string
	if cc.Service != nil {
		svcPath = cc.Service.Path
		if svcPath == nil {
			svcPath = new(string)
		}
	}
	u, err := injectURL(base, svcPath, cc.URL)
	if err != nil {
		return false, err
	}
	if cc.URL == nil || *cc.URL != u {
		cc.URL = &u
		changed = true
	}
	if cc.Service != nil {
		cc.Service = nil
		changed = true
	}
	return changed, nil
}

// injectURL returns base followed by the service's path (svcPath, when
// there is a service) or else by the path of the current URL.
func injectURL(base string, svcPath, current *string) (string, error) {
	switch {
	case svcPath != nil:
		p := *svcPath
		if p != "" && !strings.HasPrefix(p, "/") {
			p = "/" + p
		}
		return base + p, nil
	case current != nil:
		u, err := url.Parse(*current)
		if err != nil {
			return "", fmt.Errorf("url %q: %w", *current, err)
		}
		return base + u.EscapedPath(), nil
	default:
		return "", ErrNoClientConfig
	}
}

// injectCRD sets the bundle (and with base, the URL) of a CRD's conversion
// webhook.
func injectCRD(obj *unstructured.Unstructured, caBundle []byte, base string) (bool, error) {
	strategy, _, _ := unstructured.NestedString(obj.Object, "spec", "conversion", "strategy")
	cc, found, err := unstructured.NestedMap(obj.Object, "spec", "conversion", "webhook", "clientConfig")
	if strategy != "Webhook" || !found || err != nil {
		return false, ErrNoConversionWebhook
	}
	changed := false
	encoded := base64.StdEncoding.EncodeToString(caBundle)
	if old, _, _ := unstructured.NestedString(cc, "caBundle"); old != encoded {
		cc["caBundle"] = encoded
		changed = true
	}
	if base != "" {
		var svcPath, current *string
		if svc, ok := cc["service"].(map[string]any); ok {
			p, _, _ := unstructured.NestedString(svc, "path")
			svcPath = &p
		}
		if s, ok := cc["url"].(string); ok {
			current = &s
		}
		u, err := injectURL(base, svcPath, current)
		if err != nil {
			return false, err
		}
		if current == nil || *current != u {
			cc["url"] = u
			changed = true
		}
		if _, ok := cc["service"]; ok {
			delete(cc, "service")
			changed = true
		}
	}
	if !changed {
		return false, nil
	}
	return true, unstructured.SetNestedMap(obj.Object, cc, "spec", "conversion", "webhook", "clientConfig")
}

// hookRef is one webhook of a configuration: its name, for errors, and its
// clientConfig, to change in place.
type hookRef struct {
	name string
	cc   *admissionregistrationv1.WebhookClientConfig
}

// injectHooks sets the bundle (and URL) of each webhook, and says whether
// anything changed.
func injectHooks(hooks []hookRef, caBundle []byte, base string) (bool, error) {
	changed := false
	for _, h := range hooks {
		ch, err := injectClientConfig(h.cc, caBundle, base)
		if err != nil {
			return false, fmt.Errorf("webhook %q: %w", h.name, err)
		}
		changed = changed || ch
	}
	return changed, nil
}
