package stores_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache/stores"
)

func pod(ns, name, node string) *corev1.Pod {
	return &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec:       corev1.PodSpec{NodeName: node},
	}
}

// A FIFO keeps only the newest object per key.
func ExampleNewFIFO() {
	q := stores.NewFIFO(stores.FIFOOptions[*corev1.Pod]{})
	_ = q.Add(pod("default", "a", "node-1"))
	_ = q.Add(pod("default", "b", ""))
	_ = q.Update(pod("default", "a", "node-2"))
	for q.Len() > 0 {
		p, _ := q.Pop(context.Background())
		fmt.Println(p.Name, p.Spec.NodeName)
	}
	// Output:
	// a node-2
	// b
}

// A Heap pops the least object first, here by priority.
func ExampleNewHeap() {
	type job struct {
		Name     string
		Priority int
	}
	h := stores.NewHeap(stores.HeapOptions[job]{
		KeyFunc: func(j job) (string, error) { return j.Name, nil },
		Less:    func(a, b job) bool { return a.Priority > b.Priority },
	})
	_ = h.Add(job{"backup", 1})
	_ = h.Add(job{"page-oncall", 10})
	_ = h.Add(job{"report", 5})
	for h.Len() > 0 {
		j, _ := h.Pop(context.Background())
		fmt.Println(j.Name)
	}
	// Output:
	// page-oncall
	// report
	// backup
}

// An ExpirationCache forgets objects a TTL after they were written.
func ExampleNewExpirationCache() {
	type answer struct{ Question, Value string }
	c := stores.NewExpirationCache(stores.ExpirationCacheOptions[answer]{
		KeyFunc: func(a answer) (string, error) { return a.Question, nil },
		TTL:     time.Hour,
	})
	_ = c.Add(answer{"preferred-version/apps", "v1"})
	a, ok := c.Get("preferred-version/apps")
	fmt.Println(a.Value, ok)
	// Output:
	// v1 true
}

// An UndeltaStore pushes its whole contents after each write.
func ExampleNewUndeltaStore() {
	u := stores.NewUndeltaStore(stores.UndeltaStoreOptions[*corev1.Pod]{
		Push: func(all []*corev1.Pod) { fmt.Println(len(all), "pods") },
	})
	_ = u.Add(pod("default", "a", ""))
	_ = u.Add(pod("default", "b", ""))
	_ = u.Delete(pod("default", "a", ""))
	// Output:
	// 1 pods
	// 2 pods
	// 1 pods
}

// Peek shows the least object without removing it.
func ExampleHeap_Peek() {
	h := stores.NewHeap(stores.HeapOptions[*corev1.Pod]{
		Less: func(a, b *corev1.Pod) bool { return a.CreationTimestamp.Before(&b.CreationTimestamp) },
	})
	older := pod("default", "older", "")
	older.CreationTimestamp = metav1.Unix(100, 0)
	newer := pod("default", "newer", "")
	newer.CreationTimestamp = metav1.Unix(200, 0)
	_ = h.Add(newer)
	_ = h.Add(older)
	p, ok := h.Peek()
	fmt.Println(p.Name, ok, h.Len())
	// Output:
	// older true 2
}
