package client

import (
	"errors"
	"fmt"
	"reflect"

	"github.com/loom-k8s/loom/internal/intern"
)

// ErrSharedChanged is returned (wrapped in a *SharedChangedError) by a
// write whose object holds a part that Loom's informers share between
// cached objects (a container list, a label map, a managed-fields blob),
// when that part was changed in place since it was decoded. Such a change
// shows in every cached object holding the part, and sending it would
// write it into an object that nobody meant to change. The fix is in the
// code that changed a cached object: DeepCopy objects read from a cache
// (a lister, an informer's handler, a cached client) before changing
// them.
var ErrSharedChanged = errors.New("a part shared by cached objects was changed in place (DeepCopy objects read from a cache before changing them)")

// SharedChangedError names the object a write was refused for and where
// the changed shared part is.
type SharedChangedError struct {
	Op   string // "create", "update", "apply", ...
	Key  string // the written object's namespace/name
	Path string // the part within the object checked (".Spec.Containers")
	// InCache is set when the part is in the cached object of the same
	// key (an informer of this process caches it), not in the object
	// given to the write: the object written is a copy made after the
	// change, or holds it.
	InCache bool
}

func (e *SharedChangedError) Error() string {
	where := "the object written"
	if e.InCache {
		where = "the cached object of the same name"
	}
	return fmt.Sprintf("client: %s %s: %s in %s: %v", e.Op, e.Key, e.Path, where, ErrSharedChanged)
}

func (e *SharedChangedError) Unwrap() error { return ErrSharedChanged }

// checkShared returns a *SharedChangedError if obj holds a part shared by
// cached objects that was changed in place. Objects of the process's own
// making hold no such parts, and cost one look through their references;
// in a process where no informer shares parts, it costs one atomic load.
func checkShared(op string, obj Object) error {
	tab := intern.Process()
	if tab.Len() == 0 {
		return nil // nothing is shared in this process
	}
	path, changed := tab.Changed(reflect.ValueOf(obj))
	if !changed {
		return nil
	}
	return &SharedChangedError{Op: op, Key: objectKey(obj), Path: path}
}

// checkCached returns a *SharedChangedError (InCache set) if an informer
// of this process caches res's object namespace/name, that object holds a
// part shared by cached objects that was changed in place, and obj holds
// the same value there: a copy made after the change carries it in parts
// of its own. With no informer sharing parts, it costs one atomic load.
func checkCached(op string, res Resource, namespace string, obj Object) error {
	name := obj.GetName()
	tab := intern.Process()
	if name == "" || !tab.HasCaches() {
		return nil // generateName (nothing of that name is cached), or no informer
	}
	path, changed := tab.CachedChanged(res.Resource.GroupResource().String(), namespace, name, reflect.ValueOf(obj))
	if !changed {
		return nil
	}
	key := name
	if namespace != "" {
		key = namespace + "/" + name
	}
	return &SharedChangedError{Op: op, Key: key, Path: path, InCache: true}
}

func objectKey(obj Object) string {
	if ns := obj.GetNamespace(); ns != "" {
		return ns + "/" + obj.GetName()
	}
	return obj.GetName()
}
