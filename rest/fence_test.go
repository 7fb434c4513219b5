package rest

import (
	"context"
	"errors"
	"net/http"
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// testFence allows writes while open, each for remaining.
type testFence struct {
	mu        sync.Mutex
	open      bool
	remaining time.Duration
	inFlight  int
	entered   int
}

var errLost = errors.New("right lost")

func (f *testFence) Enter() (time.Duration, func(), error) {
	f.mu.Lock()
	defer f.mu.Unlock()
	if !f.open {
		return 0, nil, errLost
	}
	f.inFlight++
	f.entered++
	var once sync.Once
	return f.remaining, func() {
		once.Do(func() {
			f.mu.Lock()
			f.inFlight--
			f.mu.Unlock()
		})
	}, nil
}

func TestFence(t *testing.T) {
	var writes atomic.Int32
	release := make(chan struct{})
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		if r.Method != http.MethodGet {
			writes.Add(1)
		}
		if r.URL.Query().Get("slow") != "" {
			select {
			case <-release:
			case <-r.Context().Done():
			}
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	})
	c, _ := newTestClient(t, h, Options{Retry: RetryPolicy{MaxRetries: -1}})
	defer close(release)
	tests := []struct {
		name       string
		open       bool
		remaining  time.Duration
		method     string
		detach     bool // send with context.WithoutCancel of the fenced context
		slow       bool
		wantSent   bool
		wantFenced bool
		wantCause  error
	}{
		{name: "write while the right is held", open: true, remaining: time.Minute, method: "PUT", wantSent: true},
		{name: "write after the right is lost", open: false, method: "PATCH", wantFenced: true, wantCause: errLost},
		{name: "a detached context is still fenced", open: false, method: "POST", detach: true, wantFenced: true, wantCause: errLost},
		{name: "reads are not fenced", open: false, method: "GET", wantSent: true},
		{name: "no time left", open: true, remaining: 0, method: "DELETE", wantFenced: true},
		{name: "a write that runs past the fence's time is cancelled", open: true, remaining: 100 * time.Millisecond, method: "PUT", slow: true, wantSent: true, wantFenced: true},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			f := &testFence{open: tt.open, remaining: tt.remaining}
			ctx := WithFence(t.Context(), f)
			if tt.detach {
				ctx = context.WithoutCancel(ctx)
			}
			before := writes.Load()
			req := c.Verb(tt.method).Resource("pods").Name("p")
			if tt.slow {
				req.Param("slow", "1")
			}
			err := req.Do(ctx, nil)
			sent := writes.Load() > before || tt.method == "GET" && err == nil
			if sent != tt.wantSent {
				t.Errorf("sent = %v, want %v (err %v)", sent, tt.wantSent, err)
			}
			if got := errors.Is(err, ErrFenced); got != tt.wantFenced {
				t.Errorf("err = %v; fenced %v, want %v", err, got, tt.wantFenced)
			}
			if tt.wantCause != nil && !errors.Is(err, tt.wantCause) {
				t.Errorf("err = %v, want it to wrap %v", err, tt.wantCause)
			}
			f.mu.Lock()
			defer f.mu.Unlock()
			if f.inFlight != 0 {
				t.Errorf("%d writes still counted in flight after Do returned", f.inFlight)
			}
		})
	}
}
