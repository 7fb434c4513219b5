package client

import (
	"context"
	"fmt"
	"reflect"
	"sync"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/discovery"
)

// Object is what a Client reads and writes: a pointer to an API object,
// such as *corev1.Pod, *unstructured.Unstructured (any resource, including
// custom resources) or *metav1.PartialObjectMetadata (metadata only).
type Object interface {
	metav1.Object
	runtime.Object
}

// Resource says where objects live: the resource's group, version and
// plural name, the objects' kind, and the scope. It is the same value the
// RESTMapper returns.
type Resource = discovery.Mapping

// Mapper finds the resource for a kind; *discovery.Mapper implements it.
type Mapper interface {
	RESTMapping(ctx context.Context, gk schema.GroupKind, versions ...string) (discovery.Mapping, error)
}

// Options configure [For]. The zero value is valid for the built-in types
// of k8s.io/api that kube-apiserver serves by default.
type Options struct {
	// Resource, when its Resource.Resource is set, says where objects live
	// and is used as given. It is required for *unstructured.Unstructured
	// and *metav1.PartialObjectMetadata, whose Go type names no kind.
	Resource Resource
	// Scheme finds the kind of a custom Go type (one registered with its
	// group's AddToScheme). Nil means only the built-in types are known.
	Scheme *runtime.Scheme
	// Mapper finds the resource for kinds that are not built in, such as
	// custom resources. Nil means only the built-in table is used.
	Mapper Mapper
	// FieldOwner names this client in the managedFields of what it
	// writes: the field manager of Apply and ApplyStatus, and of Create,
	// Update, UpdateStatus and Patch, whenever their options name none.
	// Default "": Apply then needs ApplyOptions.FieldManager, and the
	// server names other writers after the program's user agent.
	FieldOwner string
}

// UnknownTypeError is returned by [For] when it cannot tell where objects
// of a Go type live.
type UnknownTypeError struct {
	Type   reflect.Type
	Reason string
}

func (e *UnknownTypeError) Error() string {
	return fmt.Sprintf("client: no resource known for %v: %s", e.Type, e.Reason)
}

// binding is where a client's objects live: known from the start, or
// looked up with a Mapper when first needed.
type binding struct {
	mapper Mapper
	gvk    schema.GroupVersionKind // what to look up

	mu  sync.Mutex
	res Resource
	ok  bool
}

// get returns the resource, looking it up if need be. A failed lookup is
// not kept: the next call tries again (the CRD may be installed by then).
func (b *binding) get(ctx context.Context) (Resource, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.ok {
		return b.res, nil
	}
	m, err := b.mapper.RESTMapping(ctx, b.gvk.GroupKind(), b.gvk.Version)
	if err != nil {
		return Resource{}, fmt.Errorf("client: resource for %v: %w", b.gvk, err)
	}
	b.res, b.ok = m, true
	return m, nil
}

// bind finds where objects of type E live, or how to find out.
func bind[E any](opts Options) (*binding, error) {
	if opts.Resource.Resource.Resource != "" {
		return &binding{res: opts.Resource, ok: true}, nil
	}
	t := reflect.TypeFor[E]()
	switch any(new(E)).(type) {
	case *unstructured.Unstructured, *metav1.PartialObjectMetadata:
		return nil, &UnknownTypeError{Type: reflect.PointerTo(t), Reason: "set Options.Resource (for example from discovery.Mapper.ResourceFor)"}
	}
	if r, ok := builtins[t]; ok {
		return &binding{res: r, ok: true}, nil
	}
	if opts.Scheme == nil {
		return nil, &UnknownTypeError{Type: reflect.PointerTo(t), Reason: "not a built-in type; set Options.Scheme (and Options.Mapper or Options.Resource)"}
	}
	obj, ok := any(new(E)).(runtime.Object)
	if !ok {
		return nil, &UnknownTypeError{Type: reflect.PointerTo(t), Reason: "not a runtime.Object"}
	}
	gvks, _, err := opts.Scheme.ObjectKinds(obj)
	if err != nil {
		return nil, &UnknownTypeError{Type: reflect.PointerTo(t), Reason: err.Error()}
	}
	gvk := gvks[0]
	if opts.Mapper == nil {
		return nil, &UnknownTypeError{Type: reflect.PointerTo(t), Reason: fmt.Sprintf("kind %v is not built in; set Options.Mapper or Options.Resource", gvk)}
	}
	return &binding{mapper: opts.Mapper, gvk: gvk}, nil
}

// KindOf returns the group, version and kind of obj: from its own
// apiVersion and kind when set, else from the built-in table for its Go
// type, else from scheme (which may be nil). Objects read from a cache
// often have no apiVersion and kind; this is how to name them anyway.
func KindOf(obj runtime.Object, scheme *runtime.Scheme) (schema.GroupVersionKind, bool) {
	if gvk := obj.GetObjectKind().GroupVersionKind(); gvk.Kind != "" && gvk.Version != "" {
		return gvk, true
	}
	t := reflect.TypeOf(obj)
	if t.Kind() == reflect.Pointer {
		if r, ok := builtins[t.Elem()]; ok {
			return r.Kind, true
		}
	}
	if scheme != nil {
		if gvks, _, err := scheme.ObjectKinds(obj); err == nil && len(gvks) > 0 {
			return gvks[0], true
		}
	}
	return schema.GroupVersionKind{}, false
}

// ReferenceTo returns the ObjectReference of obj, as an event's involved
// object or a status field such as a CronJob's active Jobs hold it: its
// apiVersion and kind (found as [KindOf] finds them, scheme may be nil),
// namespace, name, UID and resourceVersion. It fails when the kind is
// unknown: set the object's apiVersion and kind, or give a scheme that
// has its Go type.
func ReferenceTo(obj Object, scheme *runtime.Scheme) (corev1.ObjectReference, error) {
	gvk, ok := KindOf(obj, scheme)
	if !ok {
		return corev1.ObjectReference{}, &UnknownTypeError{Type: reflect.TypeOf(obj),
			Reason: "its apiVersion and kind are not set, and it is neither built in nor in the scheme"}
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return corev1.ObjectReference{APIVersion: apiVersion, Kind: kind, Namespace: obj.GetNamespace(), Name: obj.GetName(),
		UID: obj.GetUID(), ResourceVersion: obj.GetResourceVersion()}, nil
}
