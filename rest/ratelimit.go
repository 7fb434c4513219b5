package rest

import (
	"context"
	"sync"
	"time"

	"github.com/loom-k8s/loom/internal/clock"
)

// tokenBucket is the optional client-side rate limiter: qps tokens per
// second, up to burst saved. Waiters reserve a token, so they are served in
// arrival order. It is off unless Config.QPS > 0: the API server's
// Priority and Fairness is the real limiter, and a client-side limit mostly
// adds latency.
type tokenBucket struct {
	mu     sync.Mutex
	clock  clock.Clock
	qps    float64
	burst  float64
	tokens float64
	last   time.Time
}

func newTokenBucket(qps float64, burst int, clk clock.Clock) *tokenBucket {
	if burst <= 0 {
		burst = 1
	}
	return &tokenBucket{clock: clk, qps: qps, burst: float64(burst), tokens: float64(burst), last: clk.Now()}
}

// reserve takes a token and returns how long to wait before using it.
func (b *tokenBucket) reserve() time.Duration {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := b.clock.Now()
	if el := now.Sub(b.last); el > 0 {
		b.tokens = min(b.burst, b.tokens+el.Seconds()*b.qps)
		b.last = now
	}
	b.tokens--
	if b.tokens >= 0 {
		return 0
	}
	return time.Duration(-b.tokens / b.qps * float64(time.Second))
}

func (b *tokenBucket) unreserve() {
	b.mu.Lock()
	b.tokens = min(b.burst, b.tokens+1)
	b.mu.Unlock()
}

// Wait blocks until a token is available or ctx is done.
func (b *tokenBucket) Wait(ctx context.Context) error {
	d := b.reserve()
	if d <= 0 {
		return nil
	}
	t := b.clock.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C():
		return nil
	case <-ctx.Done():
		b.unreserve()
		return ctx.Err()
	}
}
