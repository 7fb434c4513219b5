package cache

import (
	"time"

	"k8s.io/apimachinery/pkg/runtime/schema"
)

// latencyBounds are the upper bounds of [InformerStats.ProcessingLatency],
// the buckets client-go's informer_processing_latency_seconds uses.
var latencyBounds = [...]time.Duration{
	time.Millisecond, 5 * time.Millisecond, 10 * time.Millisecond, 25 * time.Millisecond,
	50 * time.Millisecond, 100 * time.Millisecond, 250 * time.Millisecond, 500 * time.Millisecond,
	time.Second, 2500 * time.Millisecond, 5 * time.Second, 10 * time.Second,
}

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
	// ProcessingLatency counts, for each of client-go's bucket bounds
	// (1 ms to 10 s), the keys whose processing took at most that long.
	// The counts are cumulative, as in a Prometheus histogram; those
	// slower than every bound count only in Processed.
	ProcessingLatency map[time.Duration]uint64
	// Resource is the resource the informer lists, when the factory knows
	// it (from the scheme or the options); empty otherwise.
	Resource schema.GroupVersionResource
	// Reflector is what the informer's list and watch did.
	Reflector ReflectorStats
}

// Stats returns the informer's figures now.
func (i *Informer[T]) Stats() InformerStats {
	return InformerStats{
		Objects:           i.store.Len(),
		Queued:            i.fifo.Len(),
		ResourceVersion:   i.refl.LastSyncResourceVersion(),
		Processed:         i.processed.Load(),
		ProcessingTime:    time.Duration(i.processingNanos.Load()),
		ProcessingLatency: i.processingLatency(),
		Reflector:         i.refl.Stats(),
	}
}

// processingLatency returns processingHist as cumulative counts by bound.
func (i *Informer[T]) processingLatency() map[time.Duration]uint64 {
	out := make(map[time.Duration]uint64, len(latencyBounds))
	var sum uint64
	for k, bound := range latencyBounds {
		sum += i.processingHist[k].Load()
		out[bound] = sum
	}
	return out
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
			s := e.stats()
			s.Resource = e.gvr
			out[k.String()] = s
		}
	}
	return out
}
