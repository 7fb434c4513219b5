package client

import (
	"context"
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/tracing"
)

// Client reads and writes one resource on the API server. Every call is a
// request to the server; for reads from an informer cache, use a lister or
// a cache.CachedClient.
//
// A Client is immutable and safe for concurrent use. Namespace returns a
// copy scoped to a namespace.
type Client[T Object] struct {
	rc       *rest.Client
	res      *binding // where the objects live; shared by the copies Namespace makes
	ns       string
	newObj   func() T
	shallow  func(T) T // a shallow copy
	watch    func(ctx context.Context, r *rest.Request) (*rest.Watcher[T], error)
	metadata bool   // T is *metav1.PartialObjectMetadata
	owner    string // Options.FieldOwner
}

// For returns a client for objects of type E, such as corev1.Pod
// (client.For[corev1.Pod]), unstructured.Unstructured (with
// Options.Resource) or metav1.PartialObjectMetadata (with Options.Resource).
//
// It makes no request: the resource of a custom type is looked up with
// Options.Mapper by the first call that needs it (and again after a failed
// lookup), so a client can be made before its CRD is installed. For fails
// with an *UnknownTypeError only when it cannot tell where the objects
// live even in principle: an unstructured or metadata type without
// Options.Resource, or a custom type missing from Options.Scheme, or with
// neither Options.Mapper nor Options.Resource.
func For[E any, T interface {
	*E
	Object
}](rc *rest.Client, opts Options) (*Client[T], error) {
	b, err := bind[E](opts)
	if err != nil {
		return nil, err
	}
	_, metadata := any(T(new(E))).(*metav1.PartialObjectMetadata)
	return &Client[T]{
		rc:       rc,
		res:      b,
		newObj:   func() T { return T(new(E)) },
		shallow:  func(o T) T { cp := *o; return T(&cp) },
		watch:    rest.Watch[E, T],
		metadata: metadata,
		owner:    opts.FieldOwner,
	}, nil
}

// Resource returns where the client's objects live, looking it up first
// for a custom type not looked up yet.
func (c *Client[T]) Resource(ctx context.Context) (Resource, error) {
	return c.res.get(ctx)
}

// KnownResource returns where the client's objects live if that is known
// without a lookup: for built-in types, and types given a Resource.
func (c *Client[T]) KnownResource() (Resource, bool) {
	c.res.mu.Lock()
	defer c.res.mu.Unlock()
	return c.res.res, c.res.ok
}

// Namespace returns a copy of the client scoped to namespace ns. For a
// namespaced resource, "" means all namespaces (for List, Watch and
// DeleteCollection). For a cluster-scoped resource any other value is an
// error, returned by every call of the copy.
func (c *Client[T]) Namespace(ns string) *Client[T] {
	cp := *c
	cp.ns = ns
	return &cp
}

// resource returns the client's resource for a call: looked up if need
// be, and checked against the client's namespace.
func (c *Client[T]) resource(ctx context.Context) (Resource, error) {
	res, err := c.res.get(ctx)
	if err != nil {
		return Resource{}, err
	}
	if !res.Namespaced && c.ns != "" {
		return Resource{}, fmt.Errorf("client: %s is cluster-scoped; Namespace(%q) does not apply", res.Resource.GroupResource(), c.ns)
	}
	return res, nil
}

// req starts a request for the resource, in namespace ns. A metadata-only
// client asks for PartialObjectMetadata (as = "PartialObjectMetadata", or
// "PartialObjectMetadataList" for lists).
func (c *Client[T]) req(r *rest.Request, res Resource, ns, as string) *rest.Request {
	r = r.Group(res.Resource.Group).Version(res.Resource.Version).Resource(res.Resource.Resource)
	if res.Namespaced && ns != "" {
		r = r.Namespace(ns)
	}
	if c.metadata {
		r = r.Header("Accept", metadataAccept(c.rc, as))
	}
	return r
}

const (
	asObject = "PartialObjectMetadata"
	asList   = "PartialObjectMetadataList"
)

// metadataAccept asks the server for metadata only.
func metadataAccept(rc *rest.Client, as string) string {
	j := "application/json;as=" + as + ";g=meta.k8s.io;v=v1"
	if rc.ContentType() == rest.Protobuf {
		return "application/vnd.kubernetes.protobuf;as=" + as + ";g=meta.k8s.io;v=v1," + j
	}
	return j
}

