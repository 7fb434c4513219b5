package cache_test

import (
	"fmt"
	"maps"
	"math/rand/v2"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
)

// mirror is a handler that rebuilds the cache from its calls alone and
// records every call that contradicts what it has seen: an add of a key
// it has, an update whose old state is not the one it has, a delete of a
// key it lacks.
type mirror struct {
	mu         sync.Mutex
	rv         map[string]string
	violations []string
	end        chan struct{} // closed when the "end" object arrives
}

func newMirror() *mirror { return &mirror{rv: map[string]string{}, end: make(chan struct{})} }

func (m *mirror) OnAdd(o *corev1.ConfigMap, _ bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rv, ok := m.rv[o.Name]; ok {
		m.violations = append(m.violations, fmt.Sprintf("add %s rv=%s over rv=%s", o.Name, o.ResourceVersion, rv))
	}
	m.rv[o.Name] = o.ResourceVersion
	if o.Name == "end" {
		close(m.end)
	}
}

func (m *mirror) OnUpdate(old, o *corev1.ConfigMap) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if rv := m.rv[o.Name]; rv != old.ResourceVersion {
		m.violations = append(m.violations, fmt.Sprintf("update %s from rv=%s, but had rv=%q", o.Name, old.ResourceVersion, rv))
	}
	m.rv[o.Name] = o.ResourceVersion
}

func (m *mirror) OnDelete(o *corev1.ConfigMap, _ bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	if _, ok := m.rv[o.Name]; !ok {
		m.violations = append(m.violations, fmt.Sprintf("delete %s, never added", o.Name))
	}
	delete(m.rv, o.Name)
}

// TestInformerHandlersSeeAConsistentHistory drives an informer with
// random creates, updates, deletes and relists (some of which turn
// deletes into tombstones), while handlers are added and removed
// concurrently. Every handler, however late, must see a history that
// starts from the cache and never contradicts itself, and end with the
// cache's exact contents.
func TestInformerHandlersSeeAConsistentHistory(t *testing.T) {
	for seed := range uint64(4) {
		t.Run(fmt.Sprint("seed=", seed), func(t *testing.T) {
			rng := rand.New(rand.NewPCG(seed, 1))
			server := map[string]int{} // the model: name → resourceVersion
			rv := 1
			snapshot := func() *client.List[*corev1.ConfigMap] {
				var items []*corev1.ConfigMap
				for _, name := range slices.Sorted(maps.Keys(server)) {
					items = append(items, cm(name, strconv.Itoa(server[name])))
				}
				return list(strconv.Itoa(rv), "", items...)
			}
			for range 30 {
				rv++
				server[fmt.Sprint("k", rng.IntN(60))] = rv
			}
			lw := newFeed(snapshot())
			inf := cache.NewInformer(lw, quiet())
			var mirrors []*mirror
			var regs []cache.Registration
			// Every other handler is inline; both kinds must see the same.
			var nth atomic.Int64
			hopts := func() cache.HandlerOptions { return cache.HandlerOptions{Inline: nth.Add(1)%2 == 0} }
			addMirror := func() {
				m := newMirror()
				reg, err := inf.AddHandler(m, hopts())
				if err != nil {
					t.Fatal(err)
				}
				mirrors, regs = append(mirrors, m), append(regs, reg)
			}
			addMirror()
			run(t, inf)

			type added struct {
				m   *mirror
				reg cache.Registration
			}
			pending := make(chan added, 1)
			for step := range 3000 {
				rv++
				name := fmt.Sprint("k", rng.IntN(60))
				_, exists := server[name]
				switch r := rng.IntN(100); {
				case r < 2:
					// Deletes the watch will not report: the relist finds them.
					for range 3 {
						delete(server, fmt.Sprint("k", rng.IntN(60)))
					}
					lw.mu.Lock()
					lw.lists = []*client.List[*corev1.ConfigMap]{snapshot()}
					lw.mu.Unlock()
					lw.expire()
				case !exists:
					server[name] = rv
					lw.send(watch.Added, cm(name, strconv.Itoa(rv)))
				case r < 70:
					server[name] = rv
					lw.send(watch.Modified, cm(name, strconv.Itoa(rv)))
				default:
					delete(server, name)
					lw.send(watch.Deleted, cm(name, strconv.Itoa(rv)))
				}
				switch step % 300 {
				case 150: // add a handler while events flow
					go func() {
						m := newMirror()
						reg, err := inf.AddHandler(m, hopts())
						if err != nil {
							panic(err)
						}
						pending <- added{m, reg}
					}()
				case 200:
					a := <-pending
					mirrors, regs = append(mirrors, a.m), append(regs, a.reg)
				}
				if step%700 == 350 {
					regs[len(regs)-1].Remove()
					mirrors = mirrors[:len(mirrors)-1]
					regs = regs[:len(regs)-1]
				}
			}
			rv++
			server["end"] = rv
			lw.send(watch.Added, cm("end", strconv.Itoa(rv)))

			want := map[string]string{}
			for name, v := range server {
				want[name] = strconv.Itoa(v)
			}
			for n, m := range mirrors {
				<-m.end
				m.mu.Lock()
				if len(m.violations) > 0 {
					t.Errorf("handler %d: %d contradictions, first: %s", n, len(m.violations), m.violations[0])
				}
				if !maps.Equal(m.rv, want) {
					t.Errorf("handler %d ends with %d objects, the server has %d", n, len(m.rv), len(want))
				}
				m.mu.Unlock()
			}
			if got := inf.Indexer().Len(); got != len(want) {
				t.Errorf("cache has %d objects, the server %d", got, len(want))
			}
		})
	}
}
