package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"

	"go.opentelemetry.io/otel/trace"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/workqueue"
)

// A Source is something whose objects' changes a controller can watch:
// an informer (*cache.Informer) or a client that reads from one
// (*cache.CachedClient, such as the manager's CachedClient).
type Source interface {
	AddObjectHandler(h cache.Handler[client.Object], opts cache.HandlerOptions) (cache.Registration, error)
}

// Owns makes every change to an object of src that passes preds reconcile
// its controller owner, if the owner is of the controller's type. A
// namespaced owner is in its object's namespace; a cluster-scoped owner
// has none. src may hold metadata only (*metav1.PartialObjectMetadata):
// owner references are metadata. The handler runs on the informer's own
// goroutine (see cache.HandlerOptions.Inline): it only filters and
// enqueues, so preds must be quick. It returns c; an error is returned by
// Start.
func (c *Controller[T]) Owns(src Source, preds ...Predicate) *Controller[T] {
	gk := c.kind.GroupKind()
	if gk.Kind == "" {
		c.fail(fmt.Errorf("Owns: the kind of %T is not known (add it to the manager's Scheme)", *new(T)))
		return c
	}
	c.fail(c.watch(src, true, false, func(obj client.Object) []Request {
		if req, _, ok := c.owner(obj); ok {
			return []Request{req}
		}
		return nil
	}, preds))
	return c
}

// OwnsAny is [Controller.Owns] for every owner of the controller's type,
// not only the controller owner: a change to an object of src reconciles
// each object of type T among its owner references (as controller-runtime's
// Owns with MatchEveryOwner). It is for objects that several owners share,
// such as a Secret that a few custom resources list as theirs.
func (c *Controller[T]) OwnsAny(src Source, preds ...Predicate) *Controller[T] {
	gk := c.kind.GroupKind()
	if gk.Kind == "" {
		c.fail(fmt.Errorf("OwnsAny: the kind of %T is not known (add it to the manager's Scheme)", *new(T)))
		return c
	}
	c.fail(c.watch(src, true, false, c.owners, preds))
	return c
}

// owners returns the keys of obj's owners of the controller's type.
func (c *Controller[T]) owners(obj client.Object) []Request {
	var reqs []Request
	for i := range obj.GetOwnerReferences() {
		ref := &obj.GetOwnerReferences()[i]
		if c.ofKind(ref) {
			reqs = append(reqs, Request{Namespace: c.ownerNamespace(obj), Name: ref.Name})
		}
	}
	return reqs
}

// ofKind reports whether ref names an object of the controller's type.
func (c *Controller[T]) ofKind(ref *metav1.OwnerReference) bool {
	gk := c.kind.GroupKind()
	gv, err := schema.ParseGroupVersion(ref.APIVersion)
	return err == nil && gv.Group == gk.Group && ref.Kind == gk.Kind
}

// owner returns the key and the reference of obj's controller owner, if
// that owner is of the controller's type.
func (c *Controller[T]) owner(obj client.Object) (Request, *metav1.OwnerReference, bool) {
	ref := metav1.GetControllerOfNoCopy(obj)
	if ref == nil || !c.ofKind(ref) {
		return Request{}, nil, false
	}
	return Request{Namespace: c.ownerNamespace(obj), Name: ref.Name}, ref, true
}

// ownerNamespace is the namespace of obj's owner, an object of the
// controller's type: obj's own when that type is namespaced.
func (c *Controller[T]) ownerNamespace(obj client.Object) string {
	if c.primary == nil {
		return obj.GetNamespace()
	}
	// The informer has listed by the time its objects' owned objects
	// change, so the lookup is done: this costs no request.
	if res, err := c.primary.Resource(context.Background()); err == nil && !res.Namespaced {
		return ""
	}
	return obj.GetNamespace()
}

// Watches makes every change to an object of src that passes preds
// reconcile the keys mapFn returns for it (for a delete, for its final
// state). mapFn and preds run on a goroutine of the handler's own, so a
// slow mapFn (one that lists from a cache, say) delays only this source.
// It returns c; an error is returned by Start.
func (c *Controller[T]) Watches(src Source, mapFn func(obj client.Object) []Request, preds ...Predicate) *Controller[T] {
	if mapFn == nil {
		c.fail(errors.New("Watches: nil map function"))
		return c
	}
	c.fail(c.watch(src, false, false, mapFn, preds))
	return c
}

// fail records a construction error for Start.
func (c *Controller[T]) fail(err error) {
	if err == nil {
		return
	}
	c.mu.Lock()
	defer c.mu.Unlock()
	c.err = errors.Join(c.err, fmt.Errorf("controller %s: %w", c.name, err))
}

// watch adds a handler to src that enqueues mapFn's keys for changes
// passing preds (or, for the primary source, the controller's Filter
// predicates); inline runs it on the informer's goroutine.
func (c *Controller[T]) watch(src Source, inline, primary bool, mapFn func(client.Object) []Request, preds []Predicate) error {
	if src == nil {
		return errors.New("nil source")
	}
	filters := func() []Predicate {
		if !primary {
			return preds
		}
		c.mu.Lock()
		defer c.mu.Unlock()
		return c.preds
	}
	h := cache.HandlerFuncs[client.Object]{
		Add: func(obj client.Object, initial bool) {
			for _, p := range filters() {
				if p.Create != nil && !p.Create(obj) {
					return
				}
			}
			keys := mapFn(obj)
			var remote trace.SpanContext
			if !initial {
				// A stamp in the initial list belongs to a change made
				// before this controller started.
				remote = c.tracer.stamped(obj, nil)
			}
			c.tracer.event("watch add", obj, remote, keys)
			// The initial list is a backlog that nothing waits for: a
			// change seen meanwhile goes before it.
			prio := workqueue.PriorityNormal
			if initial && !c.opts.NoPriority {
				prio = workqueue.PriorityLow
			}
			for _, r := range keys {
				c.queue.AddWithPriority(r, prio)
			}
		},
		Update: func(old, new client.Object) {
			for _, p := range filters() {
				if p.Update != nil && !p.Update(old, new) {
					return
				}
			}
			// An update can move an object away from a key (a changed owner
			// or label): reconcile the old key too, if it differs.
			keys := slices.Clip(mapFn(new)) // appending must not write into mapFn's array
			for _, r := range mapFn(old) {
				if !slices.Contains(keys, r) {
					keys = append(keys, r)
				}
			}
			c.tracer.event("watch update", new, c.tracer.stamped(new, old), keys)
			// A resync delivers the cached object as both states: nothing
			// changed, so it waits behind the changes.
			prio := workqueue.PriorityNormal
			if rv := new.GetResourceVersion(); rv != "" && old.GetResourceVersion() == rv && !c.opts.NoPriority {
				prio = workqueue.PriorityLow
			}
			for _, r := range keys {
				c.queue.AddWithPriority(r, prio)
			}
		},
		Delete: func(obj client.Object, _ bool) {
			for _, p := range filters() {
				if p.Delete != nil && !p.Delete(obj) {
					return
				}
			}
			// A delete carries no new stamp: the object's is from its last write.
			keys := mapFn(obj)
			c.tracer.event("watch delete", obj, trace.SpanContext{}, keys)
			for _, r := range keys {
				c.Enqueue(r)
			}
		},
	}
	reg, err := src.AddObjectHandler(h, cache.HandlerOptions{Inline: inline})
	if err != nil {
		return err
	}
	return c.addSource(reg)
}
