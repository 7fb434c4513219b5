package manager_test

import (
	"context"
	"log"
	"os"
	"os/signal"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

// A whole operator: a manager with leader election, probes and metrics,
// one informer from the shared factory, and one controller reading through
// its lister. (Compiled, not run: it needs a cluster and runs until
// interrupted.)
func ExampleNew() {
	ctx, stop := signal.NotifyContext(context.Background(), os.Interrupt)
	defer stop()
	var flags config.Flags // registered on the program's flag set
	cfg, err := flags.Load()
	if err != nil {
		log.Fatal(err)
	}
	mgr, err := manager.New(cfg, manager.Options{
		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "kube-system", Name: "configmap-checker"},
		HealthAddr:     ":8081",
		MetricsAddr:    ":8080",
	})
	if err != nil {
		log.Fatal(err)
	}
	cms, err := cache.InformerFor[corev1.ConfigMap](ctx, mgr.Factory(), cache.InformerForOptions[*corev1.ConfigMap]{})
	if err != nil {
		log.Fatal(err)
	}
	lister := cms.Lister()
	ctrl := controller.New("configmap-checker", controller.ReconcilerFunc(func(ctx context.Context, req controller.Request) (controller.Result, error) {
		cm, ok := lister.Namespace(req.Namespace).Get(req.Name)
		if !ok {
			return controller.Result{}, nil // deleted
		}
		if len(cm.Data) == 0 {
			mgr.Recorder().Event(cm, corev1.EventTypeWarning, "Empty", "configmap has no data")
		}
		return controller.Result{}, nil
	}), mgr.ControllerOptions())
	if err := controller.For(ctrl, cms, controller.ResourceVersionChanged[*corev1.ConfigMap]()); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Add(ctrl); err != nil {
		log.Fatal(err)
	}
	if err := mgr.Start(ctx); err != nil {
		log.Fatal(err)
	}
}
