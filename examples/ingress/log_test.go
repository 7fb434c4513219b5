package main

import (
	"context"
	"log/slog"
	"sync"
	"testing"
)

// testLogger sends the operator's log, debug lines included, to the test's
// log (shown on failure or with -v), and counts the reconciles the
// controller reports as finished, by key: the witness that the operator
// has looked at a Service, where the test checks that it did nothing.
func testLogger(t *testing.T) (*slog.Logger, *reconciles) {
	rs := &reconciles{n: map[string]int{}}
	text := slog.NewTextHandler(testWriter{t}, &slog.HandlerOptions{Level: slog.LevelDebug})
	return slog.New(witness{Handler: text, rs: rs}), rs
}

// reconciles counts finished reconciles by key ("namespace/name").
type reconciles struct {
	mu sync.Mutex
	n  map[string]int
}

// Count returns how many reconciles of key have finished.
func (rs *reconciles) Count(key string) int {
	rs.mu.Lock()
	defer rs.mu.Unlock()
	return rs.n[key]
}

// witness is a slog.Handler that counts the controller's per-reconcile
// lines ("reconciled" at debug level, "reconcile failed" at error level,
// each with the attribute key, added with Logger.With) and passes every
// record on.
type witness struct {
	slog.Handler
	rs  *reconciles
	key string // the "key" attribute added with With, if any
}

func (w witness) WithAttrs(attrs []slog.Attr) slog.Handler {
	k := w.key
	for _, a := range attrs {
		if a.Key == "key" {
			k = a.Value.String()
		}
	}
	return witness{Handler: w.Handler.WithAttrs(attrs), rs: w.rs, key: k}
}

func (w witness) WithGroup(name string) slog.Handler {
	return witness{Handler: w.Handler.WithGroup(name), rs: w.rs, key: w.key}
}

func (w witness) Handle(ctx context.Context, r slog.Record) error {
	if r.Message == "reconciled" || r.Message == "reconcile failed" {
		key := w.key
		r.Attrs(func(a slog.Attr) bool {
			if a.Key == "key" {
				key = a.Value.String()
			}
			return true
		})
		if key != "" {
			w.rs.mu.Lock()
			w.rs.n[key]++
			w.rs.mu.Unlock()
		}
	}
	return w.Handler.Handle(ctx, r)
}

type testWriter struct{ t *testing.T }

func (w testWriter) Write(p []byte) (int, error) {
	w.t.Log(string(p))
	return len(p), nil
}
