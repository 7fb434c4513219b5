package client

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/types"
)

// Reader reads objects of one type. The manager's cached clients
// (cache.CachedClient) read from an informer's cache; cache.StoreReader
// reads an in-memory store, for unit tests of reconcilers.
type Reader[T Object] interface {
	// Get returns the object namespace/name (namespace "" for a
	// cluster-scoped one), or an error for which apierrors.IsNotFound is
	// true when there is none. The object may be shared: do not change
	// it.
	Get(ctx context.Context, namespace, name string) (T, error)
	// List returns the objects in namespace ("" for all) whose labels
	// match selector (nil for all). They may be shared: do not change
	// them.
	List(ctx context.Context, namespace string, selector labels.Selector) ([]T, error)
}

// An IndexedReader is a Reader that also reads by an index of a cache:
// what reconcilers take when they look objects up by a field, such as the
// Jobs of an owner. A *cache.CachedClient is one, and so is
// cache.StoreReader over a store filled by hand, for unit tests.
type IndexedReader[T Object] interface {
	Reader[T]
	// ByIndex returns the objects that the index named index files under
	// value, in namespace ("" for all namespaces). The index must exist
	// (it is added to the cache before the cache starts); reading an
	// unknown index is an error.
	ByIndex(ctx context.Context, namespace, index, value string) ([]T, error)
}

// Writer writes objects of one type. Each call takes the object itself,
// whose namespace and name say which one. The manager's cached clients
// (cache.CachedClient) write to the API server; tests can record.
type Writer[T Object] interface {
	// Create creates obj and returns it as stored.
	Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error)
	// Update replaces obj (not its status), conditional on its
	// resourceVersion, and returns it as stored.
	Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	// UpdateStatus replaces obj's status subresource.
	UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error)
	// Patch patches obj (by namespace and name), or one of its
	// subresources (such as "status"), with data, of type pt.
	Patch(ctx context.Context, obj T, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error)
	// Delete deletes obj (by namespace and name).
	Delete(ctx context.Context, obj T, opts metav1.DeleteOptions) error
}

// An Applier writes objects of one type with server-side apply: it sends
// the desired state, and the server merges it and records who owns each
// field, with no read first and no conflict on resourceVersion. It is the
// path beside controller.CreateOrUpdate for reconcilers that state what
// they want. A [*Client], its [Client.ReadWriter] and a cache.CachedClient
// are Appliers.
type Applier[T Object] interface {
	// Apply applies obj (see [Client.Apply] for the fields sent).
	Apply(ctx context.Context, obj T, opts ApplyOptions) (T, error)
	// ApplyStatus applies obj's status through the status subresource.
	ApplyStatus(ctx context.Context, obj T, opts ApplyOptions) (T, error)
}

// ReadWriter reads and writes objects of one type: what helpers such as
// controller.CreateOrUpdate need.
type ReadWriter[T Object] interface {
	Reader[T]
	Writer[T]
}

// ReadWriter returns c as a ReadWriter (and an [Applier]) whose reads
// and writes all go to the API server: for programs with no cache, such as a command-line
// tool. Objects are addressed by the namespace given (Get, List) or
// carried by the object (writes), or, when that is "", by the client's
// own namespace.
func (c *Client[T]) ReadWriter() ReadWriter[T] { return live[T]{c} }

// live is a Client used as a ReadWriter.
type live[T Object] struct{ c *Client[T] }

// in returns the client scoped to ns, or as it is when ns is "".
func (l live[T]) in(ns string) *Client[T] {
	if ns == "" {
		return l.c
	}
	return l.c.Namespace(ns)
}

func (l live[T]) Get(ctx context.Context, namespace, name string) (T, error) {
	return l.in(namespace).Get(ctx, name, metav1.GetOptions{})
}

func (l live[T]) List(ctx context.Context, namespace string, selector labels.Selector) ([]T, error) {
	opts := metav1.ListOptions{}
	if selector != nil {
		opts.LabelSelector = selector.String()
	}
	list, err := l.in(namespace).ListAll(ctx, opts)
	if err != nil {
		return nil, err
	}
	return list.Items, nil
}

func (l live[T]) Create(ctx context.Context, obj T, opts metav1.CreateOptions) (T, error) {
	return l.in(obj.GetNamespace()).Create(ctx, obj, opts)
}

func (l live[T]) Update(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return l.in(obj.GetNamespace()).Update(ctx, obj, opts)
}

func (l live[T]) UpdateStatus(ctx context.Context, obj T, opts metav1.UpdateOptions) (T, error) {
	return l.in(obj.GetNamespace()).UpdateStatus(ctx, obj, opts)
}

func (l live[T]) Patch(ctx context.Context, obj T, pt types.PatchType, data []byte, opts metav1.PatchOptions, subresources ...string) (T, error) {
	return l.in(obj.GetNamespace()).Patch(ctx, obj.GetName(), pt, data, opts, subresources...)
}

func (l live[T]) Delete(ctx context.Context, obj T, opts metav1.DeleteOptions) error {
	return l.in(obj.GetNamespace()).Delete(ctx, obj.GetName(), opts)
}

func (l live[T]) Apply(ctx context.Context, obj T, opts ApplyOptions) (T, error) {
	return l.in(obj.GetNamespace()).Apply(ctx, obj, opts)
}

func (l live[T]) ApplyStatus(ctx context.Context, obj T, opts ApplyOptions) (T, error) {
	return l.in(obj.GetNamespace()).ApplyStatus(ctx, obj, opts)
}

var (
	_ Applier[*metav1.PartialObjectMetadata] = (*Client[*metav1.PartialObjectMetadata])(nil)
	_ Applier[*metav1.PartialObjectMetadata] = live[*metav1.PartialObjectMetadata]{}
)
