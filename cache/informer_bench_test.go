package cache_test

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// replayLW lists nothing, then plays events on its first watch as fast
// as the reflector takes them, then blocks.
type replayLW struct {
	events []rest.Event[*corev1.ConfigMap]
	once   sync.Once
}

func (r *replayLW) List(context.Context, metav1.ListOptions) (*client.List[*corev1.ConfigMap], error) {
	return &client.List[*corev1.ConfigMap]{ListMeta: metav1.ListMeta{ResourceVersion: "1"}}, nil
}

func (r *replayLW) Watch(ctx context.Context, o metav1.ListOptions) (cache.Watch[*corev1.ConfigMap], error) {
	var evs []rest.Event[*corev1.ConfigMap]
	r.once.Do(func() { evs = r.events })
	return &replayWatch{ctx: ctx, events: evs}, nil
}

type replayWatch struct {
	ctx    context.Context
	events []rest.Event[*corev1.ConfigMap]
}

func (w *replayWatch) Next() (rest.Event[*corev1.ConfigMap], error) {
	if len(w.events) == 0 {
		<-w.ctx.Done()
		return rest.Event[*corev1.ConfigMap]{}, w.ctx.Err()
	}
	ev := w.events[0]
	w.events = w.events[1:]
	return ev, nil
}

func (w *replayWatch) Stop() {}

// BenchmarkInformerFanOut measures watch events per second through an
// informer (DeltaFIFO, cache, notification buffers) to 1 and 10
// handlers that only count. ns/op is per event, all handlers served.
func BenchmarkInformerFanOut(b *testing.B) {
	for _, c := range []struct {
		handlers int
		inline   bool
	}{{1, false}, {1, true}, {10, false}, {10, true}} {
		handlers := c.handlers
		b.Run(fmt.Sprintf("handlers=%d/inline=%v", handlers, c.inline), func(b *testing.B) {
			objs := make([]*corev1.ConfigMap, 1000)
			for i := range objs {
				objs[i] = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "ns", Name: fmt.Sprint("cm-", i)}}
			}
			events := make([]rest.Event[*corev1.ConfigMap], b.N)
			for i := range events {
				typ := watch.Modified
				if i < len(objs) {
					typ = watch.Added
				}
				o := *objs[i%len(objs)]
				o.ResourceVersion = fmt.Sprint(i + 2)
				events[i] = rest.Event[*corev1.ConfigMap]{Type: typ, Object: &o}
			}
			inf := cache.NewInformer(&replayLW{events: events}, cache.InformerOptions[*corev1.ConfigMap]{
				Reflector: cache.ReflectorOptions{Streaming: cache.StreamingOff},
			})
			var wg sync.WaitGroup
			for range handlers {
				var n atomic.Int64
				wg.Add(1)
				count := func() {
					if n.Add(1) == int64(b.N) {
						wg.Done()
					}
				}
				if _, err := inf.AddHandler(cache.HandlerFuncs[*corev1.ConfigMap]{
					Add:    func(*corev1.ConfigMap, bool) { count() },
					Update: func(_, _ *corev1.ConfigMap) { count() },
				}, cache.HandlerOptions{Inline: c.inline}); err != nil {
					b.Fatal(err)
				}
			}
			ctx, cancel := context.WithCancel(b.Context())
			done := make(chan error)
			b.ReportAllocs()
			b.ResetTimer()
			go func() { done <- inf.Start(ctx) }()
			wg.Wait()
			b.StopTimer()
			cancel()
			if err := <-done; err != nil {
				b.Fatal(err)
			}
		})
	}
}
