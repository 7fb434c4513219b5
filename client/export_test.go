package client

import "reflect"

// Builtins exposes the built-in table to the external tests.
func Builtins() map[reflect.Type]Resource { return builtins }
