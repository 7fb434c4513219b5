package main

import (
	"bytes"
	"context"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/client-go/kubernetes"

	"github.com/loom-k8s/loom/bench/internal/benchenv"
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
	cs, err := benchenv.Clientset(env.KubeconfigPath)
	if err != nil {
		t.Fatal(err)
	}
	if err := populate(ctx, cs, n); err != nil {
		t.Fatal(err)
	}
	for _, tc := range []struct {
		impl  string
		owned bool
	}{
		{"loom", false}, {"controller-runtime", false}, {"controller-runtime-nocopy", false},
		{"loom", true}, {"controller-runtime", true}, {"controller-runtime-nocopy", true},
	} {
		impl := tc.impl
		name := impl
		if tc.owned {
			name += "/owned"
		}
		t.Run(name, func(t *testing.T) {
			rctx, stop := context.WithCancel(ctx)
			defer stop()
			rec := newRecorder()
			rec.owned = tc.owned
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
			if tc.owned {
				// Every owned Secret ends up holding its ConfigMap's last stamp.
				waitFor(t, errc, func() bool { return ownedUpToDate(t, cs, n) }, "owned Secrets up to date")
			}
			stop()
			if err := <-errc; err != nil {
				t.Fatal(err)
			}
			t.Logf("%d reconciles, %d of %d writes seen", rec.reconciles.Load(), len(rec.latencies()), writes)
		})
	}
}

// ownedUpToDate reports whether each of the n ConfigMaps owns a Secret
// holding its stamp.
func ownedUpToDate(t *testing.T, cs kubernetes.Interface, n int) bool {
	cms, err := cs.CoreV1().ConfigMaps(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	secs, err := cs.CoreV1().Secrets(namespace).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	byName := map[string]corev1.Secret{}
	for _, s := range secs.Items {
		byName[s.Name] = s
	}
	matched := 0
	for _, cm := range cms.Items {
		s, ok := byName[ownedName(cm.Name)]
		ref := metav1.GetControllerOf(&s)
		if ok && ref != nil && ref.UID == cm.UID && bytes.Equal(s.Data["stamp"], ownedData(cm.Annotations)["stamp"]) {
			matched++
		}
	}
	return matched == n
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
