package main

import (
	"context"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/client-go/informers"
	"k8s.io/client-go/kubernetes"
	clientrest "k8s.io/client-go/rest"
	k8scache "k8s.io/client-go/tools/cache"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
)

// Loom: rest client (protobuf) → client.For[corev1.Pod] → cache.Informer.
type loomInformer struct {
	inf *cache.Informer[*corev1.Pod]
}

func newLoom(ctx context.Context, url string, o runOptions, cnt *counter) (podInformer, error) {
	ct := rest.Protobuf
	if o.json {
		ct = rest.JSON
	}
	rc, err := rest.New(config.Config{Host: url}, rest.Options{ContentType: ct})
	if err != nil {
		return nil, err
	}
	pods, err := client.For[corev1.Pod](rc, client.Options{})
	if err != nil {
		return nil, err
	}
	opts := cache.InformerOptions[*corev1.Pod]{Reflector: cache.ReflectorOptions{Streaming: cache.StreamingOff}}
	if o.watchList {
		opts.Reflector.Streaming = cache.StreamingAuto
	}
	if o.strip {
		// Loom's way: managedFields are skipped while decoding, on
		// either wire.
		opts.DropManagedFields = true
	}
	if o.noShare {
		opts.Sharing = cache.ShareOff
	}
	if o.share {
		sh := newSharer()
		opts.Transform = func(p *corev1.Pod) (*corev1.Pod, error) {
			if o.strip {
				p.ManagedFields = nil
			}
			return sh.pod(p)
		}
	}
	inf := cache.NewInformer(cache.ListWatch(pods, cache.ListWatchOptions{}), opts)
	if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.Pod]{
		Add:    func(*corev1.Pod, bool) { cnt.add() },
		Update: func(_, p *corev1.Pod) { cnt.update(p.ResourceVersion) },
	}, cache.HandlerOptions{}); err != nil {
		return nil, err
	}
	return &loomInformer{inf: inf}, nil
}

func (l *loomInformer) start(ctx context.Context) { go func() { _ = l.inf.Start(ctx) }() }
func (l *loomInformer) synced() bool              { return l.inf.HasSynced() }

func (l *loomInformer) rvs() map[string]string {
	m := map[string]string{}
	for _, p := range l.inf.Indexer().List() {
		m[key(p)] = p.ResourceVersion
	}
	return m
}

func (l *loomInformer) managedFieldsCached() int {
	n := 0
	for _, p := range l.inf.Indexer().List() {
		if len(p.ManagedFields) > 0 {
			n++
		}
	}
	return n
}

// client-go: clientset (protobuf, no client-side rate limit) → shared
// informer factory → Pods informer, as controllers build it.
type clientGoInformer struct {
	f   informers.SharedInformerFactory
	inf k8scache.SharedIndexInformer
}

func newClientGo(url string, o runOptions, cnt *counter) (podInformer, error) {
	// client-go reads its feature gates from the environment once, on first
	// use: WatchListClient is on by default in v0.36.
	if os.Getenv("KUBE_FEATURE_WatchListClient") == "" {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", strconv.FormatBool(o.watchList))
	}
	cfg := &clientrest.Config{Host: url, QPS: -1}
	cfg.ContentType, cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	if o.json {
		cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	}
	cs, err := kubernetes.NewForConfig(cfg)
	if err != nil {
		return nil, err
	}
	f := informers.NewSharedInformerFactory(cs, 0)
	inf := f.Core().V1().Pods().Informer()
	if o.strip || o.share {
		sh := newSharer()
		if err := inf.SetTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok {
				if o.strip {
					p.ManagedFields = nil
				}
				if o.share {
					return sh.pod(p)
				}
			}
			return obj, nil
		}); err != nil {
			return nil, err
		}
	}
	if _, err := inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{
		AddFunc:    func(any) { cnt.add() },
		UpdateFunc: func(_, p any) { cnt.update(p.(*corev1.Pod).ResourceVersion) },
	}); err != nil {
		return nil, err
	}
	return &clientGoInformer{f: f, inf: inf}, nil
}

func (c *clientGoInformer) start(ctx context.Context) { c.f.Start(ctx.Done()) }
func (c *clientGoInformer) synced() bool              { return c.inf.HasSynced() }

func (c *clientGoInformer) rvs() map[string]string {
	m := map[string]string{}
	for _, o := range c.inf.GetIndexer().List() {
		p := o.(*corev1.Pod)
		m[key(p)] = p.ResourceVersion
	}
	return m
}

func (c *clientGoInformer) managedFieldsCached() int {
	n := 0
	for _, o := range c.inf.GetIndexer().List() {
		if len(o.(*corev1.Pod).ManagedFields) > 0 {
			n++
		}
	}
	return n
}
