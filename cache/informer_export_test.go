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
