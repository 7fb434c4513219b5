package rest

import (
	"context"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"testing"

	"go.uber.org/goleak"
	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/config"
)

// TestNoGoroutineLeaks runs watches that end every way (server end, Stop,
// context cancellation) and requests that fail, then checks that no
// goroutine outlives them once the client's idle connections are closed.
func TestNoGoroutineLeaks(t *testing.T) {
	opt := goleak.IgnoreCurrent()
	func() {
		unblock := make(chan struct{})
		srv := httptest.NewServer(http.HandlerFunc(func(w http.ResponseWriter, r *http.Request) {
			if r.URL.Query().Get("watch") != "true" {
				http.NotFound(w, r)
				return
			}
			w.Header().Set("Content-Type", protoWatchType)
			w.Write(protoStream(t, sampleEvents()[:2]...))
			w.(http.Flusher).Flush()
			if r.URL.Query().Get("end") == "" {
				select {
				case <-r.Context().Done():
				case <-unblock:
				}
			}
		}))
		defer srv.Close()
		defer close(unblock)
		c, err := New(config.Config{Host: srv.URL}, Options{ContentType: Protobuf})
		if err != nil {
			t.Fatal(err)
		}
		defer c.CloseIdleConnections()
		drain := func(w *Watcher[*corev1.Pod]) error {
			for {
				if _, err := w.Next(); err != nil {
					return err
				}
			}
		}
		w, err := Watch[corev1.Pod](t.Context(), c.Get().Resource("pods").Param("end", "1"))
		if err != nil {
			t.Fatal(err)
		}
		if err := drain(w); err != io.EOF {
			t.Fatal(err)
		}
		w, err = Watch[corev1.Pod](t.Context(), c.Get().Resource("pods"))
		if err != nil {
			t.Fatal(err)
		}
		w.Next()
		w.Stop()
		ctx, cancel := context.WithCancel(t.Context())
		w, err = Watch[corev1.Pod](ctx, c.Get().Resource("pods"))
		if err != nil {
			t.Fatal(err)
		}
		w.Next()
		cancel()
		if err := drain(w); !errors.Is(err, context.Canceled) {
			t.Fatal(err)
		}
		if err := c.Get().Resource("nodes").Do(t.Context(), nil); err == nil {
			t.Fatal("want 404")
		}
	}()
	goleak.VerifyNone(t, opt)
}
