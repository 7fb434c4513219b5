package manager

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loom-k8s/loom/cache"
)

// informerCollector exports the figures of the factory's informers
// (cache.Factory.Stats) at each scrape, labelled by informer name: no
// work on the informers' own paths.
type informerCollector struct{ f *cache.Factory }

var (
	infObjects = prometheus.NewDesc("loom_informer_objects",
		"Objects in the informer's cache.", []string{"informer"}, nil)
	infQueued = prometheus.NewDesc("loom_informer_queue_depth",
		"Keys whose changes wait to be applied to the informer's cache.", []string{"informer"}, nil)
	infRV = prometheus.NewDesc("loom_informer_resource_version",
		"The newest resourceVersion applied to the informer's cache, when it is a number (as with etcd).", []string{"informer"}, nil)
	infProcessed = prometheus.NewDesc("loom_informer_processed_total",
		"Keys applied to the informer's cache.", []string{"informer"}, nil)
	infProcessing = prometheus.NewDesc("loom_informer_processing_seconds_total",
		"Time spent applying changes to the informer's cache and calling its inline handlers; divided by loom_informer_processed_total, the mean processing latency.", []string{"informer"}, nil)
	infLists = prometheus.NewDesc("loom_informer_lists_total",
		"Full lists that replaced the informer's cache.", []string{"informer"}, nil)
	infWatches = prometheus.NewDesc("loom_informer_watches_total",
		"Watches the informer started.", []string{"informer"}, nil)
	infErrors = prometheus.NewDesc("loom_informer_errors_total",
		"List and watch errors the informer met.", []string{"informer"}, nil)
)

func (informerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{infObjects, infQueued, infRV, infProcessed, infProcessing, infLists, infWatches, infErrors} {
		ch <- d
	}
}

func (c informerCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.f.Stats() {
		ch <- prometheus.MustNewConstMetric(infObjects, prometheus.GaugeValue, float64(s.Objects), name)
		ch <- prometheus.MustNewConstMetric(infQueued, prometheus.GaugeValue, float64(s.Queued), name)
		if rv, err := strconv.ParseUint(s.ResourceVersion, 10, 64); err == nil {
			ch <- prometheus.MustNewConstMetric(infRV, prometheus.GaugeValue, float64(rv), name)
		}
		ch <- prometheus.MustNewConstMetric(infProcessed, prometheus.CounterValue, float64(s.Processed), name)
		ch <- prometheus.MustNewConstMetric(infProcessing, prometheus.CounterValue, s.ProcessingTime.Seconds(), name)
		ch <- prometheus.MustNewConstMetric(infLists, prometheus.CounterValue, float64(s.Reflector.Lists), name)
		ch <- prometheus.MustNewConstMetric(infWatches, prometheus.CounterValue, float64(s.Reflector.Watches), name)
		ch <- prometheus.MustNewConstMetric(infErrors, prometheus.CounterValue, float64(s.Reflector.Errors), name)
	}
}
