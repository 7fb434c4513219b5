package rest

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"net/http"
	"net/http/httptest"
	"sync"
	"sync/atomic"
	"testing"
	"testing/iotest"
	"time"

	"github.com/loom-k8s/loom/config"
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

// TestFenceLastByte stalls a fenced write between the client's checks
// and the connection (a base transport that waits until the fence's time
// has passed, then sends the request with a context that has not ended,
// as a paused process would find it): the server must not receive the
// body whole, and the write must fail as fenced.
func TestFenceLastByte(t *testing.T) {
	const payload = `{"data":{"k":"v"}}`
	var whole, partial atomic.Int32
	h := http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
		b, err := io.ReadAll(r.Body)
		switch {
		case err == nil && string(b) == payload:
			whole.Add(1)
		default:
			partial.Add(1)
		}
		w.Header().Set("Content-Type", "application/json")
		w.Write([]byte(`{}`))
	})
	for _, h2 := range []bool{false, true} {
		t.Run(map[bool]string{false: "HTTP/1.1", true: "HTTP/2"}[h2], func(t *testing.T) {
			whole.Store(0)
			srv := httptest.NewUnstartedServer(h)
			if h2 {
				srv.EnableHTTP2 = true
				srv.StartTLS()
			} else {
				srv.Start()
			}
			t.Cleanup(srv.Close)
			real := srv.Client().Transport
			stall := roundTripFunc(func(req *http.Request) (*http.Response, error) {
				if d, ok := req.Context().Value(fenceDeadlineKey{}).(time.Time); ok {
					for time.Now().Before(d) {
						time.Sleep(time.Millisecond)
					}
				}
				if h2 != (req.URL.Scheme == "https") {
					t.Errorf("scheme %s", req.URL.Scheme)
				}
				return real.RoundTrip(req.WithContext(context.WithoutCancel(req.Context())))
			})
			c, err := New(config.Config{Host: srv.URL}, Options{Transport: stall, Retry: RetryPolicy{MaxRetries: -1}})
			if err != nil {
				t.Fatal(err)
			}
			for _, method := range []string{"PATCH", "PUT", "POST"} {
				f := &testFence{open: true, remaining: 50 * time.Millisecond}
				err := c.Verb(method).Resource("configmaps").Name("c").Body([]byte(payload)).Do(WithFence(t.Context(), f), nil)
				if !errors.Is(err, ErrFenced) {
					t.Errorf("%s: err = %v, want ErrFenced", method, err)
				}
			}
			if n := whole.Load(); n != 0 {
				t.Errorf("the server received %d stalled writes whole", n)
			}
			// Unfenced, the same transport delivers the body whole: the
			// test can tell a body that arrived from one that did not.
			if err := c.Verb("PATCH").Resource("configmaps").Name("c").Body([]byte(payload)).Do(t.Context(), nil); err != nil {
				t.Fatal(err)
			}
			if whole.Load() != 1 {
				t.Errorf("an unfenced write did not arrive whole (whole %d, partial %d)", whole.Load(), partial.Load())
			}
		})
	}
}

type roundTripFunc func(*http.Request) (*http.Response, error)

func (f roundTripFunc) RoundTrip(r *http.Request) (*http.Response, error) { return f(r) }

// TestHeldBody reads bodies of every length around the buffer's size
// through a heldBody whose fence is open (it must return them unchanged),
// and through one whose fence's time has passed by the clock although no
// timer has ended its context (it must return all but the last byte).
func TestHeldBody(t *testing.T) {
	open := context.WithValue(t.Context(), fenceDeadlineKey{}, time.Now().Add(time.Hour))
	past := context.WithValue(t.Context(), fenceDeadlineKey{}, time.Now().Add(-time.Second))
	for _, n := range []int{0, 1, 2, 3, 100, 4095, 4096, 4097, 8193, 20000} {
		body := make([]byte, n)
		for i := range body {
			body[i] = byte(i*7 + 1)
		}
		t.Run(fmt.Sprint(n), func(t *testing.T) {
			for _, size := range []int64{-1, 0, int64(n)} { // unknown, unset, the request's ContentLength
				h := &heldBody{rc: io.NopCloser(iotest.OneByteReader(bytes.NewReader(body))), ctx: open, size: size}
				if err := iotest.TestReader(h, body); err != nil {
					t.Errorf("open fence, size %d: %v", size, err)
				}
			}
			h := &heldBody{rc: io.NopCloser(iotest.HalfReader(bytes.NewReader(body))), ctx: past, size: int64(n)}
			got, err := io.ReadAll(h)
			if !errors.Is(err, ErrFenced) {
				t.Errorf("fence's time passed: err = %v, want ErrFenced", err)
			}
			want := body[:max(n-1, 0)]
			if !bytes.Equal(got, want) {
				t.Errorf("fence's time passed: read %d bytes, want the first %d", len(got), len(want))
			}
		})
	}
}
