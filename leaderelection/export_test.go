package leaderelection

import "github.com/loom-k8s/loom/internal/clock"

// SetClock makes the elector built from o use c.
func SetClock(o *Options, c clock.Clock) { o.clock = c }