// named returns the resource and namespace for a call on the object
// named name, checking that it has the namespace it needs.
func (c *Client[T]) named(ctx context.Context, verb, name string) (Resource, string, error) {
	res, err := c.resource(ctx)
	if err != nil {
		return res, "", err
	}
	if name == "" {
		return res, "", fmt.Errorf("client: %s %s: empty name", verb, res.Resource.GroupResource())
	}
	if res.Namespaced && c.ns == "" {
		return res, "", fmt.Errorf("client: %s %s %q: namespaced resource needs a namespace (use Namespace)", verb, res.Resource.GroupResource(), name)
	}
	return res, c.ns, nil
}

// objectNamespace returns the resource and the namespace for writing obj:
// the client's, or the object's when the client has none. They must
// agree. It refuses an object holding a shared part changed in place, or
// whose cached version in this process holds one (see [ErrSharedChanged]).
func (c *Client[T]) objectNamespace(ctx context.Context, verb string, obj T) (Resource, string, error) {
	res, err := c.resource(ctx)
	if err != nil {
		return res, "", err
	}
	if err := checkShared(verb, obj); err != nil {
		return res, "", err
	}
	ns := ""
	if res.Namespaced {
		ns = obj.GetNamespace()
		switch {
		case c.ns == "" && ns == "":
			return res, "", fmt.Errorf("client: %s %s %q: namespaced resource needs a namespace (set it on the object or use Namespace)", verb, res.Resource.GroupResource(), obj.GetName())
		case c.ns != "" && ns != "" && ns != c.ns:
			return res, "", fmt.Errorf("client: %s %s %q: object is in namespace %q but the client in %q", verb, res.Resource.GroupResource(), obj.GetName(), ns, c.ns)
		case ns == "":
			ns = c.ns
		}
	}
	if err := checkCached(verb, res, ns, obj); err != nil {
		return res, "", err
	}
	return res, ns, nil
}

// body returns obj with its apiVersion and kind set, so that it can be
// sent as protobuf or applied, without changing the caller's object (which
// may be shared, for example from a cache): an object that lacks them is
// copied first, shallowly for typed objects, deeply for unstructured ones,
// whose kind lives in the same map as their content.
func (c *Client[T]) body(obj T, res Resource) T {
	if res.Kind.Empty() || obj.GetObjectKind().GroupVersionKind() == res.Kind {
		return obj // a Resource given without its kind keeps the object's own
	}
	cp := c.copyOf(obj)
	cp.GetObjectKind().SetGroupVersionKind(res.Kind)
	return cp
}

// copyOf returns a copy of obj whose kind and metadata fields can be set
// without changing obj: shallow for typed objects (their ObjectMeta is a
// value; its maps are shared, so replace them, never write into them),
// deep for unstructured ones, whose kind and metadata live in the same map
// as their content.
func (c *Client[T]) copyOf(obj T) T {
	if u, ok := any(obj).(*unstructured.Unstructured); ok {
		return any(u.DeepCopy()).(T)
	}
	return c.shallow(obj)
}

// stamp returns obj with the trace of ctx's span in tracing.Annotation, when
// the rest.Client was made with tracing.Options.Annotate and ctx holds a
// sampled span; otherwise obj itself. obj is never changed: a stamped
// object is a copy.
func (c *Client[T]) stamp(ctx context.Context, obj T) T {
	if c.rc == nil || !c.rc.Tracing().Annotate {
		return obj
	}
	v := tracing.AnnotationValue(ctx)
	if v == "" || obj.GetAnnotations()[tracing.Annotation] == v {
		return obj
	}
	cp := c.copyOf(obj)
	tracing.WithAnnotation(ctx, cp)
	return cp
}

// Get returns the named object, or an error for which
// apierrors.IsNotFound is true when there is none ([Optional] turns that
// into ok=false).
func (c *Client[T]) Get(ctx context.Context, name string, opts metav1.GetOptions) (T, error) {
	var zero T
	res, ns, err := c.named(ctx, "get", name)
	if err != nil {
		return zero, err
	}
	obj := c.newObj()
	if err := c.req(c.rc.Get(), res, ns, asObject).Name(name).Options(&opts).Do(ctx, obj); err != nil {
		return zero, err
	}
	return obj, nil
}

