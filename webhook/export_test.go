package webhook

import (
	"context"
	"net/http"

	"github.com/loom-k8s/loom/internal/clock"
)

// SetClock makes Certs built from o tell the time by c.
func (o *CertOptions) SetClock(c clock.Clock) { o.clock = c }

// Clock returns the clock SetClock set, or nil.
func (o *CertOptions) Clock() clock.Clock { return o.clock }

// SetClock makes the server's reload checks tell the time by c.
func (o *ServerOptions) SetClock(c clock.Clock) { o.clock = c }

// CountPanics returns a context in which the package's handlers record
// the panics they recover, as under a Server with Metrics, and a function
// that returns the counts.
func CountPanics(ctx context.Context) (context.Context, func() (admission, conversion int)) {
	p := &panics{}
	return context.WithValue(ctx, panicsKey{}, p), func() (int, int) {
		return int(p.admission.Load()), int(p.conversion.Load())
	}
}

// Handler returns what the server serves at path (registered with
// Register), for tests that call it without TLS.
func (s *Server) Handler() http.Handler { return s.mux }
