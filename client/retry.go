package client

import (
	"context"
	"fmt"
	"math/rand/v2"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Backoff bounds the retries of RetryOnConflict: at most Steps attempts,
// waiting Duration, then Duration*Factor, and so on, each wait stretched by
// a random fraction up to Jitter so that contending writers spread out.
type Backoff struct {
	Steps    int
	Duration time.Duration
	Factor   float64
	Jitter   float64
}

// defaultRetry is the backoff RetryOnConflict uses when given a zero
// Backoff, and the one Mutate uses: 10 attempts, starting 10 ms apart and
// growing by half each time, with up to 50% jitter (about 1.1 s in all at
// most). Conflicts are cleared by re-reading, so short waits suffice; the
// jitter keeps many writers of one object from colliding in lockstep.
var defaultRetry = Backoff{Steps: 10, Duration: 10 * time.Millisecond, Factor: 1.5, Jitter: 0.5}

// RetryOnConflict runs fn until it returns something other than a 409
// Conflict, at most b.Steps times. fn must read the object afresh each time:
// a conflict means the copy it changed was stale. The last error is
// returned.
func RetryOnConflict(ctx context.Context, b Backoff, fn func() error) error {
	if b.Steps <= 0 {
		b = defaultRetry
	}
	wait := b.Duration
	var err error
	for i := 0; i < b.Steps; i++ {
		if err = fn(); !apierrors.IsConflict(err) {
			return err
		}
		if i == b.Steps-1 {
			break
		}
		d := wait
		if b.Jitter > 0 {
			d += time.Duration(rand.Float64() * b.Jitter * float64(wait))
		}
		t := time.NewTimer(d)
		select {
		case <-ctx.Done():
			t.Stop()
			return ctx.Err()
		case <-t.C:
		}
		if b.Factor > 1 {
			wait = time.Duration(float64(wait) * b.Factor)
		}
	}
	return fmt.Errorf("client: still conflicting after %d attempts: %w", b.Steps, err)
}

// Mutate is the RetryOnConflict loop as one call: it gets the named object,
// calls mutate on it, and updates it, starting again from a fresh read
// whenever the update conflicts. mutate may be called more than once and
// must only change the object it is given. It returns the updated object.
func (c *Client[T]) Mutate(ctx context.Context, name string, mutate func(T) error) (T, error) {
	var out T
	err := RetryOnConflict(ctx, defaultRetry, func() error {
		obj, err := c.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			return err
		}
		if err := mutate(obj); err != nil {
			return err
		}
		out, err = c.Update(ctx, obj, metav1.UpdateOptions{})
		return err
	})
	return out, err
}
