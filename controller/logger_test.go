package controller_test

import (
	"bytes"
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/testenv"
)

// lockedBuffer is a log destination that the test reads while a
// controller writes.
type lockedBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *lockedBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *lockedBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

// TestLoggerFrom: a reconciler's lines logged through LoggerFrom carry the
// controller, the object's key and the reconcile ID.
func TestLoggerFrom(t *testing.T) {
	if l := controller.LoggerFrom(context.Background()); l == nil || l.Enabled(context.Background(), slog.LevelError) {
		t.Error("outside a reconcile: want a logger that discards")
	}
	rc := restForEnv(t, testenv.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	out := &lockedBuffer{}
	rec := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		controller.LoggerFrom(ctx).InfoContext(ctx, "hello from the reconciler", "data", len(cm.Data))
		return controller.Result{}, nil
	}
	m := newTestManager(rc)
	c := controller.New(m, rec, controller.Options{Name: "greeter", Logger: slog.New(slog.NewTextHandler(out, nil)),
		For: cache.InformerForOptions{Namespace: "default", LabelSelector: "logger-test"}})
	go func() { _ = m.f.Start(ctx) }()
	go func() { _ = c.Start(ctx) }()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	if _, err := live.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "greeted",
		Labels: map[string]string{"logger-test": "1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	deadline := time.Now().Add(time.Minute)
	for !strings.Contains(out.String(), "hello from the reconciler") {
		if time.Now().After(deadline) {
			t.Fatalf("no line from the reconciler after a minute:\n%s", out.String())
		}
		time.Sleep(50 * time.Millisecond)
	}
	for line := range strings.Lines(out.String()) {
		if !strings.Contains(line, "hello from the reconciler") {
			continue
		}
		for _, want := range []string{"controller=greeter", "key=default/greeted", "reconcileID=", "data=0"} {
			if !strings.Contains(line, want) {
				t.Errorf("the reconciler's line lacks %q: %s", want, line)
			}
		}
	}
}
