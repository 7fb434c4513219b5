package main

import (
	"bufio"
	"context"
	"fmt"
	"log/slog"
	"os"
	"os/signal"
	"runtime"
	"runtime/metrics"
	"runtime/pprof"
	"sync"
	"syscall"
	"time"

	"golang.org/x/sys/unix"
	admissionv1 "k8s.io/api/admission/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/webhook"
)

// The replica's side of the scenario: a manager reconciling Shelves, each
// owning two ConfigMaps whose data is the Shelf's spec.value. It writes a
// line per reconcile start and end, with the system's monotonic clock, and
// on SIGUSR1 a line with its live heap (as the GC it forces found it) and
// what its informers hold.

var shelfRes = client.Resource{
	Resource:   schema.GroupVersionResource{Group: "bench.loom.dev", Version: "v1", Resource: "shelves"},
	Kind:       schema.GroupVersionKind{Group: "bench.loom.dev", Version: "v1", Kind: "Shelf"},
	Namespaced: true,
}

// monotonic is CLOCK_MONOTONIC in nanoseconds: one clock for every process
// on the machine.
func monotonic() int64 {
	var ts unix.Timespec
	_ = unix.ClockGettime(unix.CLOCK_MONOTONIC, &ts)
	return ts.Nano()
}

// replicaMain runs one replica until SIGTERM. id "" runs unsharded.
// profile writes a heap profile beside the log each time it reports.
func replicaMain(kubeconfig, ns, id, logPath string, profile bool) error {
	ctx, stop := signal.NotifyContext(context.Background(), syscall.SIGTERM, os.Interrupt)
	defer stop()
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return err
	}
	f, err := os.Create(logPath)
	if err != nil {
		return err
	}
	defer f.Close()
	w := bufio.NewWriterSize(f, 1<<16)
	var mu sync.Mutex
	logf := func(format string, args ...any) {
		mu.Lock()
		fmt.Fprintf(w, format, args...)
		mu.Unlock()
	}
	go func() { // flush often, so a kill -9 loses little
		for range time.Tick(100 * time.Millisecond) {
			mu.Lock()
			_ = w.Flush()
			mu.Unlock()
		}
	}()
	defer func() { mu.Lock(); _ = w.Flush(); mu.Unlock() }()

	// The manager's own log (the buckets taken and given up) goes beside
	// the reconcile log, for a run kept with -keep.
	sf, err := os.Create(logPath + ".slog")
	if err != nil {
		return err
	}
	defer sf.Close()
	opts := manager.Options{Config: &cfg, Namespace: ns, Logger: slog.New(slog.NewTextHandler(sf, nil))}
	if id != "" {
		opts.Sharding = manager.Sharding{
			Ring: "bench", Namespace: ns, Identity: id,
			Kinds: []schema.GroupKind{shelfRes.Kind.GroupKind(), {Kind: "ConfigMap"}},
		}
	}
	mgr, err := manager.New(opts)
	if err != nil {
		return err
	}
	if id != "" {
		// Every sharded replica serves the assignment webhook; the driver
		// turns the webhook configuration on and off.
		srv, err := mgr.Webhooks(ctx, manager.WebhookOptions{Addr: "127.0.0.1:0", LocalURL: true,
			MutatingConfigs: []string{webhookConfig}, CertDir: logPath + ".certs"})
		if err != nil {
			return err
		}
		if _, err := mgr.ShardWebhook(srv); err != nil {
			return err
		}
		srv.Register(noopPath, webhook.Admission(func(context.Context, *admissionv1.AdmissionRequest) *admissionv1.AdmissionResponse {
			return webhook.Allowed()
		}))
	}
	cms := manager.CachedClient[corev1.ConfigMap](mgr)
	reconcile := func(ctx context.Context, shelf *unstructured.Unstructured) (_ controller.Result, err error) {
		key := shelf.GetNamespace() + "/" + shelf.GetName()
		value, _, _ := unstructured.NestedString(shelf.Object, "spec", "value")
		logf("S %d %s\n", monotonic(), key)
		defer func() {
			outcome := "ok"
			if err != nil {
				outcome = "failed"
			}
			logf("E %d %s %s %s\n", monotonic(), key, value, outcome)
		}()
		for _, suffix := range []string{"-a", "-b"} {
			cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: shelf.GetNamespace(), Name: shelf.GetName() + suffix}}
			_, err := controller.CreateOrUpdate(ctx, cms, cm, func(cm *corev1.ConfigMap) error {
				cm.Data = map[string]string{"value": value}
				return controller.SetControllerReference(shelf, cm)
			})
			if err != nil {
				return controller.Result{}, err
			}
		}
		return controller.Result{}, nil
	}
	ctrl := controller.New[unstructured.Unstructured](mgr, reconcile, controller.Options{Name: "shelf", Workers: 4, For: cache.InformerForOptions{Resource: shelfRes}})
	ctrl.Owns(cms)

	usr1 := make(chan os.Signal, 1)
	signal.Notify(usr1, syscall.SIGUSR1)
	profiles := 0
	go func() {
		for range usr1 {
			// The heap is what the GC found live, read before anything
			// else allocates: writing a profile (its gzip writer alone
			// takes about 1 MB) and counting the caches make garbage
			// that is not the replica's.
			runtime.GC()
			live := []metrics.Sample{{Name: "/gc/heap/live:bytes"}}
			metrics.Read(live)
			if profile {
				profiles++
				if hf, err := os.Create(fmt.Sprintf("%s.%d.heap", logPath, profiles)); err == nil {
					_ = pprof.WriteHeapProfile(hf)
					_ = hf.Close()
				}
			}
			shelves := len(ctrl.Informer().Indexer().List())
			cached, _ := cms.List(ctx, "", nil)
			logf("M %d heap=%d shelves=%d configmaps=%d\n", monotonic(), live[0].Value.Uint64(), shelves, len(cached))
			mu.Lock()
			_ = w.Flush()
			mu.Unlock()
		}
	}()
	logf("U %d started\n", monotonic())
	return mgr.Start(ctx)
}
