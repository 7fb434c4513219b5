package manager_test

import (
	"context"
	"log"

	batchv1 "k8s.io/api/batch/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

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

// An index over the cache, as a controller of CronJobs reads the Jobs it
// owns: the index files each Job under its controller owner's name; the
// reconciler reads the Jobs of one CronJob, typed and in its namespace,
// with ByIndex (client.IndexedReader, which a unit test can serve with
// cache.StoreReader). Add indexes before the manager starts. (Compiled,
// not run: it needs a cluster.)
func ExampleCachedClient_index() {
	mgr, err := manager.New(manager.Options{})
	if err != nil {
		log.Fatal(err)
	}
	jobs := manager.CachedClient[batchv1.Job](mgr)
	if err := jobs.AddIndexer("owner", func(j *batchv1.Job) ([]string, error) {
		ref := metav1.GetControllerOf(j)
		if ref == nil || ref.Kind != "CronJob" {
			return nil, nil
		}
		return []string{ref.Name}, nil
	}); err != nil {
		log.Fatal(err)
	}
	controller.New(mgr, func(ctx context.Context, cj *batchv1.CronJob) (controller.Result, error) {
		owned, err := jobs.ByIndex(ctx, cj.Namespace, "owner", cj.Name)
		if err != nil {
			return controller.Result{}, err
		}
		log.Printf("%s/%s owns %d Jobs", cj.Namespace, cj.Name, len(owned))
		return controller.Result{}, nil
	}, controller.Options{}).Owns(jobs)
	if err := mgr.Start(manager.SignalContext()); err != nil {
		log.Fatal(err)
	}
}
