package main

import (
	"context"
	"testing"
	"time"

	"github.com/loom-k8s/loom/testenv"
)

// TestBothReconcileEveryObject runs the trivial reconciler behind each
// framework on 100 ConfigMaps: each must reconcile every object once, then
// see every version a short churn writes.
func TestBothReconcileEveryObject(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a control plane")
	}
	const n = 100
	// A generous bound: the whole test takes seconds on a quiet machine, and
	// must not fail on a loaded one.
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Minute)
	defer cancel()
	env, err := testenv.Start(ctx, testenv.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer env.Stop()
	cs, err := clientset(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := populate(ctx, cs, n); err != nil {
		t.Fatal(err)
	}
	for _, impl := range []string{"loom", "controller-runtime"} {
		t.Run(impl, func(t *testing.T) {
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			rec := newRecorder()
			errc := make(chan error, 1)
			go func() { errc <- run(rctx, impl, env.KubeconfigPath, namespace, rec, func(framework) {}) }()
			waitFor(t, errc, func() bool { return rec.keys() == n }, "every object reconciled once")
			rec.setRecording(true)
			writes, errs, err := churn(rctx, cs, n, 100, time.Second)
			if err != nil || errs != 0 || writes == 0 {
				t.Fatalf("churn: %d writes, %d errors, %v", writes, errs, err)
			}
			// Writes to one key may coalesce into one reconcile, so wait
			// for most, not all, versions.
			waitFor(t, errc, func() bool { return len(rec.latencies()) >= int(writes)/2 }, "churned versions reconciled")
			stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reconciles, %d of %d writes seen", rec.reconciles.Load(), len(rec.latencies()), writes)
		})
	}
}

func waitFor(t *testing.T, errc chan error, cond func() bool, what string) {
	t.Helper()
	for deadline := time.Now().Add(2 * time.Minute); !cond(); {
		select {
		case err := <-errc:
			t.Fatalf("%s: framework stopped: %v", what, err)
		case <-time.After(20 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting: %s", what)
		}
	}
}
