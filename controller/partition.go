package controller

import (
	"context"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// queueTaken queues, each time the controller's partition takes objects,
// those of them in the cache: a reconcile of them was refused until then
// (see Partition.Begin), and the replica that held them before may not
// have seen their last change.
func (c *Controller[T]) queueTaken(ctx context.Context, taken <-chan func(metav1.Object) bool) {
	for {
		var took func(metav1.Object) bool
		select {
		case <-ctx.Done():
			return
		case took = <-taken:
		}
		for _, obj := range c.primary.Indexer().List() {
			if took(obj) {
				c.queue.Add(Request{Namespace: obj.GetNamespace(), Name: obj.GetName()})
			}
		}
	}
}
