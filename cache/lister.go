package cache

import (
	"k8s.io/apimachinery/pkg/labels"
)

// Lister reads objects from an informer's cache: never from the server,
// so what it returns may be behind the server by the watch latency (or
// more, while the watch is broken). Use a client.Client for live reads.
//
// The objects it returns are shared with the cache, with every other
// reader and with the informer's handlers: do not change them; copy an
// object (DeepCopy) first. The slices it returns belong to the caller.
//
// A Lister expects objects filed under [MetaNamespaceKey] keys, as an
// informer's cache is. It is a small value, safe for concurrent use and
// cheap to copy. The zero value is not usable; get one from
// [Informer.Lister] or [NewLister].
type Lister[T any] struct {
	idx Indexer[T]
}

// NewLister returns a Lister reading idx.
func NewLister[T any](idx Indexer[T]) Lister[T] { return Lister[T]{idx: idx} }

// Get returns the cluster-scoped object called name, and whether the
// cache holds it. For namespaced objects use Namespace(ns).Get(name).
func (l Lister[T]) Get(name string) (T, bool) { return l.idx.Get(name) }

// List returns the objects, in every namespace, whose labels match
// selector (nil or labels.Everything() for all of them), in no particular
// order. It uses the cache's label index, so a selector with an
// equality, "in" or "exists" requirement does not scan the cache. It
// fails only for an element type without labels (see [Store.Select]).
func (l Lister[T]) List(selector labels.Selector) ([]T, error) {
	return l.idx.Select("", selector)
}

// Namespace returns a view of the objects in namespace ns. Namespace("")
// is the cluster scope for Get and every namespace for List.
func (l Lister[T]) Namespace(ns string) NamespaceLister[T] {
	return NamespaceLister[T]{idx: l.idx, ns: ns}
}

// NamespaceLister reads the objects of one namespace from an informer's
// cache; see [Lister] for what that means. Get one from
// [Lister.Namespace].
type NamespaceLister[T any] struct {
	idx Indexer[T]
	ns  string
}

// Get returns the object called name in the namespace, and whether the
// cache holds it.
func (l NamespaceLister[T]) Get(name string) (T, bool) {
	if l.ns == "" {
		return l.idx.Get(name)
	}
	return l.idx.Get(l.ns + "/" + name)
}

// List returns the objects in the namespace whose labels match selector
// (nil or labels.Everything() for all of them), in no particular order,
// using the namespace and label indexes as [Lister.List] does.
func (l NamespaceLister[T]) List(selector labels.Selector) ([]T, error) {
	return l.idx.Select(l.ns, selector)
}
