package controller

import (
	"context"
	"fmt"

	"github.com/loom-k8s/loom/client"
)

// ApplyOwned is the server-side apply path beside [CreateOrUpdate]: it
// makes owner the controller of desired ([SetControllerReference]) and
// applies desired through c, in one request. There is no read and no
// diff, and no conflict on resourceVersion: each call states the whole
// desired state, and the server stores only what changed (an apply that
// changes nothing keeps the resourceVersion).
//
// Build desired from nothing, with only the fields the controller means to
// own (see client.Client.Apply for the fields sent); the fields others
// set, such as the replicas an autoscaler manages, stay theirs. opts
// names the field manager if the client has no FieldOwner; set Force to
// take fields back from a manager that changed them (the usual choice for
// a controller, which is the authority for its fields).
//
// It returns the object as stored. desired gets the owner reference; it
// is not otherwise changed.
func ApplyOwned[T client.Object](ctx context.Context, c client.Applier[T], owner client.Object, desired T, opts client.ApplyOptions) (T, error) {
	if err := SetControllerReference(owner, desired); err != nil {
		var zero T
		return zero, err
	}
	out, err := c.Apply(ctx, desired, opts)
	if err != nil {
		return out, fmt.Errorf("controller: apply %s: %w", objectName(desired), err)
	}
	return out, nil
}
