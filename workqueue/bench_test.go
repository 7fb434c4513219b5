package workqueue_test

import (
	"strconv"
	"testing"

	"github.com/loom-k8s/loom/workqueue"
)

// BenchmarkAddGetDone: one goroutine, one op = Add, Get and Done of one
// item, keys cycling over 1000, in steady state; "priority" spreads the
// keys over two priorities (bench/workqueue compares with client-go).
func BenchmarkAddGetDone(b *testing.B) {
	keys := make([]string, 1000)
	for i := range keys {
		keys[i] = "namespace/object-" + strconv.Itoa(i)
	}
	prios := [...]int{workqueue.PriorityLow, workqueue.PriorityNormal}
	b.Run("fifo", func(b *testing.B) {
		q := workqueue.New(workqueue.Options[string]{})
		defer q.ShutDown()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.Add(keys[i%len(keys)])
			item, _ := q.Get()
			q.Done(item)
		}
	})
	b.Run("priority", func(b *testing.B) {
		q := workqueue.New(workqueue.Options[string]{})
		defer q.ShutDown()
		b.ReportAllocs()
		for i := 0; b.Loop(); i++ {
			q.AddWithPriority(keys[i%len(keys)], prios[i&1])
			item, _ := q.Get()
			q.Done(item)
		}
	})
}
