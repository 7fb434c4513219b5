// Package protodec decodes Kubernetes protobuf messages into the Go types
// of k8s.io/api and k8s.io/apimachinery by reflection over their protobuf
// struct tags, as an allocation-lean alternative to the generated Unmarshal
// methods.
//
// # Why
//
// The generated code allocates every string separately, grows repeated
// fields and maps one element at a time, and so spends most of a watch
// decode in the allocator. This decoder copies an object's bytes into one
// string once and makes every string field a substring of it, counts the
// elements of repeated fields and maps before allocating them, and writes
// fields through precomputed offsets.
//
// # Trade-offs
//
// Strings of one object share one backing array: a single retained string
// keeps the whole encoded object (a few KiB) alive. For objects held in an
// informer cache that is no cost, since the whole object is retained
// anyway. Byte-slice fields are copied and never alias the input.
//
// Types whose protobuf form differs from their Go struct (metav1.Time,
// resource.Quantity and the like: structs with no protobuf-tagged fields)
// are decoded by their own Unmarshal method. A type that cannot be planned
// (an unsupported field kind) is reported by [Supported] and left to the
// generated code. Differential tests and a fuzz target compare the result
// with the generated Unmarshal.
//
// The package is internal; package rest uses it for watch and response
// decoding.
package protodec
