package stores

import (
	"fmt"

	"github.com/loom-k8s/loom/cache"
)

// defaultKeyFunc returns kf, or, when kf is nil, a key function that
// files objects satisfying cache.Object by cache.MetaNamespaceKey and
// fails for any other object with cache.ErrNoKeyFunc.
func defaultKeyFunc[T any](kf cache.KeyFunc[T]) cache.KeyFunc[T] {
	if kf != nil {
		return kf
	}
	return func(obj T) (string, error) {
		o, ok := any(obj).(cache.Object)
		if !ok {
			return "", fmt.Errorf("stores: %T has no namespace and name: %w", obj, cache.ErrNoKeyFunc)
		}
		return cache.MetaNamespaceKey(o)
	}
}

// keyOf computes obj's key with kf; an error, or an empty key, comes back
// as a *cache.KeyError.
func keyOf[T any](kf cache.KeyFunc[T], obj T) (string, error) {
	key, err := kf(obj)
	if err == nil && key == "" {
		err = cache.ErrEmptyKey
	}
	if err != nil {
		return "", &cache.KeyError{Err: err}
	}
	return key, nil
}
