package cache

import (
	"context"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// Watch is a stream of watch events: *rest.Watcher implements it. Next
// returns io.EOF when the server ends the stream cleanly.
type Watch[T any] interface {
	Next() (rest.Event[T], error)
	Stop()
}

// ListerWatcher lists and watches one resource, in one namespace or all.
// [ListWatch] makes one from a client; tests script their own.
type ListerWatcher[T any] interface {
	List(ctx context.Context, opts metav1.ListOptions) (*client.List[T], error)
	Watch(ctx context.Context, opts metav1.ListOptions) (Watch[T], error)
}

// ListWatchOptions narrow what [ListWatch] lists and watches. The zero
// value means everything the client sees.
type ListWatchOptions struct {
	// Namespace, for a namespaced resource, lists and watches one
	// namespace only; it is ignored for a cluster-scoped resource, so one
	// setting serves both. Default "": the client's namespace, if any.
	Namespace string
	// LabelSelector and FieldSelector filter objects on the server.
	LabelSelector string
	FieldSelector string
	// LabelSelectorFunc, when set, is called at every list and watch, and
	// the selector it returns ("" for none) is added to LabelSelector:
	// for a selection that changes while the informer runs, such as a
	// shard's. After what it returns changes, call the informer's Relist
	// (or Narrow, when it only narrowed), so that the cache follows.
	// Default nil.
	LabelSelectorFunc func() string
}

// ListWatch returns the ListerWatcher of a client (scoped to its
// namespace, if any), with the selectors of opts added to every call.
func ListWatch[T client.Object](c *client.Client[T], opts ListWatchOptions) ListerWatcher[T] {
	return clientLW[T]{c: c, opts: opts}
}

type clientLW[T client.Object] struct {
	c    *client.Client[T]
	opts ListWatchOptions
}

func (lw clientLW[T]) with(o metav1.ListOptions) metav1.ListOptions {
	if lw.opts.LabelSelector != "" {
		o.LabelSelector = lw.opts.LabelSelector
	}
	if lw.opts.LabelSelectorFunc != nil {
		if sel := lw.opts.LabelSelectorFunc(); sel != "" {
			o.LabelSelector = strings.TrimPrefix(lw.opts.LabelSelector+","+sel, ",")
		}
	}
	if lw.opts.FieldSelector != "" {
		o.FieldSelector = lw.opts.FieldSelector
	}
	return o
}

// Resource returns the client's resource.
func (lw clientLW[T]) Resource(ctx context.Context) (client.Resource, error) {
	return lw.c.Resource(ctx)
}

// client returns the client scoped to opts.Namespace when the resource is
// namespaced.
func (lw clientLW[T]) client(ctx context.Context) (*client.Client[T], error) {
	if lw.opts.Namespace == "" {
		return lw.c, nil
	}
	res, err := lw.c.Resource(ctx)
	if err != nil {
		return nil, err
	}
	if !res.Namespaced {
		return lw.c, nil
	}
	return lw.c.Namespace(lw.opts.Namespace), nil
}

func (lw clientLW[T]) List(ctx context.Context, o metav1.ListOptions) (*client.List[T], error) {
	c, err := lw.client(ctx)
	if err != nil {
		return nil, err
	}
	return c.List(ctx, lw.with(o))
}

func (lw clientLW[T]) Watch(ctx context.Context, o metav1.ListOptions) (Watch[T], error) {
	c, err := lw.client(ctx)
	if err != nil {
		return nil, err
	}
	w, err := c.Watch(ctx, lw.with(o))
	if err != nil {
		return nil, err
	}
	return w, nil
}
