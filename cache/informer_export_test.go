package cache

import (
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/clock"
)

// SetInformerClock makes an informer made with opts use c, for resync
// and mutation-check timers.
func SetInformerClock[T client.Object](opts *InformerOptions[T], c clock.Clock) {
	opts.clock = c
}

// CachedClientPending returns how many of c's writes it still remembers.
func CachedClientPending[T client.Object](c *CachedClient[T]) int { return c.pending() }

// CachedClientSawDelete reports whether the cache has seen key deleted
// since every Delete of key now in flight was sent (false with none).
func CachedClientSawDelete[T client.Object](c *CachedClient[T], key string) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	ds := c.deleting[key]
	for _, d := range ds {
		if !d.seen {
			return false
		}
	}
	return len(ds) > 0
}

// InformerReflectorStats returns the counts of i's reflector.
func InformerReflectorStats[T client.Object](i *Informer[T]) ReflectorStats { return i.refl.Stats() }

// PruneDeltaFIFO calls f's prune, which informers use for Narrow.
func PruneDeltaFIFO[T any](f *DeltaFIFO[T], keep func(T) bool) error { return f.prune(keep) }
