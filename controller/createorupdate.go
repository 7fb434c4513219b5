package controller

import (
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"reflect"

	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
)

// OperationResult says what [CreateOrUpdate] or [CreateOrPatch] did to the
// object on the server.
type OperationResult string

const (
	// OperationUnchanged: the object existed and mutate changed nothing, so
	// nothing was written.
	OperationUnchanged OperationResult = "unchanged"
	// OperationCreated: the object did not exist and was created.
	OperationCreated OperationResult = "created"
	// OperationUpdated: the object existed and was updated; its status was
	// not changed.
	OperationUpdated OperationResult = "updated"
	// OperationUpdatedStatus: the object existed and both its status and
	// the rest of it were changed ([CreateOrPatch] only).
	OperationUpdatedStatus OperationResult = "updatedStatus"
	// OperationUpdatedStatusOnly: the object existed and only its status
	// was changed ([CreateOrPatch] only).
	OperationUpdatedStatusOnly OperationResult = "updatedStatusOnly"
)

// ErrKeyChanged is returned (wrapped) by [CreateOrUpdate] and
// [CreateOrPatch] when mutate changes the object's name or namespace, which
// name the object being created or updated and so must stay as they are.
var ErrKeyChanged = errors.New("controller: mutate changed the object's name or namespace")

// CreateOrUpdate makes the object named by obj exist in the state mutate
// gives it, with at most one read and one write:
//
//   - It reads the object with obj's namespace and name through c: from
//     the cache, with the manager's cached clients (which read their own
//     writes), so that an unchanged object costs no request at all.
//   - If it does not exist, it calls mutate(obj) and creates obj:
//     [OperationCreated].
//   - If it exists, it copies the stored object into *obj, calls mutate(obj)
//     and, if obj then differs from what was read (semantic equality, as
//     k8s.io/apimachinery/pkg/api/equality defines it), updates it:
//     [OperationUpdated]; otherwise it writes nothing:
//     [OperationUnchanged].
//
// On success *obj holds the object as stored. mutate is called exactly
// once; it should set the fields it cares about on the object it is given
// (which is obj), leave the rest alone, and must not change the name or
// namespace (that fails with an error wrapping [ErrKeyChanged], before any
// write). Errors from mutate are returned wrapped, before any write.
// Change fields in place rather than replacing whole structs or lists:
// the server fills in defaults (a Service port's protocol, a container's
// pull policy), and a mutate that drops them makes every call an update.
//
// The update is conditional on the resourceVersion read, so a concurrent
// writer makes it fail with a 409 Conflict (apierrors.IsConflict works on
// the returned error); wrap the call in [client.RetryOnConflict] to start
// again from a fresh read. The status subresource, where the resource has
// one, is not written: use [CreateOrPatch] for objects whose status mutate
// sets. If another writer creates the object between the read and the
// create, the create fails with 409 AlreadyExists (apierrors.IsAlreadyExists);
// calling again updates it. obj needs a name (generateName is not
// supported); a namespaced one needs its namespace.
//
// It is safe for concurrent use with different obj values.
func CreateOrUpdate[E any, T interface {
	*E
	client.Object
}](ctx context.Context, c client.ReadWriter[T], obj T, mutate func(T) error) (OperationResult, error) {
	what, err := check(c, obj, mutate, "create or update")
	if err != nil {
		return OperationUnchanged, err
	}
	cur, ok, err := read(ctx, c, obj)
	if err != nil {
		return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		if err := mutateKeepingKey(obj, mutate, what); err != nil {
			return OperationUnchanged, err
		}
		out, err := c.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
		}
		*obj = *out
		return OperationCreated, nil
	}
	*obj = *cur
	before := obj.DeepCopyObject()
	if err := mutateKeepingKey(obj, mutate, what); err != nil {
		return OperationUnchanged, err
	}
	if equality.Semantic.DeepEqual(before, runtime.Object(obj)) {
		return OperationUnchanged, nil
	}
	out, err := c.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	*obj = *out
	return OperationUpdated, nil
}

