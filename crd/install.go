package crd

import (
	"context"
	"fmt"
	"log/slog"
	"strings"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
)

// Resource returns where CustomResourceDefinitions live on the API server.
func Resource() client.Resource {
	return client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	}
}

// Options configure Install, WaitEstablished and Uninstall. The zero value
// is valid.
type Options struct {
	// FieldManager owns the applied fields (Install applies server-side,
	// taking over fields other managers hold). Default "loom".
	FieldManager string
	// Logger reports each CRD applied, established and removed. Nil means
	// discard.
	Logger *slog.Logger
}

func (o Options) fieldManager() string {
	if o.FieldManager == "" {
		return "loom"
	}
	return o.FieldManager
}

func (o Options) logger() *slog.Logger {
	if o.Logger == nil {
		return slog.New(slog.DiscardHandler)
	}
	return o.Logger
}

// NotEstablishedError says that a CRD did not become Established: either a
// condition showed that it never will (NamesAccepted=False, or the CRD is
// being deleted), or the context ended first (then Err is the context's
// error). Condition names the condition that held it back, with its last
// status, reason and message as the server reported them.
type NotEstablishedError struct {
	Name      string // the CRD, such as "ats.cnat.programming-kubernetes.info"
	Condition string // "Established", "NamesAccepted", "Terminating" or "Discoverable" (see Install)
	Status    string // the condition's last status; "" if never reported
	Reason    string
	Message   string
	Err       error // the context's error when it ended the wait; else nil
}

func (e *NotEstablishedError) Error() string {
	var b strings.Builder
	fmt.Fprintf(&b, "crd: %s is not established: condition %s", e.Name, e.Condition)
	if e.Status == "" {
		b.WriteString(" not reported")
	} else {
		fmt.Fprintf(&b, "=%s", e.Status)
	}
	if e.Reason != "" {
		fmt.Fprintf(&b, " (%s", e.Reason)
		if e.Message != "" {
			fmt.Fprintf(&b, ": %s", e.Message)
		}
		b.WriteString(")")
	}
	if e.Err != nil {
		fmt.Fprintf(&b, ": %v", e.Err)
	}
	return b.String()
}

func (e *NotEstablishedError) Unwrap() error { return e.Err }

func crds(ctx context.Context, rc *rest.Client) (*client.Client[*unstructured.Unstructured], error) {
	return client.For[unstructured.Unstructured](rc, client.Options{Resource: Resource()})
}

// Install applies the CRDs (server-side apply, so installing again updates
// them in place) and waits until every one is Established and the
// server's discovery lists each of its served versions, so that a
// discovery.Mapper made afterwards finds the new kinds at once. A CRD the
// server rejects fails with the server's error (apierrors.IsInvalid tells
// a schema mistake), wrapped with the CRD's name; one that does not become
// Established, or discoverable, before ctx ends fails with a
// *NotEstablishedError.
func Install(ctx context.Context, rc *rest.Client, crdObjs []*unstructured.Unstructured, opts Options) error {
	c, err := crds(ctx, rc)
	if err != nil {
		return err
	}
	log := opts.logger()
	for _, obj := range crdObjs {
		obj = obj.DeepCopy()
		obj.SetResourceVersion("")
		obj.SetManagedFields(nil)
		unstructured.RemoveNestedField(obj.Object, "status")
		if _, err := c.Apply(ctx, obj, client.ApplyOptions{FieldManager: opts.fieldManager(), Force: true}); err != nil {
			return fmt.Errorf("crd: install %s: %w", obj.GetName(), err)
		}
		log.Info("applied CRD", "crd", obj.GetName())
	}
	names := make([]string, len(crdObjs))
	for i, obj := range crdObjs {
		names[i] = obj.GetName()
	}
	if err := WaitEstablished(ctx, rc, opts, names...); err != nil {
		return err
	}
	return waitDiscoverable(ctx, rc, crdObjs)
}

