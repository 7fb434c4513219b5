package rest

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

type ctxKey struct{}

// waitWaiters waits until the running call of f has n callers waiting.
func waitWaiters[T any](t *testing.T, f *flight[T], n int) {
	t.Helper()
	deadline := time.Now().Add(30 * time.Second)
	for {
		f.mu.Lock()
		got := 0
		if f.cur != nil {
			got = f.cur.waiters
		}
		f.mu.Unlock()
		if got == n {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%d callers wait, want %d", got, n)
		}
		time.Sleep(time.Millisecond) // polls the condition
	}
}

func TestFlight(t *testing.T) {
	t.Run("callers that wait share one call", func(t *testing.T) {
		var f flight[int]
		var calls atomic.Int32
		release := make(chan struct{})
		fn := func(ctx context.Context) (int, error) {
			calls.Add(1)
			<-release
			return 42, nil
		}
		var wg sync.WaitGroup
		results := make(chan int, 5)
		for range 5 {
			wg.Go(func() { v, _ := f.do(t.Context(), fn); results <- v })
		}
		waitWaiters(t, &f, 5)
		close(release)
		wg.Wait()
		close(results)
		for v := range results {
			if v != 42 {
				t.Errorf("result %d, want 42", v)
			}
		}
		if n := calls.Load(); n != 1 {
			t.Errorf("%d calls for 5 callers, want 1", n)
		}
	})
	t.Run("a caller leaves, the call goes on; the last one cancels it", func(t *testing.T) {
		var f flight[string]
		fnCtx := make(chan context.Context, 1)
		fn := func(ctx context.Context) (string, error) {
			fnCtx <- ctx
			<-ctx.Done()
			return "", ctx.Err()
		}
		ctx1, cancel1 := context.WithCancel(context.WithValue(t.Context(), ctxKey{}, "v"))
		ctx2, cancel2 := context.WithCancel(t.Context())
		err1, err2 := make(chan error, 1), make(chan error, 1)
		go func() { _, err := f.do(ctx1, fn); err1 <- err }()
		run := <-fnCtx
		go func() { _, err := f.do(ctx2, fn); err2 <- err }()
		waitWaiters(t, &f, 2)
		cancel2()
		if err := <-err2; !errors.Is(err, context.Canceled) {
			t.Errorf("second caller: %v", err)
		}
		if run.Err() != nil {
			t.Fatal("the call was cancelled while a caller still waits for it")
		}
		if run.Value(ctxKey{}) != "v" {
			t.Error("the call's context lost the first caller's values")
		}
		cancel1()
		if err := <-err1; !errors.Is(err, context.Canceled) {
			t.Errorf("first caller: %v", err)
		}
		select {
		case <-run.Done():
		case <-time.After(30 * time.Second):
			t.Fatal("the call was not cancelled when its last caller left")
		}
		// The next caller starts a new call rather than joining the
		// cancelled one.
		v, err := f.do(t.Context(), func(context.Context) (string, error) { return "new", nil })
		if err != nil || v != "new" {
			t.Errorf("next call: %q %v", v, err)
		}
	})
}