// List returns one page of objects: all of them when opts.Limit is 0, else
// at most Limit with a continue token in the list's metadata (see
// [Client.ListAll] to walk the pages).
func (c *Client[T]) List(ctx context.Context, opts metav1.ListOptions) (*List[T], error) {
	res, err := c.resource(ctx)
	if err != nil {
		return nil, err
	}
	l := &List[T]{newItem: c.newObj}
	if err := c.req(c.rc.Get(), res, c.ns, asList).Options(&opts).Do(ctx, l); err != nil {
		return nil, err
	}
	if ul, ok := any(l).(*List[*unstructured.Unstructured]); ok {
		if err := fillKinds(ul); err != nil {
			return nil, err
		}
	} else if !c.metadata {
		// The items of a list come without apiVersion and kind; give them
		// the ones objects that come alone (a Get, a watch event) have.
		// Items that embed a TypeMeta share one apiVersion string, which
		// SetGroupVersionKind would make anew for each.
		apiVersion, kind := res.Kind.ToAPIVersionAndKind()
		for _, item := range l.Items {
			ok := item.GetObjectKind()
			if ok.GroupVersionKind().Kind != "" {
				continue
			}
			if tm, isTM := ok.(*metav1.TypeMeta); isTM {
				tm.APIVersion, tm.Kind = apiVersion, kind
			} else {
				ok.SetGroupVersionKind(res.Kind)
			}
		}
	}
	return l, nil
}

// Watch starts a watch; see rest.Watcher for reading its events. Set
// opts.ResourceVersion to the resourceVersion of a List to see every change
// after it, and opts.AllowWatchBookmarks for bookmarks.
func (c *Client[T]) Watch(ctx context.Context, opts metav1.ListOptions) (*rest.Watcher[T], error) {
	res, err := c.resource(ctx)
	if err != nil {
		return nil, err
	}
	opts.Watch = false // rest.Watch sets watch=true itself
	return c.watch(ctx, c.req(c.rc.Get(), res, c.ns, asObject).Options(&opts))
}

