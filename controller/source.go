package controller

import (
	"fmt"
	"slices"

	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
)

// Informer is what a source needs of an informer; *cache.Informer
// implements it.
type Informer[T any] interface {
	AddHandler(h cache.Handler[T], opts cache.HandlerOptions) (cache.Registration, error)
}

// For makes every change to an object of inf that passes preds reconcile
// that object.
//
// The handler runs inline on the informer's goroutine (see
// [cache.HandlerOptions].Inline): it only filters and enqueues, which
// saves a goroutine hand-off per event. So preds must be quick and must
// not block, as predicates are meant to be.
func For[T client.Object](c *Controller, inf Informer[T], preds ...Predicate[T]) error {
	return watch(c, inf, preds, true, func(obj T) []Request {
		return []Request{{Namespace: obj.GetNamespace(), Name: obj.GetName()}}
	})
}

// Owns makes every change to an object of inf that passes preds reconcile
// its controller owner, if that owner is of the owner resource's kind. A
// namespaced owner is in its object's namespace; a cluster-scoped owner
// has none. inf may hold metadata only (*metav1.PartialObjectMetadata):
// owner references are metadata, and a metadata cache is much smaller.
// As with [For], the handler runs inline and preds must be quick.
func Owns[T client.Object](c *Controller, inf Informer[T], owner client.Resource, preds ...Predicate[T]) error {
	gk := owner.Kind.GroupKind()
	return watch(c, inf, preds, true, func(obj T) []Request {
		ref := GetControllerOf(obj)
		if ref == nil {
			return nil
		}
		gv, err := schema.ParseGroupVersion(ref.APIVersion)
		if err != nil || gv.Group != gk.Group || ref.Kind != gk.Kind {
			return nil
		}
		ns := ""
		if owner.Namespaced {
			ns = obj.GetNamespace()
		}
		return []Request{{Namespace: ns, Name: ref.Name}}
	})
}

// Watches makes every change to an object of inf that passes preds
// reconcile the keys mapFn returns for it (for a delete, for its final
// state). mapFn and preds run on a goroutine of the handler's own, so a
// slow mapFn (one that lists from a cache, say) delays only this source.
func Watches[T client.Object](c *Controller, inf Informer[T], mapFn func(obj T) []Request, preds ...Predicate[T]) error {
	return watch(c, inf, preds, false, mapFn)
}

// watch adds a handler that enqueues mapFn's keys for changes passing
// preds; inline runs it on the informer's goroutine.
func watch[T any](c *Controller, inf Informer[T], preds []Predicate[T], inline bool, mapFn func(T) []Request) error {
	enqueue := func(obj T) {
		for _, r := range mapFn(obj) {
			c.Enqueue(r)
		}
	}
	h := cache.HandlerFuncs[T]{
		Add: func(obj T, _ bool) {
			for _, p := range preds {
				if p.Create != nil && !p.Create(obj) {
					return
				}
			}
			enqueue(obj)
		},
		Update: func(old, new T) {
			for _, p := range preds {
				if p.Update != nil && !p.Update(old, new) {
					return
				}
			}
			// An update can move an object away from a key (a changed owner
			// or label): reconcile the old key too, if it differs.
			keys := mapFn(new)
			for _, r := range keys {
				c.Enqueue(r)
			}
			for _, r := range mapFn(old) {
				if !slices.Contains(keys, r) {
					c.Enqueue(r)
				}
			}
		},
		Delete: func(obj T, _ bool) {
			for _, p := range preds {
				if p.Delete != nil && !p.Delete(obj) {
					return
				}
			}
			enqueue(obj)
		},
	}
	reg, err := inf.AddHandler(h, cache.HandlerOptions{Inline: inline})
	if err != nil {
		return fmt.Errorf("controller %s: %w", c.name, err)
	}
	return c.addSource(reg)
}
