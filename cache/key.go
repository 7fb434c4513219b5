package cache

import (
	"fmt"
	"reflect"
	"strings"
)

// KeyFunc returns the key under which a store or queue files obj. Keys
// must be stable for the life of an object, unique among the objects a
// store holds at once, and not empty. A KeyFunc must be safe for
// concurrent use and must not keep obj.
type KeyFunc[T any] func(obj T) (string, error)

// Object is the little that the default key function needs from an API
// object: its namespace (empty for cluster-scoped objects) and its name.
// Every Kubernetes API type satisfies it through its embedded ObjectMeta.
type Object interface {
	GetNamespace() string
	GetName() string
}

// labeled is what the default label function needs from an object.
type labeled interface {
	GetLabels() map[string]string
}

// MetaNamespaceKey returns "namespace/name" for a namespaced object and
// "name" for a cluster-scoped one. It fails with [ErrEmptyKey] when the
// object has no name. It is the default [KeyFunc] of every store and
// queue whose type satisfies [Object]; pass MetaNamespaceKey[T] to say so
// explicitly.
func MetaNamespaceKey[T Object](obj T) (string, error) {
	name := obj.GetName()
	if name == "" {
		return "", fmt.Errorf("cache: object has no name: %w", ErrEmptyKey)
	}
	return objectKey(obj.GetNamespace(), name), nil
}

// objectKey is the key MetaNamespaceKey gives an object of that
// namespace and name.
func objectKey(namespace, name string) string {
	if namespace == "" {
		return name
	}
	return namespace + "/" + name
}

// SplitKey is the inverse of [MetaNamespaceKey]: it splits "ns/name" into
// ("ns", "name") and "name" into ("", "name"). A key with more than one
// slash, or with an empty part, fails with [ErrMalformedKey].
func SplitKey(key string) (namespace, name string, err error) {
	ns, n, found := strings.Cut(key, "/")
	switch {
	case !found && key != "":
		return "", key, nil
	case found && ns != "" && n != "" && !strings.Contains(n, "/"):
		return ns, n, nil
	}
	return "", "", fmt.Errorf("cache: key %q: %w", key, ErrMalformedKey)
}

// namespaceOf returns the part of key before its first slash, or "" when
// there is none. It is what the built-in namespace index files a key
// under; for keys made by MetaNamespaceKey it is the object's namespace.
func namespaceOf(key string) string {
	if i := strings.IndexByte(key, '/'); i >= 0 {
		return key[:i]
	}
	return ""
}

// defaultKeyFunc returns kf, or, when kf is nil, MetaNamespaceKey for
// types that satisfy Object, and otherwise a function that fails every
// call with ErrNoKeyFunc. The check is made once, at construction.
func defaultKeyFunc[T any](kf KeyFunc[T]) KeyFunc[T] {
	if kf != nil {
		return kf
	}
	if reflect.TypeFor[T]().Implements(reflect.TypeFor[Object]()) {
		return func(obj T) (string, error) {
			o, ok := any(obj).(Object)
			if !ok { // a nil interface value
				return "", fmt.Errorf("cache: nil object: %w", ErrEmptyKey)
			}
			return MetaNamespaceKey(o)
		}
	}
	return func(T) (string, error) {
		return "", fmt.Errorf("cache: %s has no namespace and name: %w", reflect.TypeFor[T](), ErrNoKeyFunc)
	}
}

// defaultLabelsFunc returns fn, or, when fn is nil, a function that calls
// GetLabels for types that have it, or nil for types that do not.
func defaultLabelsFunc[T any](fn func(T) map[string]string) func(T) map[string]string {
	if fn != nil {
		return fn
	}
	if reflect.TypeFor[T]().Implements(reflect.TypeFor[labeled]()) {
		return func(obj T) map[string]string {
			if l, ok := any(obj).(labeled); ok {
				return l.GetLabels()
			}
			return nil
		}
	}
	return nil
}

// keyOf computes and checks obj's key.
func keyOf[T any](kf KeyFunc[T], obj T) (string, error) {
	key, err := kf(obj)
	if err != nil {
		return "", &KeyError{Err: err}
	}
	if key == "" {
		return "", &KeyError{Err: ErrEmptyKey}
	}
	return key, nil
}