// Create creates obj in the client's namespace (or the object's, when the
// client has none) and returns the object as stored.
func (c *Client[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	var zero T
	res, ns, err := c.objectNamespace(ctx, "create", obj)
	if err != nil {
		return zero, err
	}
	if opts.FieldManager == "" {
		opts.FieldManager = c.owner
	}
	out := c.newObj()
	if err := c.req(c.rc.Post(), res, ns, asObject).Options(&opts).Body(c.body(c.stamp(ctx, obj), res)).Do(ctx, out); err != nil {
		return zero, err
	}
	return out, nil
}

// Update replaces obj. Its resourceVersion makes the write conditional: a
// stale one fails with a 409 Conflict (apierrors.IsConflict); see
// [RetryOnConflict]. The status subresource, where the resource has one,
// is not changed; use UpdateStatus.
func (c *Client[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return c.update(ctx, obj, opts, "")
}

// UpdateStatus replaces obj's status through the status subresource; its
// spec is not changed.
func (c *Client[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return c.update(ctx, obj, opts, "status")
}

func (c *Client[T]) update(ctx context.Context, obj T, opts metav1.UpdateOptions, sub string) (T, error) {
	var zero T
	res, ns, err := c.objectNamespace(ctx, "update", obj)
	if err != nil {
		return zero, err
	}
	if obj.GetName() == "" {
		return zero, fmt.Errorf("client: update %s: object has no name", res.Resource.GroupResource())
	}
	if opts.FieldManager == "" {
		opts.FieldManager = c.owner
	}
	r := c.req(c.rc.Put(), res, ns, asObject).Name(obj.GetName())
	if sub != "" {
		r = r.SubResource(sub)
	} else {
		obj = c.stamp(ctx, obj)
	}
	out := c.newObj()
	if err := r.Options(&opts).Body(c.body(obj, res)).Do(ctx, out); err != nil {
		return zero, err
	}
	return out, nil
}

// Patch applies a patch to the named object, or to one of its
// subresources (such as "status"). pt is types.JSONPatchType,
// MergePatchType, StrategicMergePatchType (built-in types only) or
// ApplyPatchType (server-side apply; see also [Client.Apply]).
func (c *Client[T]) Patch(ctx context.Context, name string, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	var zero T
	res, ns, err := c.named(ctx, "patch", name)
	if err != nil {
		return zero, err
	}
	if opts.FieldManager == "" {
		opts.FieldManager = c.owner
	}
	r := c.req(c.rc.Patch(string(pt)), res, ns, asObject).Name(name)
	if len(subresources) > 0 {
		r = r.SubResource(subresources...)
	}
	out := c.newObj()
	if err := r.Options(&opts).Body(data).Do(ctx, out); err != nil {
		return zero, err
	}
	return out, nil
}

// ApplyOptions configure [Client.Apply].
type ApplyOptions struct {
	// FieldManager names the owner of the applied fields. Default: the
	// client's Options.FieldOwner; one of the two is required.
	FieldManager string
	// Force takes ownership of fields another manager owns, instead of
	// failing with a 409 Conflict that names them.
	Force bool
	// DryRun, when "All", validates without storing.
	DryRun string
}

// ErrNoFieldManager is returned by Apply when neither its options nor the
// client's name a field manager.
var ErrNoFieldManager = errors.New("client: server-side apply needs a FieldManager")

// Apply sends obj as a server-side apply patch: the server merges the
// fields obj sets into the stored object (creating it if absent) and
// records the field manager as their owner. Conflicts with fields owned
// by another manager fail with a 409 Conflict that names them, unless
// Force is set.
//
// Only the fields obj sets are sent, so the manager owns what the code
// wrote and nothing else: a nil pointer, slice or map, a struct with no
// field set, and a zero value in an omitempty field are left out, while a
// pointer to a zero value (replicas: ptr(int32(0))) or to an empty struct
// (emptyDir: {}) is sent. Build the object from nothing, with the fields
// you mean to own, rather than from one read from the server. A field
// whose zero value cannot be told from unset (a bool or number with
// omitempty and no pointer) cannot be applied as zero through a typed
// object; an *unstructured.Unstructured is sent exactly as it is, and
// says that too.
func (c *Client[T]) Apply(ctx context.Context, obj T, opts ApplyOptions) (T, error) {
	return c.apply(ctx, obj, opts)
}

// ApplyStatus is Apply to the status subresource.
func (c *Client[T]) ApplyStatus(ctx context.Context, obj T, opts ApplyOptions) (T, error) {
	return c.apply(ctx, obj, opts, "status")
}

func (c *Client[T]) apply(ctx context.Context, obj T, opts ApplyOptions, sub ...string) (T, error) {
	var zero T
	if opts.FieldManager == "" {
		opts.FieldManager = c.owner
	}
	if opts.FieldManager == "" {
		return zero, ErrNoFieldManager
	}
	res, ns, err := c.objectNamespace(ctx, "apply", obj)
	if err != nil {
		return zero, err
	}
	if len(sub) == 0 {
		obj = c.stamp(ctx, obj)
	}
	data, err := applyBody(c.body(obj, res))
	if err != nil {
		return zero, fmt.Errorf("client: apply %s %q: %w", res.Resource.GroupResource(), obj.GetName(), err)
	}
	po := metav1.PatchOptions{FieldManager: opts.FieldManager}
	if opts.Force {
		po.Force = &opts.Force
	}
	if opts.DryRun != "" {
		po.DryRun = []string{opts.DryRun}
	}
	cc := *c
	cc.ns = ns
	return cc.Patch(ctx, obj.GetName(), types.ApplyPatchType, data, po, sub...)
}

// Delete deletes the named object. opts.PropagationPolicy chooses what
// happens to its dependents (Background, Foreground or Orphan; done by the
// garbage collector in kube-controller-manager), opts.Preconditions makes
// the delete conditional on a UID or resourceVersion, and
// opts.GracePeriodSeconds overrides the grace period.
func (c *Client[T]) Delete(ctx context.Context, name string, opts metav1.DeleteOptions) error {
	res, ns, err := c.named(ctx, "delete", name)
	if err != nil {
		return err
	}
	return c.req(c.rc.Delete(), res, ns, asObject).Name(name).Body(&opts).Do(ctx, nil)
}

// DeleteCollection deletes every object the list options select, in the
// client's namespace (all namespaces when it has none, for namespaced
// resources).
func (c *Client[T]) DeleteCollection(ctx context.Context, opts metav1.DeleteOptions, listOpts metav1.ListOptions) error {
	res, err := c.resource(ctx)
	if err != nil {
		return err
	}
	return c.req(c.rc.Delete(), res, c.ns, asObject).Options(&listOpts).Body(&opts).Do(ctx, nil)
}
