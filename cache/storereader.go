package cache

import (
	"context"
	"reflect"
	"strings"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

// StoreReader returns a client.IndexedReader over a store that files
// objects under namespace/name keys (a [Store] made with the default key
// function, or an informer's cache); ByIndex reads the store's indexes.
// With a store filled by hand, it is the reading half of a reconciler's
// unit test, with no API server and no informer:
//
//	deps := cache.NewStore(cache.StoreOptions[*appsv1.Deployment]{})
//	deps.Add(existing)
//	r := &Reconciler{Deployments: struct {
//		client.Reader[*appsv1.Deployment]
//		client.Writer[*appsv1.Deployment]
//	}{cache.StoreReader(deps), recorder}}
func StoreReader[T client.Object](store Indexer[T]) client.IndexedReader[T] {
	return storeReader[T]{store}
}

type storeReader[T client.Object] struct {
	store Indexer[T]
}

func (r storeReader[T]) ByIndex(_ context.Context, namespace, index, value string) ([]T, error) {
	return byIndex(r.store, namespace, index, value)
}

func (r storeReader[T]) Get(_ context.Context, namespace, name string) (T, error) {
	obj, ok := getIn(r.store, namespace, name)
	if !ok {
		var zero T
		// The resource is not known here; the type's name stands in for it.
		return zero, apierrors.NewNotFound(schema.GroupResource{Resource: strings.ToLower(reflect.TypeFor[T]().Elem().Name())}, name)
	}
	return obj, nil
}

func (r storeReader[T]) List(_ context.Context, namespace string, selector labels.Selector) ([]T, error) {
	if selector == nil {
		selector = labels.Everything()
	}
	return r.store.Select(namespace, selector)
}

// getIn returns the object namespace/name from a store keyed by
// MetaNamespaceKey (namespace "" for a cluster-scoped object), and
// whether it holds one.
func getIn[T any](store Reader[T], namespace, name string) (T, bool) {
	if namespace == "" {
		return store.Get(name)
	}
	return store.Get(namespace + "/" + name)
}
