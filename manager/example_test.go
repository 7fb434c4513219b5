package manager_test

import (
	"context"
	"log"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

// A whole operator: a manager with leader election, probes and metrics,
// and one controller that warns about empty ConfigMaps. (Compiled, not
// run: it needs a cluster and runs until interrupted.)
func ExampleNew() {
	mgr, err := manager.New(manager.Options{
		LeaderElection: manager.LeaderElection{Enabled: true, Namespace: "kube-system", Name: "configmap-checker"},
		HealthAddr:     ":8081",
		MetricsAddr:    ":8443", // HTTPS, for callers the API server lets get /metrics
	})
	if err != nil {
		log.Fatal(err)
	}
	controller.New(mgr, func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		if len(cm.Data) == 0 {
			mgr.Recorder().Event(cm, corev1.EventTypeWarning, "Empty", "configmap has no data")
		}
		return controller.Result{}, nil
	}, controller.Options{}).Filter(controller.ResourceVersionChanged())
	if err := mgr.Start(manager.SignalContext()); err != nil {
		log.Fatal(err)
	}
}
