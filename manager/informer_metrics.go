package manager

import (
	"slices"
	"strconv"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/loom-k8s/loom/cache"
)

// informerCollector exports the figures of the factory's informers
// (cache.Factory.Stats) at each scrape: no work on the informers' own
// paths. The queue depth, processing latency and resourceVersion use
// client-go 1.36's names and labels (name, group, version, resource), so
// that dashboards made for client-go's informers read Loom's; the rest
// are Loom's, labelled by informer name.
type informerCollector struct{ f *cache.Factory }

var (
	informerLabels = []string{"name", "group", "version", "resource"}

	infQueued = prometheus.NewDesc("informer_queued_items",
		"Number of items currently queued in the informer's queue, waiting to be applied to its cache.", informerLabels, nil)
	infLatency = prometheus.NewDesc("informer_processing_latency_seconds",
		"Time taken to apply a key's changes to the informer's cache and call its inline handlers, after popping it from the queue.", informerLabels, nil)
	infRV = prometheus.NewDesc("informer_store_resource_version",
		"The 15 least significant digits of the newest resourceVersion applied to the informer's cache, when it is a number (as with etcd).", informerLabels, nil)

	infObjects = prometheus.NewDesc("loom_informer_objects",
		"Objects in the informer's cache.", []string{"informer"}, nil)
	infLists = prometheus.NewDesc("loom_informer_lists_total",
		"Full lists that replaced the informer's cache.", []string{"informer"}, nil)
	infWatches = prometheus.NewDesc("loom_informer_watches_total",
		"Watches the informer started.", []string{"informer"}, nil)
	infErrors = prometheus.NewDesc("loom_informer_errors_total",
		"List and watch errors the informer met.", []string{"informer"}, nil)
)

func (informerCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{infQueued, infLatency, infRV, infObjects, infLists, infWatches, infErrors} {
		ch <- d
	}
}

func (c informerCollector) Collect(ch chan<- prometheus.Metric) {
	for name, s := range c.f.Stats() {
		l := []string{name, s.Resource.Group, s.Resource.Version, s.Resource.Resource}
		ch <- prometheus.MustNewConstMetric(infQueued, prometheus.GaugeValue, float64(s.Queued), l...)
		buckets := make(map[float64]uint64, len(s.ProcessingLatency))
		for bound, n := range s.ProcessingLatency {
			buckets[bound.Seconds()] = n
		}
		ch <- prometheus.MustNewConstHistogram(infLatency, s.Processed, s.ProcessingTime.Seconds(), buckets, l...)
		if rv, err := strconv.ParseUint(s.ResourceVersion, 10, 64); err == nil {
			ch <- prometheus.MustNewConstMetric(infRV, prometheus.GaugeValue, float64(rv%1e15), l...)
		}
		ch <- prometheus.MustNewConstMetric(infObjects, prometheus.GaugeValue, float64(s.Objects), name)
		ch <- prometheus.MustNewConstMetric(infLists, prometheus.CounterValue, float64(s.Reflector.Lists), name)
		ch <- prometheus.MustNewConstMetric(infWatches, prometheus.CounterValue, float64(s.Reflector.Watches), name)
		ch <- prometheus.MustNewConstMetric(infErrors, prometheus.CounterValue, float64(s.Reflector.Errors), name)
	}
}

// referencedCollector exports, at each scrape, how many full objects each
// referenced-only client holds and how many it has fetched.
type referencedCollector struct {
	mu      sync.Mutex
	clients []referencedClient
}

// referencedClient is what the collector reads of one client.
type referencedClient struct {
	resource func() string
	held     func() int
	fetches  func() uint64
}

var (
	refHeld = prometheus.NewDesc("loom_cache_referenced_objects",
		"Full objects a referenced-only cache holds, having been read; the metadata of every object is in the informer's figures.", []string{"resource"}, nil)
	refFetches = prometheus.NewDesc("loom_cache_referenced_fetches_total",
		"GETs a referenced-only cache sent to fetch an object for a read: a first read, or the first after a change or an eviction.", []string{"resource"}, nil)
	// The resource label is the group resource, such as "secrets" or
	// "widgets.example.com".
)

func (c *referencedCollector) add(r referencedClient) {
	c.mu.Lock()
	defer c.mu.Unlock()
	c.clients = append(c.clients, r)
}

func (*referencedCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- refHeld
	ch <- refFetches
}

func (c *referencedCollector) Collect(ch chan<- prometheus.Metric) {
	c.mu.Lock()
	clients := slices.Clone(c.clients)
	c.mu.Unlock()
	for _, r := range clients {
		res := r.resource()
		ch <- prometheus.MustNewConstMetric(refHeld, prometheus.GaugeValue, float64(r.held()), res)
		ch <- prometheus.MustNewConstMetric(refFetches, prometheus.CounterValue, float64(r.fetches()), res)
	}
}
