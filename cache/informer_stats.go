package cache

import (
	"time"
)

// InformerStats is what an informer holds and has done, for metrics
// (the manager exports them; see [Factory.Stats]).
type InformerStats struct {
	// Objects is the number of objects in the cache.
	Objects int
	// Queued is the number of keys whose changes wait to be applied to
	// the cache: the depth of the informer's queue.
	Queued int
	// ResourceVersion is the newest resourceVersion of a list, watch
	// event or bookmark applied to the cache ("" before the first list).
	// It is opaque to clients; with etcd it is a number that grows.
	ResourceVersion string
	// Processed counts the keys applied to the cache, and ProcessingTime
	// is the time spent applying them and calling the inline handlers:
	// ProcessingTime / Processed is the mean processing latency.
	Processed      uint64
	ProcessingTime time.Duration
	// Reflector is what the informer's list and watch did.
	Reflector ReflectorStats
}

// Stats returns the informer's figures now.
func (i *Informer[T]) Stats() InformerStats {
	return InformerStats{
		Objects:         i.store.Len(),
		Queued:          i.fifo.Len(),
		ResourceVersion: i.refl.LastSyncResourceVersion(),
		Processed:       i.processed.Load(),
		ProcessingTime:  time.Duration(i.processingNanos.Load()),
		Reflector:       i.refl.Stats(),
	}
}

// Stats returns the figures of each of the factory's informers, by the
// informer's name: its type or resource, then what narrows it (namespace,
// selectors).
func (f *Factory) Stats() map[string]InformerStats {
	f.mu.Lock()
	defer f.mu.Unlock()
	out := make(map[string]InformerStats, len(f.informers))
	for k, e := range f.informers {
		if e.stats != nil {
			out[k.String()] = e.stats()
		}
	}
	return out
}