// waitDiscoverable waits until the server's discovery lists every served
// version of each CRD. The API server marks a CRD Established before its
// discovery documents include it, and a client that maps kinds through
// discovery in between would not find them. Discovery has no watch, so
// this asks again every 50 ms. When ctx ends first it fails with a
// *NotEstablishedError whose Condition is "Discoverable".
func waitDiscoverable(ctx context.Context, rc *rest.Client, crdObjs []*unstructured.Unstructured) error {
	want := map[schema.GroupVersionResource]string{} // → the CRD's name
	for _, obj := range crdObjs {
		group, _, _ := unstructured.NestedString(obj.Object, "spec", "group")
		plural, _, _ := unstructured.NestedString(obj.Object, "spec", "names", "plural")
		versions, _, _ := unstructured.NestedSlice(obj.Object, "spec", "versions")
		for _, v := range versions {
			m, _ := v.(map[string]any)
			name, _ := m["name"].(string)
			if served, _ := m["served"].(bool); served && name != "" {
				want[schema.GroupVersionResource{Group: group, Version: name, Resource: plural}] = obj.GetName()
			}
		}
	}
	d := discovery.New(rc, discovery.Options{})
	tick := time.NewTicker(50 * time.Millisecond)
	defer tick.Stop()
	for {
		// A snapshot comes with an error when some groups failed; the
		// groups it has still count.
		if snap, _ := d.Discover(ctx); snap != nil {
			for _, l := range snap.ResourceLists() {
				gv, err := schema.ParseGroupVersion(l.GroupVersion)
				if err != nil {
					continue
				}
				for _, r := range l.APIResources {
					delete(want, gv.WithResource(r.Name))
				}
			}
		}
		if len(want) == 0 {
			return nil
		}
		select {
		case <-ctx.Done():
			for gvr, name := range want {
				return &NotEstablishedError{Name: name, Condition: "Discoverable", Status: "False",
					Message: gvr.String() + " is not in the server's discovery yet", Err: ctx.Err()}
			}
		case <-tick.C:
		}
	}
}

// WaitEstablished waits until each named CRD is Established. It watches each
// CRD rather than polling. It fails at once with a *NotEstablishedError when
// NamesAccepted is False or the CRD is being deleted, and with one carrying
// the context's error when ctx ends first. A CRD that does not exist is
// waited for: it may be about to be created.
func WaitEstablished(ctx context.Context, rc *rest.Client, opts Options, names ...string) error {
	c, err := crds(ctx, rc)
	if err != nil {
		return err
	}
	for _, name := range names {
		if err := waitFor(ctx, c, name, established); err != nil {
			return err
		}
		opts.logger().Info("CRD established", "crd", name)
	}
	return nil
}

// Uninstall deletes the CRDs and waits until they are gone. The API server
// first deletes every custom resource of a CRD (their finalizers included:
// a controller that holds a finalizer must still be running), so this can
// take a while. CRDs already absent are fine.
func Uninstall(ctx context.Context, rc *rest.Client, crdObjs []*unstructured.Unstructured, opts Options) error {
	c, err := crds(ctx, rc)
	if err != nil {
		return err
	}
	for _, obj := range crdObjs {
		err := c.Delete(ctx, obj.GetName(), metav1.DeleteOptions{})
		if err != nil && !apierrors.IsNotFound(err) {
			return fmt.Errorf("crd: uninstall %s: %w", obj.GetName(), err)
		}
	}
	for _, obj := range crdObjs {
		if err := waitFor(ctx, c, obj.GetName(), gone); err != nil {
			return fmt.Errorf("crd: uninstall %s: %w", obj.GetName(), err)
		}
		opts.logger().Info("removed CRD", "crd", obj.GetName())
	}
	return nil
}

// A check looks at the CRD (nil when absent) and says whether the wait is
// over, or returns the error that ends it. expired makes the error for a
// context that ended first, from the last state seen.
type check struct {
	done    func(name string, obj *unstructured.Unstructured) (bool, error)
	expired func(ctx context.Context, name string, last *unstructured.Unstructured) error
}

var (
	established = check{done: isEstablished, expired: notEstablished}
	gone        = check{done: isGone, expired: stillThere}
)

