package cache

import (
	"errors"
	"fmt"
)

// Sentinel errors. Methods document which of them they can return; test
// with errors.Is, as they usually arrive wrapped.
var (
	// ErrEmptyKey: a key function returned "" or an object had no name.
	ErrEmptyKey = errors.New("empty key")
	// ErrNoKeyFunc: no KeyFunc was given and the element type does not
	// satisfy [Object], so there is no default.
	ErrNoKeyFunc = errors.New("no key function for this type")
	// ErrMalformedKey: SplitKey was given a key that is not "name" or
	// "namespace/name".
	ErrMalformedKey = errors.New("malformed key")
	// ErrNoSuchIndex: a query named an index that the store does not have.
	ErrNoSuchIndex = errors.New("no such index")
	// ErrIndexExists: AddIndexers was given a name already in use.
	ErrIndexExists = errors.New("index already exists")
	// ErrNoLabels: a label selector was given to a store whose element
	// type has no labels (no GetLabels method and no Labels option).
	ErrNoLabels = errors.New("store has no label function")
	// ErrClosed: the queue was closed. Pop returns it once the queue is
	// closed and drained; writes return it once the queue is closed.
	ErrClosed = errors.New("queue closed")
)

// KeyError reports that an object's key could not be computed. Err is
// what the key function returned, or [ErrEmptyKey].
type KeyError struct {
	Err error
}

// Error describes the failure.
func (e *KeyError) Error() string { return "cache: computing key: " + e.Err.Error() }

// Unwrap returns Err.
func (e *KeyError) Unwrap() error { return e.Err }

// IndexError reports that an index function failed for an object. The
// write that caused it changed nothing.
type IndexError struct {
	Index string // the index name
	Key   string // the object's key
	Err   error  // what the index function returned
}

// Error describes the failure.
func (e *IndexError) Error() string {
	return fmt.Sprintf("cache: index %q of %q: %v", e.Index, e.Key, e.Err)
}

// Unwrap returns Err.
func (e *IndexError) Unwrap() error { return e.Err }

// ProcessError reports that the process function given to Pop failed
// for a key. The item was consumed all the same (see [DeltaFIFO.Pop]).
type ProcessError struct {
	Key string
	Err error
}

// Error describes the failure.
func (e *ProcessError) Error() string {
	return fmt.Sprintf("cache: processing %q: %v", e.Key, e.Err)
}

// Unwrap returns Err.
func (e *ProcessError) Unwrap() error { return e.Err }
