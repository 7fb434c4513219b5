package cache

import (
	"context"
	"fmt"
	"reflect"
	"slices"
	"strings"

	"github.com/loom-k8s/loom/client"
)

// MutationError reports objects in an informer's cache that were changed
// after they were stored: someone (a handler, a reconciler reading a
// lister) changed a shared object instead of a copy.
type MutationError struct {
	Informer string   // the informer's name
	Keys     []string // the keys of the changed objects, sorted
}

func (e *MutationError) Error() string {
	return fmt.Sprintf("cache: informer %s: %d cached object(s) changed in place, which corrupts the cache for every reader (DeepCopy before changing): %s",
		e.Informer, len(e.Keys), strings.Join(e.Keys, ", "))
}

// mutationDetector keeps a deep copy of every cached object. Its
// methods are no-ops on a nil detector. The informer's mu guards it.
type mutationDetector[T client.Object] struct {
	copies map[string]T
}

func (m *mutationDetector[T]) keep(key string, obj T) {
	if m != nil {
		m.copies[key] = obj.DeepCopyObject().(T)
	}
}

func (m *mutationDetector[T]) forget(key string) {
	if m != nil {
		delete(m.copies, key)
	}
}

// CheckMutations compares every cached object with the deep copy the
// mutation detector took when the object was stored, and returns a
// [*MutationError] naming those that differ, or nil. It returns nil when
// the detector is off (see [InformerOptions].DetectMutations). A changed
// object stays reported until a newer version of it replaces it. The
// cache does not change while it runs.
func (i *Informer[T]) CheckMutations() error {
	if i.mutations == nil {
		return nil
	}
	i.mu.Lock()
	defer i.mu.Unlock()
	var keys []string
	for key, cp := range i.mutations.copies {
		if obj, ok := i.store.Get(key); ok && !reflect.DeepEqual(obj, cp) {
			keys = append(keys, key)
		}
	}
	if len(keys) == 0 {
		return nil
	}
	slices.Sort(keys)
	return &MutationError{Informer: i.name, Keys: keys}
}

// checkMutationsEvery runs CheckMutations every MutationCheckPeriod until
// ctx ends.
func (i *Informer[T]) checkMutationsEvery(ctx context.Context) {
	t := i.clock.NewTimer(i.mutationPeriod)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C():
		}
		if err := i.CheckMutations(); err != nil {
			i.reportMutation(err)
		}
		t.Reset(i.mutationPeriod)
	}
}

func (i *Informer[T]) reportMutation(err error) {
	if i.onMutation != nil {
		i.onMutation(err)
		return
	}
	i.log.Error("objects in the cache were changed in place", "err", err)
}
