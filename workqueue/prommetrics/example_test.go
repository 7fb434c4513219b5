package prommetrics_test

import (
	"fmt"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/prommetrics"
)

func ExampleNew() {
	reg := prometheus.NewRegistry()
	p, err := prommetrics.New(prommetrics.Options{Registerer: reg})
	if err != nil {
		fmt.Println(err)
		return
	}
	q := workqueue.New(workqueue.Options[string]{Name: "pods", Metrics: p})
	defer q.ShutDown()
	q.Add("default/web-0")

	mfs, _ := reg.Gather()
	for _, mf := range mfs {
		if mf.GetName() == "workqueue_depth" {
			fmt.Println(mf.GetName(), mf.GetMetric()[0].GetGauge().GetValue())
		}
	}
	// Output: workqueue_depth 1
}
