package client

import (
	apierrors "k8s.io/apimachinery/pkg/api/errors"
)

// Optional is for reads where an absent object is an answer, not a
// failure. Every Get in Loom (a [Client]'s, a [Reader]'s, a cache's)
// reports an absent object with an error for which apierrors.IsNotFound
// is true; Optional turns that error into ok=false and passes every
// other result on:
//
//	secret, ok, err := client.Optional(secrets.Get(ctx, name, metav1.GetOptions{}))
//	cm, ok, err := client.Optional(reader.Get(ctx, ns, name))
func Optional[T any](obj T, err error) (_ T, ok bool, _ error) {
	if err != nil {
		var zero T
		if apierrors.IsNotFound(err) {
			return zero, false, nil
		}
		return zero, false, err
	}
	return obj, true, nil
}

// IgnoreNotFound returns nil when err says the object is absent
// (apierrors.IsNotFound), and err otherwise: for deletes and reads whose
// caller is done either way.
func IgnoreNotFound(err error) error {
	if apierrors.IsNotFound(err) {
		return nil
	}
	return err
}
