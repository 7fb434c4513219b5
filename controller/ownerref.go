package controller

import (
	"errors"
	"fmt"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

// ErrUnknownKind is returned (wrapped) by [SetControllerReference] and
// [SetOwnerReference] when the owner's group, version and kind cannot be
// told: it has no apiVersion and kind, and is not a built-in type (set a
// custom type's apiVersion and kind, as objects read from the API server
// or a cache have them).
var ErrUnknownKind = errors.New("controller: kind of owner unknown (set its apiVersion and kind)")

// ErrOwnerNotStored is returned (wrapped) by [SetControllerReference] and
// [SetOwnerReference] when the owner has no name or no UID, as an object not
// yet read from or created on the server has. An owner reference names its
// owner by UID, so that a later object of the same name is not mistaken
// for it.
var ErrOwnerNotStored = errors.New("controller: owner has no name or UID; use the object as stored on the server")

// AlreadyOwnedError is returned by [SetControllerReference] when the owned
// object already has a controller other than the owner given. An object has
// at most one controller.
type AlreadyOwnedError struct {
	// Object names the owned object, as namespace/name or name.
	Object string
	// Owner is the existing controller reference.
	Owner metav1.OwnerReference
}

// Error names the owned object and its controller.
func (e *AlreadyOwnedError) Error() string {
	return fmt.Sprintf("controller: %s is already controlled by %s %s %q", e.Object, e.Owner.APIVersion, e.Owner.Kind, e.Owner.Name)
}

// OwnerScopeError is returned by [SetControllerReference] and
// [SetOwnerReference] when the garbage collector would not honour the
// owner reference: a namespaced owner can own only objects in its own
// namespace, so it can neither own an object in another namespace nor a
// cluster-scoped object. (A cluster-scoped owner may own both namespaced
// and cluster-scoped objects.)
//
// Scope is read from the namespaces of the two objects: an empty namespace
// means cluster-scoped. Set the owned object's namespace before calling,
// even if the client would fill it in when creating it.
type OwnerScopeError struct {
	// Owner is the owner's kind, and OwnerNamespace and OwnerName its place.
	Owner          schema.GroupVersionKind
	OwnerNamespace string
	OwnerName      string
	// OwnedNamespace and OwnedName are the owned object's place.
	OwnedNamespace string
	OwnedName      string
}

// Error names the owner and the owned object, and the rule broken.
func (e *OwnerScopeError) Error() string {
	if e.OwnedNamespace == "" {
		return fmt.Sprintf("controller: %s %s/%s cannot own cluster-scoped %q: a namespaced owner owns only objects in its namespace",
			e.Owner.Kind, e.OwnerNamespace, e.OwnerName, e.OwnedName)
	}
	return fmt.Sprintf("controller: %s %s/%s cannot own %s/%s: a namespaced owner owns only objects in its namespace",
		e.Owner.Kind, e.OwnerNamespace, e.OwnerName, e.OwnedNamespace, e.OwnedName)
}

// SetControllerReference makes owner the controller of owned: it adds to
// owned's metadata.ownerReferences a reference to owner with controller and
// blockOwnerDeletion set, or refreshes the reference already there (same
// group, kind and name; the version and UID are taken from owner). The
// garbage collector in kube-controller-manager then deletes owned after
// owner is deleted, and foreground deletion of owner waits for owned.
//
// owner must be the object as stored (it needs its name and UID). Its
// apiVersion and kind come from the object itself (objects read through
// Loom's clients and caches carry them), else from the built-in types;
// set them on an object made by hand.
//
// It fails, leaving owned unchanged, with an *[AlreadyOwnedError] if owned
// already has another controller, an *[OwnerScopeError] if the garbage
// collector would ignore the reference (see there), and errors wrapping
// [ErrUnknownKind] or [ErrOwnerNotStored]. It only changes owned in memory:
// the caller must create or update owned on the server.
func SetControllerReference(owner, owned client.Object) error {
	ref, err := ownerRef(owner, owned)
	if err != nil {
		return err
	}
	ref.Controller = new(true)
	ref.BlockOwnerDeletion = new(true)
	refs := owned.GetOwnerReferences()
	if c := controllerOf(refs); c >= 0 && !sameOwner(refs[c], ref) {
		return &AlreadyOwnedError{Object: objectName(owned), Owner: refs[c]}
	}
	owned.SetOwnerReferences(upsertRef(refs, ref, func(old, ref metav1.OwnerReference) metav1.OwnerReference { return ref }))
	return nil
}

// SetOwnerReference adds to owned's metadata.ownerReferences a reference to
// owner that is not a controller reference, or refreshes the reference
// already there (same group, kind and name: the version and UID are taken
// from owner; whether it is the controller, and whether it blocks the
// owner's deletion, are kept). The garbage collector deletes owned once
// every owner it references is gone.
//
// owner must be the object as stored. It fails, leaving owned unchanged,
// with an *[OwnerScopeError] and errors wrapping [ErrUnknownKind] or
// [ErrOwnerNotStored], as [SetControllerReference] does. It only changes
// owned in memory: the caller must write owned to the server.
func SetOwnerReference(owner, owned client.Object) error {
	ref, err := ownerRef(owner, owned)
	if err != nil {
		return err
	}
	owned.SetOwnerReferences(upsertRef(owned.GetOwnerReferences(), ref, func(old, ref metav1.OwnerReference) metav1.OwnerReference {
		ref.Controller, ref.BlockOwnerDeletion = old.Controller, old.BlockOwnerDeletion
		return ref
	}))
	return nil
}

// GetControllerOf returns a copy of obj's controller reference (the owner
// reference with controller set), or nil if it has none or obj is nil.
func GetControllerOf(obj metav1.Object) *metav1.OwnerReference {
	if isNil(obj) {
		return nil
	}
	refs := obj.GetOwnerReferences()
	if c := controllerOf(refs); c >= 0 {
		ref := refs[c]
		return &ref
	}
	return nil
}

// IsControlledBy reports whether obj's controller reference points at
// owner, by UID: an object of the same name created after the controller
// was deleted is a different owner. It is false when either is nil or
// owner has no UID.
func IsControlledBy(obj, owner metav1.Object) bool {
	if isNil(owner) || owner.GetUID() == "" {
		return false
	}
	ref := GetControllerOf(obj)
	return ref != nil && ref.UID == owner.GetUID()
}

// ownerRef builds the reference to owner and checks that owned may hold it.
func ownerRef(owner, owned client.Object) (metav1.OwnerReference, error) {
	if isNil(owner) || isNil(owned) {
		return metav1.OwnerReference{}, errors.New("controller: owner reference: nil object")
	}
	gvk, ok := client.KindOf(owner, nil)
	if !ok {
		return metav1.OwnerReference{}, fmt.Errorf("%w: %T %q", ErrUnknownKind, owner, owner.GetName())
	}
	if owner.GetName() == "" || owner.GetUID() == "" {
		return metav1.OwnerReference{}, fmt.Errorf("%w (%s %q)", ErrOwnerNotStored, gvk.Kind, owner.GetName())
	}
	if ns := owner.GetNamespace(); ns != "" && ns != owned.GetNamespace() {
		return metav1.OwnerReference{}, &OwnerScopeError{
			Owner: gvk, OwnerNamespace: ns, OwnerName: owner.GetName(),
			OwnedNamespace: owned.GetNamespace(), OwnedName: owned.GetName(),
		}
	}
	apiVersion, kind := gvk.ToAPIVersionAndKind()
	return metav1.OwnerReference{APIVersion: apiVersion, Kind: kind, Name: owner.GetName(), UID: owner.GetUID()}, nil
}

// controllerOf returns the index of the controller reference in refs, or -1.
func controllerOf(refs []metav1.OwnerReference) int {
	for i, r := range refs {
		if r.Controller != nil && *r.Controller {
			return i
		}
	}
	return -1
}

// sameOwner reports whether a and b name the same owner: the same group,
// kind and name. The version may differ (an owner read at another version
// is the same object), and so may the UID (the reference is then
// refreshed to the owner as it is now).
func sameOwner(a, b metav1.OwnerReference) bool {
	ga, errA := schema.ParseGroupVersion(a.APIVersion)
	gb, errB := schema.ParseGroupVersion(b.APIVersion)
	if errA != nil || errB != nil {
		return a.APIVersion == b.APIVersion && a.Kind == b.Kind && a.Name == b.Name
	}
	return ga.Group == gb.Group && a.Kind == b.Kind && a.Name == b.Name
}

// upsertRef returns a new slice: refs with the reference to ref's owner
// replaced by merge(old, ref), or with ref appended. refs is not modified.
func upsertRef(refs []metav1.OwnerReference, ref metav1.OwnerReference, merge func(old, ref metav1.OwnerReference) metav1.OwnerReference) []metav1.OwnerReference {
	out := make([]metav1.OwnerReference, 0, len(refs)+1)
	found := false
	for _, r := range refs {
		if !found && sameOwner(r, ref) {
			r, found = merge(r, ref), true
		}
		out = append(out, r)
	}
	if !found {
		out = append(out, ref)
	}
	return out
}

// objectName is namespace/name, or name for a cluster-scoped object.
func objectName(obj metav1.Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
