package client

import "reflect"

// Builtins exposes the built-in table to the external tests.
func Builtins() map[reflect.Type]Resource { return builtins }

// CheckWrite runs the checks a write makes of the object it is given
// against the parts informers share (see ErrSharedChanged), for the
// benchmark of their cost.
func CheckWrite(op string, res Resource, namespace string, obj Object) error {
	if err := checkShared(op, obj); err != nil {
		return err
	}
	return checkCached(op, res, namespace, obj)
}
