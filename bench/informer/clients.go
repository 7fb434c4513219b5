package main

import (
	"context"
	"os"
	"strconv"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/dynamic/dynamicinformer"
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
// For the Widget corpus: client.For[Widget] (typed) or
// client.For[unstructured.Unstructured] (-dynamic), over JSON.
type loomInformer[T client.Object] struct {
	inf *cache.Informer[T]
}

func newLoom(ctx context.Context, cfg config.Config, o runOptions, cnt *counter) (podInformer, error) {
	ct := rest.Protobuf
	if o.json {
		ct = rest.JSON
	}
	rc, err := rest.New(cfg, rest.Options{ContentType: ct})
	if err != nil {
		return nil, err
	}
	if o.widgets {
		res := client.Resource{Resource: widgetGVR, Kind: widgetGVK, Namespaced: true}
		if o.dynamic {
			return loomFor[unstructured.Unstructured](rc, client.Options{Resource: res}, o, cnt, nil)
		}
		return loomFor[Widget](rc, client.Options{Resource: res}, o, cnt, nil)
	}
	var transform func(*corev1.Pod) (*corev1.Pod, error)
	if o.share {
		sh := newSharer()
		transform = func(p *corev1.Pod) (*corev1.Pod, error) {
			if o.strip {
				p.ManagedFields = nil
			}
			return sh.pod(p)
		}
	}
	if o.strip && o.stripTransform && transform == nil {
		// The familiar way, from client-go: a Transform, named where
		// the informer can know it (not from generic code), so that
		// sharing stays on.
		transform = cache.StripManagedFields[*corev1.Pod]
	}
	return loomFor[corev1.Pod](rc, client.Options{}, o, cnt, transform)
}

func loomFor[E any, T interface {
	*E
	client.Object
}](rc *rest.Client, co client.Options, o runOptions, cnt *counter, transform func(T) (T, error)) (podInformer, error) {
	objs, err := client.For[E, T](rc, co)
	if err != nil {
		return nil, err
	}
	opts := cache.InformerOptions[T]{Reflector: cache.ReflectorOptions{Streaming: cache.StreamingOff}, Transform: transform}
	if o.watchList {
		opts.Reflector.Streaming = cache.StreamingAuto
	}
	if o.strip && !(o.stripTransform && transform != nil) {
		// Loom's way: managedFields are skipped while decoding, on
		// either wire.
		opts.DropManagedFields = true
	}
	if o.noShare {
		opts.Sharing = cache.ShareOff
	}
	inf := cache.NewInformer(cache.ListWatch(objs, cache.ListWatchOptions{}), opts)
	if _, err := inf.AddHandler(cache.HandlerFuncs[T]{
		Add:    func(T, bool) { cnt.add() },
		Update: func(_, p T) { cnt.update(p.GetResourceVersion()) },
	}, cache.HandlerOptions{}); err != nil {
		return nil, err
	}
	return &loomInformer[T]{inf: inf}, nil
}

func (l *loomInformer[T]) start(ctx context.Context) { go func() { _ = l.inf.Start(ctx) }() }
func (l *loomInformer[T]) synced() bool              { return l.inf.HasSynced() }

func (l *loomInformer[T]) rvs() map[string]string {
	m := map[string]string{}
	for _, p := range l.inf.Indexer().List() {
		m[p.GetNamespace()+"/"+p.GetName()] = p.GetResourceVersion()
	}
	return m
}

func (l *loomInformer[T]) objects() map[string]any {
	m := map[string]any{}
	for _, p := range l.inf.Indexer().List() {
		m[p.GetNamespace()+"/"+p.GetName()] = p
	}
	return m
}

func (l *loomInformer[T]) managedFieldsCached() int {
	n := 0
	for _, p := range l.inf.Indexer().List() {
		if len(p.GetManagedFields()) > 0 {
			n++
		}
	}
	return n
}

// client-go: clientset (protobuf, no client-side rate limit) → shared
// informer factory → Pods informer, as controllers build it.
type clientGoInformer struct {
	f   interface{ Start(<-chan struct{}) }
	inf k8scache.SharedIndexInformer
}

func newClientGo(base *clientrest.Config, o runOptions, cnt *counter) (podInformer, error) {
	// client-go reads its feature gates from the environment once, on first
	// use: WatchListClient is on by default in v0.36.
	if os.Getenv("KUBE_FEATURE_WatchListClient") == "" {
		_ = os.Setenv("KUBE_FEATURE_WatchListClient", strconv.FormatBool(o.watchList))
	}
	cfg := clientrest.CopyConfig(base)
	cfg.QPS = -1
	cfg.ContentType, cfg.AcceptContentTypes = "application/vnd.kubernetes.protobuf", "application/vnd.kubernetes.protobuf,application/json"
	if o.json {
		cfg.ContentType, cfg.AcceptContentTypes = "application/json", "application/json"
	}
	var (
		f   interface{ Start(<-chan struct{}) }
		inf k8scache.SharedIndexInformer
	)
	switch {
	case o.widgets && o.dynamic:
		// dynamic client → dynamic informer factory, as a controller
		// watching a custom resource without generated code builds it.
		dc, err := dynamic.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		df := dynamicinformer.NewDynamicSharedInformerFactory(dc, 0)
		f, inf = df, df.ForResource(widgetGVR).Informer()
	case o.widgets:
		// A REST client for the custom type → ListWatch → shared index
		// informer, as generated informers build it.
		s := widgetScheme()
		wc := *cfg
		wc.GroupVersion, wc.APIPath = &widgetGV, "/apis"
		wc.NegotiatedSerializer = serializer.NewCodecFactory(s).WithoutConversion()
		rc, err := clientrest.RESTClientFor(&wc)
		if err != nil {
			return nil, err
		}
		lw := k8scache.NewListWatchFromClient(rc, "widgets", "", fields.Everything())
		inf = k8scache.NewSharedIndexInformer(lw, &Widget{}, 0, k8scache.Indexers{k8scache.NamespaceIndex: k8scache.MetaNamespaceIndexFunc})
		f = startInformer{inf}
	default:
		cs, err := kubernetes.NewForConfig(cfg)
		if err != nil {
			return nil, err
		}
		pf := informers.NewSharedInformerFactory(cs, 0)
		f, inf = pf, pf.Core().V1().Pods().Informer()
	}
	if o.strip || o.share {
		sh := newSharer()
		if err := inf.SetTransform(func(obj any) (any, error) {
			if p, ok := obj.(*corev1.Pod); ok && o.share {
				if o.strip {
					p.ManagedFields = nil
				}
				return sh.pod(p)
			}
			if m, err := meta.Accessor(obj); err == nil && o.strip {
				m.SetManagedFields(nil)
			}
			return obj, nil
		}); err != nil {
			return nil, err
		}
	}
	if _, err := inf.AddEventHandler(k8scache.ResourceEventHandlerFuncs{
		AddFunc: func(any) { cnt.add() },
		UpdateFunc: func(_, p any) {
			m, _ := meta.Accessor(p)
			cnt.update(m.GetResourceVersion())
		},
	}); err != nil {
		return nil, err
	}
	return &clientGoInformer{f: f, inf: inf}, nil
}

// startInformer starts one informer as a factory would.
type startInformer struct{ inf k8scache.SharedIndexInformer }

func (s startInformer) Start(stop <-chan struct{}) { go s.inf.Run(stop) }

func (c *clientGoInformer) start(ctx context.Context) { c.f.Start(ctx.Done()) }
func (c *clientGoInformer) synced() bool              { return c.inf.HasSynced() }

func (c *clientGoInformer) rvs() map[string]string {
	m := map[string]string{}
	for _, o := range c.inf.GetIndexer().List() {
		a, _ := meta.Accessor(o)
		m[a.GetNamespace()+"/"+a.GetName()] = a.GetResourceVersion()
	}
	return m
}

func (c *clientGoInformer) objects() map[string]any {
	m := map[string]any{}
	for _, o := range c.inf.GetIndexer().List() {
		a, _ := meta.Accessor(o)
		m[a.GetNamespace()+"/"+a.GetName()] = o
	}
	return m
}

func (c *clientGoInformer) managedFieldsCached() int {
	n := 0
	for _, o := range c.inf.GetIndexer().List() {
		if a, _ := meta.Accessor(o); len(a.GetManagedFields()) > 0 {
			n++
		}
	}
	return n
}