func isEstablished(name string, obj *unstructured.Unstructured) (bool, error) {
	if obj == nil {
		return false, nil
	}
	if obj.GetDeletionTimestamp() != nil {
		return false, &NotEstablishedError{Name: name, Condition: "Terminating", Status: "True",
			Reason: "Deleting", Message: "the CRD is being deleted"}
	}
	if c := condition(obj, "Established"); c.Status == "True" {
		return true, nil
	}
	if c := condition(obj, "NamesAccepted"); c.Status == "False" {
		return false, &NotEstablishedError{Name: name, Condition: "NamesAccepted", Status: c.Status, Reason: c.Reason, Message: c.Message}
	}
	return false, nil
}

func isGone(_ string, obj *unstructured.Unstructured) (bool, error) {
	return obj == nil, nil
}

// notEstablished is the error for a context that ended before the CRD was
// Established: it carries the last Established condition seen.
func notEstablished(ctx context.Context, name string, last *unstructured.Unstructured) error {
	e := &NotEstablishedError{Name: name, Condition: "Established", Err: ctx.Err()}
	if last != nil {
		c := condition(last, "Established")
		e.Status, e.Reason, e.Message = c.Status, c.Reason, c.Message
	} else {
		e.Reason, e.Message = "NotFound", "the CRD does not exist"
	}
	return e
}

func stillThere(ctx context.Context, name string, last *unstructured.Unstructured) error {
	return fmt.Errorf("crd: %s is still there (deleting its custom resources may wait on their finalizers): %w", name, ctx.Err())
}

type cond struct{ Status, Reason, Message string }

func condition(obj *unstructured.Unstructured, typ string) cond {
	list, _, _ := unstructured.NestedSlice(obj.Object, "status", "conditions")
	for _, item := range list {
		m, ok := item.(map[string]any)
		if !ok || m["type"] != typ {
			continue
		}
		s := func(k string) string { v, _ := m[k].(string); return v }
		return cond{Status: s("status"), Reason: s("reason"), Message: s("message")}
	}
	return cond{}
}

// waitFor reads the CRD, then watches it from that read, until the check
// says so. A watch the server ends is started again from a fresh read.
func waitFor(ctx context.Context, c *client.Client[*unstructured.Unstructured], name string, chk check) error {
	sel := fields.OneTermEqualSelector("metadata.name", name).String()
	var last *unstructured.Unstructured
	pause := 50 * time.Millisecond
	fail := func(err error) error {
		if ctx.Err() != nil {
			return chk.expired(ctx, name, last)
		}
		return fmt.Errorf("crd: wait for %s: %w", name, err)
	}
	for {
		list, err := c.List(ctx, metav1.ListOptions{FieldSelector: sel})
		if err != nil {
			return fail(err)
		}
		last = nil
		if len(list.Items) > 0 {
			last = list.Items[0]
		}
		if ok, err := chk.done(name, last); ok || err != nil {
			return err
		}
		w, err := c.Watch(ctx, metav1.ListOptions{FieldSelector: sel, ResourceVersion: list.ResourceVersion})
		if err != nil {
			return fail(err)
		}
		for ended := false; !ended; {
			ev, err := w.Next()
			if err != nil {
				break // ended by the server or the context: read again
			}
			switch ev.Type {
			case watch.Added, watch.Modified:
				last = ev.Object
			case watch.Deleted:
				last = nil
			case watch.Error:
				ended = true // such as 410 Gone: read again
				continue
			default:
				continue
			}
			if ok, err := chk.done(name, last); ok || err != nil {
				w.Stop()
				return err
			}
		}
		w.Stop()
		if ctx.Err() != nil {
			return chk.expired(ctx, name, last)
		}
		// A watch that ends at once must not turn into a tight loop of
		// lists and watches: pause, longer each time, before the next.
		select {
		case <-ctx.Done():
			return chk.expired(ctx, name, last)
		case <-time.After(pause):
		}
		pause = min(2*pause, 2*time.Second)
	}
}
