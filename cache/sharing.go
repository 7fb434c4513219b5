package cache

import (
	"sync"

	"github.com/loom-k8s/loom/internal/intern"
)

// Sharing says which parts of the objects an informer decodes it shares
// with other cached objects holding identical parts. Objects of one shape
// (the Pods of one workload, say) then hold one copy of their containers,
// volumes, labels and managed fields between them, and the cache needs a
// fraction of the memory. Shared parts live as long as the last object
// that uses them. The first object to hold a part keeps a copy of its own:
// a part goes to the sharing table when it is met a second time, so that
// parts found in one object only cost the table nothing. A part that one
// object repeats, such as a template's labels that are the object's own,
// is one value within that object. When a list or a streaming list (a
// relist), or a watch event that updates an object, brings back an
// object that the cache holds at another resourceVersion, the new version
// takes from the cached one the parts whose encoding did not change, so
// that an update of one field, or a relist in which every object changed
// in one field, costs little more than the changed parts: managed-fields
// blobs with ShareAll or ShareBlobs, and, with ShareAll on JSON (typed or
// unstructured), every part that ShareAll shares. On protobuf only the
// blobs are taken so.
//
// Sharing applies to the objects that Loom's own decoders read through
// Loom's rest client: typed objects from the protobuf wire or from JSON,
// and unstructured objects (from JSON), whose nested objects and arrays
// below the top level are shared. Custom ListerWatchers decode as before.
// On JSON, parts are shared when their JSON text is byte for byte the
// same, which the API server's serializer makes so for equal values.
type Sharing uint8

const (
	// ShareAuto, the default, is ShareAll for an informer without a
	// Transform and ShareBlobs for one with a Transform, since a
	// Transform may change the object it is given in place.
	ShareAuto Sharing = iota
	// ShareAll shares byte blobs (managed fields), repeated messages
	// (containers, volumes, tolerations, owner references), pointers to
	// messages (security contexts, probes), string maps (labels,
	// annotations, ConfigMap data) and resource lists. Messages that
	// hold a time (conditions, container statuses, managed-fields
	// entries) record one object's history and are never shared. In
	// unstructured objects it shares every object and array below the
	// top level (a spec, labels, a list inside a spec). Fields (or, in
	// unstructured objects, keys) whose values turn out mostly unique
	// among an informer's objects (after 4,096 lookups, fewer than one
	// in 16 found) stop being looked up by that informer. Short strings
	// (up to 128 bytes: namespaces, label keys and values, images,
	// condition types, the keys of unstructured objects) are held once
	// for the whole process, while any object holds them; a field whose
	// strings turn out mostly unique (after 256 lookups, fewer than one
	// in 4 found) goes back to copying them into each object.
	ShareAll
	// ShareBlobs shares only byte fields of 16 bytes or more, which in
	// practice are managed-fields blobs: safe under any Transform that
	// does not write into byte slices. Unstructured objects hold no byte
	// fields, so for them it is ShareOff.
	ShareBlobs
	// ShareOff decodes every object into memory of its own.
	ShareOff
)

// shared is the one table of the process: informers of all types share
// it (keys carry the Go type), and writes through a client.Client check
// objects against it.
var shared = intern.Process()

// sharedStrings holds one copy of the short strings that informers'
// objects hold, for the whole process (made when first needed: 128 KB).
var sharedStrings = sync.OnceValue(func() *intern.Strings { return new(intern.Strings) })

// decodeOptions are the decoder options of an informer.
func decodeOptions(s Sharing, transform, dropManagedFields bool) intern.Options {
	// Each informer learns how much of its objects' encoding is strings,
	// so that an object's first string block is no larger than it is
	// likely to fill.
	o := intern.Options{SkipManagedFields: dropManagedFields, Sizer: &intern.Sizer{}}
	if s == ShareAuto {
		s = ShareAll
		if transform {
			s = ShareBlobs
		}
	}
	switch s {
	case ShareAll:
		o.Share, o.Structs, o.Stats, o.Strings = shared, true, &intern.Stats{}, sharedStrings()
	case ShareBlobs:
		o.Share = shared
	}
	return o
}
