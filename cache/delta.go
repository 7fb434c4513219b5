package cache

import "strconv"

// DeltaType says what happened to an object.
type DeltaType uint8

// The delta types. A consumer applies Added, Updated, Replaced and Sync
// the same way (store the object) and Deleted by removing it; the types
// tell event handlers what kind of change it was.
const (
	// Added means a watch reported the object created, or a writer called Add.
	Added DeltaType = iota + 1
	// Updated means a watch reported the object modified.
	Updated
	// Deleted means the object is gone. Object is its final state as the
	// watch reported it, unless FinalStateUnknown is set: then the
	// deletion was inferred by Replace, because the object was missing
	// from a new full list, and Object is the last state known, possibly
	// stale. Deletes happen while a watch is disconnected and are then
	// never seen as events; such tombstones are how a consumer learns of
	// them, but a consumer that must act on the final state of every
	// object (release a resource, record a result) cannot rely on either
	// and should hold a finalizer on the object instead.
	Deleted
	// Replaced means the object was in a full list (the reflector's initial
	// list or a relist after the watch broke, for example on 410 Gone).
	// It may or may not have changed since the consumer last saw it.
	Replaced
	// Sync means a periodic resync re-delivered the object from the
	// consumer's own store. Nothing came from the server; Sync cannot
	// repair a cache that missed events, it only lets handlers revisit
	// every object.
	Sync
)

var deltaTypeNames = [...]string{"", "Added", "Updated", "Deleted", "Replaced", "Sync"}

// String returns the type's name, such as "Added".
func (t DeltaType) String() string {
	if int(t) < len(deltaTypeNames) && t != 0 {
		return deltaTypeNames[t]
	}
	return "DeltaType(" + strconv.Itoa(int(t)) + ")"
}

// Delta is one change to one object.
type Delta[T any] struct {
	Type   DeltaType
	Object T
	// FinalStateUnknown is set only on Deleted deltas that Replace made
	// up (tombstones): the deletion was not observed, and Object is the
	// last state known, which may be stale. See [Deleted].
	FinalStateUnknown bool
}
