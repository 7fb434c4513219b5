package cache

import (
	"k8s.io/apimachinery/pkg/labels"
)

// Reader reads a keyed collection. Implementations are safe for
// concurrent use. Objects returned are shared with the store and with
// every other reader: they must not be mutated. Slices returned are new
// and belong to the caller.
type Reader[T any] interface {
	// Get returns the object stored under key, and whether there is one.
	Get(key string) (T, bool)
	// List returns every object, in no particular order.
	List() []T
	// ListKeys returns every key, in no particular order.
	ListKeys() []string
	// Len returns the number of objects.
	Len() int
}

// Writer changes a keyed collection. Add and Update both store obj under
// its key, replacing any object there; Delete removes the object with
// obj's key, if any; Replace makes the collection hold exactly objs.
// Writers own the objects they pass in and must not mutate them
// afterwards. In Loom the reflector holds the only Writer of a cache.
type Writer[T any] interface {
	Add(obj T) error
	Update(obj T) error
	Delete(obj T) error
	Replace(objs []T) error
}

// ReadWriter is a [Reader] and a [Writer]: a complete store. [Store]
// implements it, and so do the stores of package
// [github.com/loom-k8s/loom/cache/stores].
type ReadWriter[T any] interface {
	Reader[T]
	Writer[T]
}

// IndexReader answers index queries. Objects returned are shared and
// must not be mutated; slices returned belong to the caller. Every method
// that names an index returns an error wrapping [ErrNoSuchIndex] when
// there is no such index.
type IndexReader[T any] interface {
	// Index returns the objects that share at least one value of index
	// name with obj (whose values are computed by the index function;
	// obj need not be stored).
	Index(name string, obj T) ([]T, error)
	// IndexKeys returns the keys of the objects filed under value in
	// index name.
	IndexKeys(name, value string) ([]string, error)
	// ListIndexFuncValues returns the values index name holds at least
	// one object under, or nil for an unknown index.
	ListIndexFuncValues(name string) []string
	// ByIndex returns the objects filed under value in index name.
	ByIndex(name, value string) ([]T, error)
	// Select returns the objects in namespace ("" for all namespaces)
	// whose labels match selector (nil means everything), in no
	// particular order. It uses the label index when the selector has
	// an equality, "in" or "exists" requirement, and the namespace
	// index when namespace is set; it scans only otherwise. A
	// non-trivial selector on a store without labels fails with
	// [ErrNoLabels].
	Select(namespace string, selector labels.Selector) ([]T, error)
}

// Indexer is a read-only, indexed view of a cache: what listers and
// reconcilers are given. [Store] implements it; only the reflector
// writes, through [Writer].
type Indexer[T any] interface {
	Reader[T]
	IndexReader[T]
}
