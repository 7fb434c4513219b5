package cache_test

import (
	"context"
	"fmt"
	"io"
	"net"
	"os"
	"syscall"
	"testing"
	"testing/synctest"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/rest"
)

// refused is what a request to a stopped server fails with.
var refused = fmt.Errorf("rest: GET /api/v1/configmaps: %w",
	&net.OpError{Op: "dial", Net: "tcp", Err: os.NewSyscallError("connect", syscall.ECONNREFUSED)})

// TestReflectorWaits checks, on synctest's fake clock, how long the
// reflector waits before each call: nothing after a watch that made
// progress, short probes while the server cannot be reached, a growing
// backoff for refusals, Retry-After for 429, and a fresh start after
// progress.
func TestReflectorWaits(t *testing.T) {
	forbidden := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "", fmt.Errorf("rbac says no"))
	busy := apierrors.NewTooManyRequests("slow down", 7)
	progress := func(rv string) step {
		return step{events: []rest.Event[*corev1.ConfigMap]{ev(watch.Added, cm("x"+rv, rv))}, end: io.ErrUnexpectedEOF}
	}
	type span struct{ min, max time.Duration }
	at := func(d time.Duration) span { return span{d, d} }
	within := func(min, max time.Duration) span { return span{min, max} }
	tests := []struct {
		name  string
		steps []step
		waits []span // the wait before each call after the first
	}{{
		name: "a broken watch that made progress is watched again at once, every time",
		steps: []step{
			{list: list("10", "")}, progress("11"), progress("12"), progress("13"),
		},
		waits: []span{at(0), at(0), at(0), at(0)},
	}, {
		name: "a quiet watch that lived a second is a normal end too",
		steps: []step{
			{list: list("10", "")}, {lasts: time.Second, end: io.ErrUnexpectedEOF}, {lasts: 5 * time.Minute},
		},
		waits: []span{at(0), at(time.Second), at(5 * time.Minute)},
	}, {
		name: "while the server is unreachable, probes start at 100ms and stay under a second",
		steps: []step{
			{list: list("10", "")}, progress("11"),
			{err: refused}, {err: refused}, {err: refused}, {err: refused}, {err: refused}, {err: refused}, {err: refused},
			progress("12"), {err: refused},
		},
		waits: []span{
			at(0), at(0),
			within(50*time.Millisecond, 100*time.Millisecond),
			within(100*time.Millisecond, 200*time.Millisecond),
			within(200*time.Millisecond, 400*time.Millisecond),
			within(400*time.Millisecond, 800*time.Millisecond),
			within(500*time.Millisecond, time.Second),
			within(500*time.Millisecond, time.Second),
			within(500*time.Millisecond, time.Second), // then progress: the count starts over
			at(0),
			within(50*time.Millisecond, 100*time.Millisecond),
		},
	}, {
		name: "a server that refuses every request gets a growing backoff, up to 30s",
		steps: []step{
			{err: forbidden}, {err: forbidden}, {err: forbidden}, {err: forbidden}, {err: forbidden}, {err: forbidden}, {err: forbidden}, {err: forbidden},
		},
		waits: []span{
			within(400*time.Millisecond, 800*time.Millisecond),
			within(800*time.Millisecond, 1600*time.Millisecond),
			within(1600*time.Millisecond, 3200*time.Millisecond),
			within(3200*time.Millisecond, 6400*time.Millisecond),
			within(6400*time.Millisecond, 12800*time.Millisecond),
			within(12800*time.Millisecond, 25600*time.Millisecond),
			within(15*time.Second, 30*time.Second),
		},
	}, {
		name: "429 waits at least its Retry-After",
		steps: []step{
			{list: list("10", "")}, {err: busy}, {err: busy},
		},
		waits: []span{at(0), at(7 * time.Second), at(7 * time.Second)},
	}, {
		name: "410 after progress relists at once; 410 again at once backs off",
		steps: []step{
			{list: list("10", "")}, progress("11"), {err: gone},
			{list: list("20", "")}, {err: gone},
			{list: list("30", "")}, {err: gone},
			{list: list("40", "")},
		},
		waits: []span{
			at(0), at(0), at(0), at(0),
			// The watch right after the relist got 410 again, with no
			// progress: the next relist waits, and so on.
			within(800*time.Millisecond, 1600*time.Millisecond), at(0),
			within(1600*time.Millisecond, 3200*time.Millisecond), at(0),
		},
	}, {
		name: "a watch that closes at once with no events backs off",
		steps: []step{
			{list: list("10", "")}, {}, {}, {},
		},
		waits: []span{
			at(0),
			within(400*time.Millisecond, 800*time.Millisecond),
			within(800*time.Millisecond, 1600*time.Millisecond),
		},
	}}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			synctest.Test(t, func(t *testing.T) {
				lw := newScript(tt.steps...)
				r := cache.NewReflector(lw, cache.NewStore(cache.StoreOptions[*corev1.ConfigMap]{}), cache.ReflectorOptions{Streaming: cache.StreamingOff})
				ctx, cancel := context.WithCancel(t.Context())
				done := make(chan error, 1)
				go func() { done <- r.Run(ctx) }()
				<-lw.done
				cancel()
				if err := <-done; err != nil {
					t.Fatal(err)
				}
				lw.mu.Lock()
				times, calls := lw.times, lw.calls
				lw.mu.Unlock()
				for i, w := range tt.waits {
					if i+1 >= len(times) {
						t.Fatalf("only %d calls: %v", len(times), calls)
					}
					// The previous call's own duration (a watch that lasts)
					// is part of the gap: measure from its start.
					got := times[i+1].Sub(times[i])
					if got < w.min || got > w.max {
						t.Errorf("wait before call %d (%s): %s, want %s..%s\ncalls: %v", i+1, calls[i+1], got, w.min, w.max, calls)
					}
				}
			})
		})
	}
}
