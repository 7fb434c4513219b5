package manager_test

import (
	"context"
	"errors"
	"net/http"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/webhook"
)

// TestStartTwice: every Start of Loom, called a second time while the
// first runs, fails at once with an error wrapping cache.ErrAlreadyStarted,
// and the first keeps running until its context ends. No API server is
// needed: nothing here gets as far as a request that must succeed.
func TestStartTwice(t *testing.T) {
	newManager := func(t *testing.T) *manager.Manager {
		// Nothing listens on port 1: requests fail and are retried.
		m, err := manager.New(manager.Options{Config: &config.Config{Host: "https://127.0.0.1:1"}})
		if err != nil {
			t.Fatal(err)
		}
		return m
	}
	for _, tc := range []struct {
		name  string
		start func(t *testing.T) func(context.Context) error
	}{
		{"manager", func(t *testing.T) func(context.Context) error { return newManager(t).Start }},
		{"factory", func(t *testing.T) func(context.Context) error { return newManager(t).Factory().Start }},
		{"controller", func(t *testing.T) func(context.Context) error {
			return controller.New(newManager(t), func(context.Context, *corev1.Pod) (controller.Result, error) {
				return controller.Result{}, nil
			}, controller.Options{Name: "twice"}).Start
		}},
		{"informer", func(t *testing.T) func(context.Context) error {
			inf, err := cache.InformerFor[corev1.Pod](newManager(t).Factory(), cache.InformerForOptions{})
			if err != nil {
				t.Fatal(err)
			}
			return inf.Start
		}},
		{"webhook server", func(t *testing.T) func(context.Context) error {
			srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir()})
			if err != nil {
				t.Fatal(err)
			}
			return srv.Start
		}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			start := tc.start(t)
			ctx, cancel := context.WithCancel(t.Context())
			defer cancel()
			errc := make(chan error, 2)
			go func() { errc <- start(ctx) }()
			go func() { errc <- start(ctx) }()
			// A generous bound: the second call returns at once.
			select {
			case err := <-errc:
				if !errors.Is(err, cache.ErrAlreadyStarted) {
					t.Fatalf("the call that returned first: %v; want cache.ErrAlreadyStarted", err)
				}
			case <-time.After(time.Minute):
				t.Fatal("neither call returned")
			}
			cancel()
			if err := <-errc; errors.Is(err, cache.ErrAlreadyStarted) {
				t.Fatalf("the first call: %v", err)
			}
		})
	}
}

// TestAddAfterStart: the manager takes no runnable once started.
func TestAddAfterStart(t *testing.T) {
	m, err := manager.New(manager.Options{Config: &config.Config{Host: "https://127.0.0.1:1"}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(t.Context())
	errc := make(chan error, 1)
	go func() { errc <- m.Start(ctx) }()
	// Add succeeds until Start has begun; wait for it to begin.
	deadline := time.Now().Add(time.Minute)
	for {
		err := m.Add(manager.RunnableFunc(func(ctx context.Context) error { <-ctx.Done(); return nil }))
		if errors.Is(err, cache.ErrAlreadyStarted) {
			break
		}
		if err != nil {
			t.Fatalf("Add: %v", err)
		}
		if time.Now().After(deadline) {
			t.Fatal("Add never failed after Start")
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	<-errc
}

// TestStartAfterClose: a webhook server closed before it started does
// not start.
func TestStartAfterClose(t *testing.T) {
	srv, err := webhook.NewServer(webhook.ServerOptions{Addr: "127.0.0.1:0", CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Listen(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Close(); err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(t.Context()); !errors.Is(err, http.ErrServerClosed) {
		t.Fatalf("Start after Close: %v; want http.ErrServerClosed", err)
	}
}
