package controller_test

import (
	"context"
	"log/slog"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/testenv"
)

// records keeps the level and message of every log record.
type records struct {
	mu   sync.Mutex
	list []slog.Record
}

func (r *records) Enabled(context.Context, slog.Level) bool { return true }
func (r *records) Handle(_ context.Context, rec slog.Record) error {
	r.mu.Lock()
	defer r.mu.Unlock()
	r.list = append(r.list, rec)
	return nil
}
func (r *records) WithAttrs([]slog.Attr) slog.Handler { return r }
func (r *records) WithGroup(string) slog.Handler      { return r }

// TestConflictLoggedAsRoutine: a 409 from a reconcile is retried and
// logged at info level, not as an error; other errors are errors.
func TestConflictLoggedAsRoutine(t *testing.T) {
	rc := restForEnv(t, testenv.Options{})
	ctx, cancel := context.WithCancel(t.Context())
	defer cancel()
	var calls atomic.Int32
	done := make(chan struct{})
	rec := func(context.Context, *corev1.ConfigMap) (controller.Result, error) {
		switch calls.Add(1) {
		case 1:
			return controller.Result{}, apierrors.NewConflict(schema.GroupResource{Resource: "configmaps"}, "a", nil)
		case 2:
			return controller.Result{}, apierrors.NewInternalError(context.DeadlineExceeded)
		case 3:
			close(done)
		}
		return controller.Result{}, nil
	}
	logs := &records{}
	m := newTestManager(rc)
	c := controller.New(m, rec, controller.Options{Name: "conflicts", Logger: slog.New(logs),
		For: cache.InformerForOptions{Namespace: "default", LabelSelector: "conflict-test"}})
	go func() { _ = m.f.Start(ctx) }()
	errc := make(chan error, 1)
	go func() { errc <- c.Start(ctx) }()
	live, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	if _, err := live.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a",
		Labels: map[string]string{"conflict-test": "1"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	select {
	case <-done:
	case <-time.After(time.Minute):
		t.Fatal("the key was not retried after a conflict and an error")
	}
	cancel()
	if err := <-errc; err != nil {
		t.Fatal(err)
	}
	logs.mu.Lock()
	defer logs.mu.Unlock()
	var conflictInfo, internalError, otherErrors int
	for _, r := range logs.list {
		switch {
		case r.Level == slog.LevelInfo && r.Message == "reconcile hit a conflict; retrying":
			conflictInfo++
		case r.Level == slog.LevelError && r.Message == "reconcile failed":
			internalError++
		case r.Level >= slog.LevelError:
			otherErrors++
		}
	}
	if conflictInfo != 1 || internalError != 1 || otherErrors != 0 {
		t.Fatalf("conflict info lines %d, error lines %d, other errors %d; want 1, 1, 0", conflictInfo, internalError, otherErrors)
	}
}