// CreateOrPatch is [CreateOrUpdate] writing JSON merge patches (RFC 7386)
// of what mutate changed, instead of whole objects, and writing the status
// too:
//
//   - If the object does not exist, it calls mutate(obj) and creates obj.
//     If obj's status then has fields that the server did not store on
//     create (because the resource has a status subresource), they are
//     patched through the status subresource. [OperationCreated].
//   - If it exists, it copies the stored object into *obj, calls
//     mutate(obj) and computes the merge patch from the stored object to
//     obj. Changes outside status are patched onto the object; changes to
//     status are patched through the status subresource (or, for a
//     resource without one, with the rest of the object). The result is
//     [OperationUpdated] (status unchanged), [OperationUpdatedStatus] (both
//     changed), [OperationUpdatedStatusOnly] or [OperationUnchanged] (no
//     request made).
//
// A patch carries only the fields mutate changed, so fields other writers
// set meanwhile survive, and it does not conflict on resourceVersion. Two
// limits follow from the merge-patch format: a changed list is sent whole,
// replacing any concurrent change to that same list; and a field can only
// be removed (null in the patch), not set to null.
//
// On success *obj holds the object as stored after the last write (after
// an unchanged call, the object as read). The rules for mutate, the
// namespace and the name are those of [CreateOrUpdate]. Works with typed
// objects and *unstructured.Unstructured alike.
func CreateOrPatch[E any, T interface {
	*E
	client.Object
}](ctx context.Context, c client.ReadWriter[T], obj T, mutate func(T) error) (OperationResult, error) {
	what, err := check(c, obj, mutate, "create or patch")
	if err != nil {
		return OperationUnchanged, err
	}
	cur, ok, err := read(ctx, c, obj)
	if err != nil {
		return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	var before map[string]any
	if ok {
		*obj = *cur
		if before, err = toMap(obj); err != nil {
			return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
		}
	}
	if err := mutateKeepingKey(obj, mutate, what); err != nil {
		return OperationUnchanged, err
	}
	after, err := toMap(obj)
	if err != nil {
		return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	if !ok {
		// Everything mutate (or the caller) put in status is wanted.
		afterStatus, _ := after["status"].(map[string]any)
		statusPatch := mergeDiff(nil, afterStatus)
		out, err := c.Create(ctx, obj, metav1.CreateOptions{})
		if err != nil {
			return OperationUnchanged, fmt.Errorf("%s: %w", what, err)
		}
		if out, err = patchStatusIfNeeded(ctx, c, out, statusPatch); err != nil {
			// The object exists now; report that along with the error.
			return OperationCreated, fmt.Errorf("%s: created, but writing its status: %w", what, err)
		}
		*obj = *out
		return OperationCreated, nil
	}

	out, res, err := writeDiff(ctx, c, obj, before, after)
	if err != nil {
		return res, fmt.Errorf("%s: %w", what, err)
	}
	*obj = *out
	return res, nil
}

// Modify writes the changes mutate makes to obj, an object as read
// through a client or a cache, without changing obj: mutate is given a
// private deep copy, and what it changed is sent as JSON merge patches,
// as [CreateOrPatch] sends them (status through the status subresource
// where the resource has one). It returns the object as stored after the
// last write, or the copy and [OperationUnchanged] when mutate changed
// nothing (no request made). It is the way to change an object a
// reconciler was given, which the cache shares, without copying it by
// hand:
//
//	_, _, err := controller.Modify(ctx, foos, foo, func(f *v1.Foo) error {
//		f.Status.Ready = true
//		return nil
//	})
//
// mutate must not change the name or namespace ([ErrKeyChanged]). The
// patch is not conditional on the resourceVersion, so it does not
// conflict; a changed list is sent whole. A deep copy and two JSON
// encodings of the object are its cost over a hand-made patch.
func Modify[T client.Object](ctx context.Context, c client.Writer[T], obj T, mutate func(T) error) (T, OperationResult, error) {
	var zero T
	if c == nil || isNil(obj) || mutate == nil {
		return zero, OperationUnchanged, errors.New("controller: modify: nil client, object or mutate")
	}
	what := fmt.Sprintf("controller: modify %T %q", obj, objectName(obj))
	before, err := toMap(obj)
	if err != nil {
		return zero, OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	cp := obj.DeepCopyObject().(T)
	if err := mutateKeepingKey(cp, mutate, what); err != nil {
		return zero, OperationUnchanged, err
	}
	after, err := toMap(cp)
	if err != nil {
		return zero, OperationUnchanged, fmt.Errorf("%s: %w", what, err)
	}
	out, res, err := writeDiff(ctx, c, cp, before, after)
	if err != nil {
		return zero, res, fmt.Errorf("%s: %w", what, err)
	}
	return out, res, nil
}

// writeDiff patches obj, an existing object, from before to after (obj's
// map form): the changes outside status onto the object, the changes to
// status through the status subresource (or with the rest, for a resource
// without one). It returns the object as stored after the last write, or
// obj when nothing changed.
func writeDiff[T client.Object](ctx context.Context, c client.Writer[T], obj T, before, after map[string]any) (T, OperationResult, error) {
	patch := mergeDiff(before, after)
	statusPatch, ok := patch["status"].(map[string]any)
	if ok {
		delete(patch, "status")
	} // else status is absent, or not an object: patched with the rest
	switch {
	case len(patch) == 0 && len(statusPatch) == 0:
		return obj, OperationUnchanged, nil
	case len(patch) == 0:
		out, err := patchStatus(ctx, c, obj, statusPatch)
		if apierrors.IsNotFound(err) {
			// No status subresource (or the object is gone, which the
			// patch below reports): status is part of the object.
			out, err = patchMain(ctx, c, obj, map[string]any{"status": statusPatch})
		}
		if err != nil {
			return obj, OperationUnchanged, err
		}
		return out, OperationUpdatedStatusOnly, nil
	}
	// Send the status changes along: a resource without a status
	// subresource takes them here; one with it ignores them, and they are
	// then sent to the subresource.
	if len(statusPatch) > 0 {
		patch["status"] = statusPatch
	}
	out, err := patchMain(ctx, c, obj, patch)
	if err != nil {
		return obj, OperationUnchanged, err
	}
	if len(statusPatch) == 0 {
		return out, OperationUpdated, nil
	}
	if out, err = patchStatusIfNeeded(ctx, c, out, statusPatch); err != nil {
		return obj, OperationUpdated, fmt.Errorf("updated, but writing its status: %w", err)
	}
	return out, OperationUpdatedStatus, nil
}

// check checks the arguments and returns the prefix of error messages.
func check[T client.Object](c client.ReadWriter[T], obj T, mutate func(T) error, verb string) (string, error) {
	if c == nil || isNil(obj) || mutate == nil {
		return "", fmt.Errorf("controller: %s: nil client, object or mutate", verb)
	}
	what := fmt.Sprintf("controller: %s %T %q", verb, obj, objectName(obj))
	if obj.GetName() == "" {
		return "", fmt.Errorf("%s: object has no name", what)
	}
	return what, nil
}

// read returns a deep copy of the stored object with obj's namespace and
// name, and whether there is one. The copy is the caller's to change:
// what a Reader returns may be shared with a cache.
func read[T client.Object](ctx context.Context, c client.Reader[T], obj T) (T, bool, error) {
	cur, err := c.Get(ctx, obj.GetNamespace(), obj.GetName())
	if apierrors.IsNotFound(err) {
		var zero T
		return zero, false, nil
	}
	if err != nil {
		return cur, false, err
	}
	return cur.DeepCopyObject().(T), true, nil
}

// mutateKeepingKey calls mutate(obj) and checks that it kept the name and
// namespace.
func mutateKeepingKey[T client.Object](obj T, mutate func(T) error, what string) error {
	name, ns := obj.GetName(), obj.GetNamespace()
	if err := mutate(obj); err != nil {
		return fmt.Errorf("%s: mutate: %w", what, err)
	}
	if obj.GetName() != name || obj.GetNamespace() != ns {
		return fmt.Errorf("%s: %w (to %q)", what, ErrKeyChanged, objectName(obj))
	}
	return nil
}

// patchMain merge-patches obj.
func patchMain[T client.Object](ctx context.Context, c client.Writer[T], obj T, patch map[string]any) (T, error) {
	data, err := json.Marshal(patch)
	if err != nil {
		var zero T
		return zero, err
	}
	return c.Patch(ctx, obj, types.MergePatchType, data, metav1.PatchOptions{})
}

// patchStatus merge-patches obj's status subresource.
func patchStatus[T client.Object](ctx context.Context, c client.Writer[T], obj T, statusPatch map[string]any) (T, error) {
	data, err := json.Marshal(map[string]any{"status": statusPatch})
	if err != nil {
		var zero T
		return zero, err
	}
	return c.Patch(ctx, obj, types.MergePatchType, data, metav1.PatchOptions{}, "status")
}

// patchStatusIfNeeded sends statusPatch to the status subresource of out
// unless out's status already reflects it, and returns the object as
// stored.
func patchStatusIfNeeded[T client.Object](ctx context.Context, c client.Writer[T], out T, statusPatch map[string]any) (T, error) {
	if len(statusPatch) == 0 {
		return out, nil
	}
	m, err := toMap(out)
	if err != nil {
		return out, err
	}
	if status, _ := m["status"].(map[string]any); reflect.DeepEqual(applyMerge(status, statusPatch), normalize(status)) {
		return out, nil
	}
	return patchStatus(ctx, c, out, statusPatch)
}

// toMap returns obj as decoded JSON, numbers kept as written.
func toMap(obj any) (map[string]any, error) {
	data, err := json.Marshal(obj)
	if err != nil {
		return nil, err
	}
	d := json.NewDecoder(bytes.NewReader(data))
	d.UseNumber()
	var m map[string]any
	if err := d.Decode(&m); err != nil {
		return nil, err
	}
	return m, nil
}

// mergeDiff returns the JSON merge patch (RFC 7386) that turns a into b: a
// map of the keys whose values differ, with null for removed keys and
// nested patches for changed objects. An absent key and a null value are
// the same. The result is empty when a and b are equal.
func mergeDiff(a, b map[string]any) map[string]any {
	p := map[string]any{}
	for k, av := range a {
		if bv, ok := b[k]; (!ok || bv == nil) && av != nil {
			p[k] = nil
		}
	}
	for k, bv := range b {
		av := a[k]
		if bv == nil {
			continue // removal, or null on both sides: handled above
		}
		am, aMap := av.(map[string]any)
		bm, bMap := bv.(map[string]any)
		switch {
		case aMap && bMap:
			if d := mergeDiff(am, bm); len(d) > 0 {
				p[k] = d
			}
		case !reflect.DeepEqual(av, bv):
			p[k] = bv
		}
	}
	return p
}

// applyMerge applies the JSON merge patch p to v (RFC 7386), returning a
// new value without nulls; v is not modified.
func applyMerge(v, p any) any {
	pm, ok := p.(map[string]any)
	if !ok {
		return normalize(p)
	}
	vm, _ := v.(map[string]any)
	out := make(map[string]any, len(vm)+len(pm))
	for k, x := range vm {
		if x != nil {
			out[k] = normalize(x)
		}
	}
	for k, x := range pm {
		if x == nil {
			delete(out, k)
			continue
		}
		out[k] = applyMerge(out[k], x)
	}
	return out
}

// normalize returns v with null object members removed, for comparing
// values in which absent and null mean the same.
func normalize(v any) any {
	switch v := v.(type) {
	case map[string]any:
		out := make(map[string]any, len(v))
		for k, x := range v {
			if x != nil {
				out[k] = normalize(x)
			}
		}
		return out
	case []any:
		out := make([]any, len(v))
		for i, x := range v {
			out[i] = normalize(x)
		}
		return out
	}
	return v
}
