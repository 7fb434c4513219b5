package controller

import (
	"maps"

	"github.com/loom-k8s/loom/client"
)

// Predicate filters the changes a source turns into reconciles. A nil
// function lets every change of its kind through. All predicates given to
// a source must agree for a change to pass.
type Predicate[T any] struct {
	Create func(obj T) bool
	Update func(old, new T) bool
	Delete func(obj T) bool
}

// GenerationChanged passes updates that change metadata.generation, which
// the API server bumps on spec changes but not on status or metadata
// changes; creates and deletes pass. (Resources without a generation, such
// as ConfigMaps, keep it at 0: every update is dropped.)
func GenerationChanged[T client.Object]() Predicate[T] {
	return Predicate[T]{Update: func(old, new T) bool { return old.GetGeneration() != new.GetGeneration() }}
}

// LabelsChanged passes updates that change the labels.
func LabelsChanged[T client.Object]() Predicate[T] {
	return Predicate[T]{Update: func(old, new T) bool { return !maps.Equal(old.GetLabels(), new.GetLabels()) }}
}

// AnnotationsChanged passes updates that change the annotations.
func AnnotationsChanged[T client.Object]() Predicate[T] {
	return Predicate[T]{Update: func(old, new T) bool { return !maps.Equal(old.GetAnnotations(), new.GetAnnotations()) }}
}

// ResourceVersionChanged passes updates that changed the object on the
// server, dropping the periodic resyncs (in which old and new are the same).
func ResourceVersionChanged[T client.Object]() Predicate[T] {
	return Predicate[T]{Update: func(old, new T) bool { return old.GetResourceVersion() != new.GetResourceVersion() }}
}

// Or passes a change when any of preds passes it.
func Or[T any](preds ...Predicate[T]) Predicate[T] {
	return Predicate[T]{
		Create: func(o T) bool {
			return anyOf(preds, func(p Predicate[T]) bool { return p.Create == nil || p.Create(o) })
		},
		Update: func(a, b T) bool {
			return anyOf(preds, func(p Predicate[T]) bool { return p.Update == nil || p.Update(a, b) })
		},
		Delete: func(o T) bool {
			return anyOf(preds, func(p Predicate[T]) bool { return p.Delete == nil || p.Delete(o) })
		},
	}
}

func anyOf[T any](preds []Predicate[T], f func(Predicate[T]) bool) bool {
	for _, p := range preds {
		if f(p) {
			return true
		}
	}
	return false
}
