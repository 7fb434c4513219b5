package controller

import (
	"maps"

	"k8s.io/apimachinery/pkg/labels"

	"github.com/loom-k8s/loom/client"
)

// Predicate filters the changes a source turns into reconciles. A nil
// function lets every change of its kind through. All predicates given to
// a source must agree for a change to pass. The objects are those of the
// source, as client.Object: assert their type for type-specific checks.
type Predicate struct {
	Create func(obj client.Object) bool
	Update func(old, new client.Object) bool
	Delete func(obj client.Object) bool
}

// GenerationChanged passes updates that change metadata.generation, which
// the API server bumps on spec changes but not on status or metadata
// changes; creates and deletes pass. (Resources without a generation, such
// as ConfigMaps, keep it at 0: every update is dropped.)
func GenerationChanged() Predicate {
	return Predicate{Update: func(old, new client.Object) bool { return old.GetGeneration() != new.GetGeneration() }}
}

// LabelsChanged passes updates that change the labels.
func LabelsChanged() Predicate {
	return Predicate{Update: func(old, new client.Object) bool { return !maps.Equal(old.GetLabels(), new.GetLabels()) }}
}

// AnnotationsChanged passes updates that change the annotations.
func AnnotationsChanged() Predicate {
	return Predicate{Update: func(old, new client.Object) bool {
		return !maps.Equal(old.GetAnnotations(), new.GetAnnotations())
	}}
}

// ResourceVersionChanged passes updates that changed the object on the
// server, dropping the periodic resyncs (in which old and new are the same).
func ResourceVersionChanged() Predicate {
	return Predicate{Update: func(old, new client.Object) bool { return old.GetResourceVersion() != new.GetResourceVersion() }}
}

// Or passes a change when any of preds passes it.
func Or(preds ...Predicate) Predicate {
	return Predicate{
		Create: func(o client.Object) bool {
			return anyOf(preds, func(p Predicate) bool { return p.Create == nil || p.Create(o) })
		},
		Update: func(a, b client.Object) bool {
			return anyOf(preds, func(p Predicate) bool { return p.Update == nil || p.Update(a, b) })
		},
		Delete: func(o client.Object) bool {
			return anyOf(preds, func(p Predicate) bool { return p.Delete == nil || p.Delete(o) })
		},
	}
}

// Not passes a change when p does not. A nil function of p passes every
// change of its kind, so Not of it passes none.
func Not(p Predicate) Predicate {
	return Predicate{
		Create: func(o client.Object) bool { return p.Create != nil && !p.Create(o) },
		Update: func(a, b client.Object) bool { return p.Update != nil && !p.Update(a, b) },
		Delete: func(o client.Object) bool { return p.Delete != nil && !p.Delete(o) },
	}
}

// LabelSelector passes the changes of objects whose labels match sel: a
// create or delete of a matching object, and an update whose new object
// matches or whose old one did (so that losing the labels is seen too).
func LabelSelector(sel labels.Selector) Predicate {
	match := func(o client.Object) bool { return sel.Matches(labels.Set(o.GetLabels())) }
	return Predicate{
		Create: match,
		Update: func(old, new client.Object) bool { return match(new) || match(old) },
		Delete: match,
	}
}

func anyOf(preds []Predicate, f func(Predicate) bool) bool {
	for _, p := range preds {
		if f(p) {
			return true
		}
	}
	return false
}
