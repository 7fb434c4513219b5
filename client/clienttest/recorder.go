// Package clienttest helps unit-test code that writes through a
// client.Writer, such as a reconciler, with no API server: a Recorder
// records each write and answers it with the object it was given. Pair it
// with cache.StoreReader for reads.
package clienttest

import (
	"context"
	"sync"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
)

// Call is one recorded write.
type Call[T client.Object] struct {
	// Verb is "create", "update", "updateStatus", "patch", "apply",
	// "applyStatus" or "delete".
	Verb string
	// Object is a deep copy of the object written.
	Object T
	// PatchType, Patch and Subresources are a patch's.
	PatchType    types.PatchType
	Patch        []byte
	Subresources []string
}

// Recorder is a client.Writer (and a client.Applier) that records writes. The zero value is ready
// to use; it is safe for concurrent use.
type Recorder[T client.Object] struct {
	// Err, when set, is returned by every write (which is recorded all the
	// same), to test how code handles a failed write.
	Err error

	mu    sync.Mutex
	calls []Call[T]
}

var (
	_ client.Writer[*metav1.PartialObjectMetadata]  = (*Recorder[*metav1.PartialObjectMetadata])(nil)
	_ client.Applier[*metav1.PartialObjectMetadata] = (*Recorder[*metav1.PartialObjectMetadata])(nil)
)

func (r *Recorder[T]) record(c Call[T]) (T, error) {
	c.Object = c.Object.DeepCopyObject().(T)
	r.mu.Lock()
	r.calls = append(r.calls, c)
	r.mu.Unlock()
	if r.Err != nil {
		var zero T
		return zero, r.Err
	}
	return c.Object.DeepCopyObject().(T), nil
}

// Calls returns the writes recorded so far, in order.
func (r *Recorder[T]) Calls() []Call[T] {
	r.mu.Lock()
	defer r.mu.Unlock()
	return append([]Call[T](nil), r.calls...)
}

// Create records a create.
func (r *Recorder[T]) Create(_ context.Context, obj T, _ metav1.CreateOptions) (T, error) {
	return r.record(Call[T]{Verb: "create", Object: obj})
}

// Update records an update.
func (r *Recorder[T]) Update(_ context.Context, obj T, _ metav1.UpdateOptions) (T, error) {
	return r.record(Call[T]{Verb: "update", Object: obj})
}

// UpdateStatus records a status update.
func (r *Recorder[T]) UpdateStatus(_ context.Context, obj T, _ metav1.UpdateOptions) (T, error) {
	return r.record(Call[T]{Verb: "updateStatus", Object: obj})
}

// Patch records a patch; it answers with obj unchanged.
func (r *Recorder[T]) Patch(_ context.Context, obj T, pt types.PatchType, data []byte, _ metav1.PatchOptions, subresources ...string) (T, error) {
	return r.record(Call[T]{Verb: "patch", Object: obj, PatchType: pt, Patch: append([]byte(nil), data...), Subresources: subresources})
}

// Apply records a server-side apply; it answers with obj unchanged (it
// merges nothing).
func (r *Recorder[T]) Apply(_ context.Context, obj T, _ client.ApplyOptions) (T, error) {
	return r.record(Call[T]{Verb: "apply", Object: obj})
}

// ApplyStatus records a server-side apply of the status; it answers with
// obj unchanged.
func (r *Recorder[T]) ApplyStatus(_ context.Context, obj T, _ client.ApplyOptions) (T, error) {
	return r.record(Call[T]{Verb: "applyStatus", Object: obj, Subresources: []string{"status"}})
}

// Delete records a delete.
func (r *Recorder[T]) Delete(_ context.Context, obj T, _ metav1.DeleteOptions) error {
	_, err := r.record(Call[T]{Verb: "delete", Object: obj})
	return err
}
