package webhook

import "github.com/loom-k8s/loom/internal/clock"

// SetClock makes Certs built from o tell the time by c.
func (o *CertOptions) SetClock(c clock.Clock) { o.clock = c }

// Clock returns the clock SetClock set, or nil.
func (o *CertOptions) Clock() clock.Clock { return o.clock }

// SetClock makes the server's reload checks tell the time by c.
func (o *ServerOptions) SetClock(c clock.Clock) { o.clock = c }
