package workqueue_test

import (
	"fmt"
	"sync"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

func ExampleNew() {
	q := workqueue.New(workqueue.Options[string]{Name: "pods"})

	// Producers (event handlers) add keys; repeated adds collapse.
	q.Add("default/web-0")
	q.Add("default/web-1")
	q.Add("default/web-0")
	q.ShutDown() // workers still get the backlog, then stop

	var wg sync.WaitGroup
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			key, ok := q.Get()
			if !ok {
				return
			}
			fmt.Println("reconcile", key)
			q.Done(key)
		}
	}()
	wg.Wait()
	// Output:
	// reconcile default/web-0
	// reconcile default/web-1
}

func ExampleQueue_AddAfter() {
	q := workqueue.New(workqueue.Options[string]{})
	defer q.ShutDown()

	q.AddAfter("late", 20*time.Millisecond)
	q.AddAfter("early", 10*time.Millisecond)
	q.AddAfter("late", time.Hour) // an earlier time is kept
	for range 2 {
		key, _ := q.Get() // blocks until the delay has passed
		fmt.Println(key)
		q.Done(key)
	}
	// Output:
	// early
	// late
}

func ExampleQueue_AddRateLimited() {
	q := workqueue.New(workqueue.Options[string]{})
	defer q.ShutDown()

	q.Add("default/web-0")
	key, _ := q.Get()
	// Processing failed: retry after the limiter's delay (5ms at first).
	q.AddRateLimited(key)
	q.Done(key)
	fmt.Println("failures:", q.NumRequeues(key))

	key, _ = q.Get()
	// Processing succeeded: reset the backoff.
	q.Forget(key)
	q.Done(key)
	fmt.Println("failures:", q.NumRequeues(key))
	// Output:
	// failures: 1
	// failures: 0
}

func ExampleQueue_ShutDownWithDrain() {
	q := workqueue.New(workqueue.Options[string]{})
	q.Add("a")
	key, _ := q.Get()

	done := make(chan struct{})
	go func() {
		time.Sleep(10 * time.Millisecond) // some work
		fmt.Println("done with", key)
		q.Done(key)
		close(done)
	}()
	q.ShutDownWithDrain() // returns only after Done("a")
	fmt.Println("drained")
	<-done
	// Output:
	// done with a
	// drained
}

func ExampleNewExponentialLimiter() {
	l := workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{
		Base: time.Hour,
		Max:  24 * time.Hour,
	})
	fmt.Println(l.When("a"), l.NumRequeues("a"))
	// A failure while the hour-long delay is still running is not counted.
	l.When("a")
	fmt.Println(l.NumRequeues("a"))
	l.Forget("a")
	fmt.Println(l.NumRequeues("a"))
	// Output:
	// 1h0m0s 1
	// 1
	// 0
}

func ExampleNewFastSlowLimiter() {
	l := workqueue.NewFastSlowLimiter[string](workqueue.FastSlowOptions{
		Fast:         0, // default 5ms
		Slow:         time.Minute,
		FastAttempts: 3,
	})
	fmt.Println(l.When("a"))
	// Output: 5ms
}

func ExampleNewBucketLimiter() {
	l := workqueue.NewBucketLimiter[string](workqueue.BucketOptions{QPS: 1, Burst: 2})
	fmt.Println(l.When("a"), l.When("b"), l.When("c") > 0)
	// Output: 0s 0s true
}

func ExampleNewMaxOfLimiter() {
	l := workqueue.NewMaxOfLimiter(
		workqueue.RateLimiter[string](workqueue.NewExponentialLimiter[string](workqueue.ExponentialOptions{Base: time.Second})),
		workqueue.NewBucketLimiter[string](workqueue.BucketOptions{}),
	)
	fmt.Println(l.When("a"))
	// Output: 1s
}

func ExampleDefaultLimiter() {
	q := workqueue.New(workqueue.Options[string]{
		RateLimiter: workqueue.NewMaxOfLimiter(
			workqueue.DefaultLimiter[string](),
			workqueue.RateLimiter[string](workqueue.NewFastSlowLimiter[string](workqueue.FastSlowOptions{})),
		),
	})
	defer q.ShutDown()
	fmt.Println(q.NumRequeues("a"))
	// Output: 0
}

// countingProvider is a MetricsProvider that only counts adds.
type countingProvider struct{ adds *counter }

type counter struct{ n int }

func (c *counter) Inc() { c.n++ }

func (p countingProvider) QueueMetrics(name string) workqueue.Metrics {
	// Fields left nil are not recorded.
	return workqueue.Metrics{Adds: p.adds}
}

func ExampleMetricsProvider() {
	adds := &counter{}
	q := workqueue.New(workqueue.Options[string]{Name: "pods", Metrics: countingProvider{adds}})
	defer q.ShutDown()
	q.Add("a")
	q.Add("a") // collapses into the ready item: not counted
	q.Add("b")
	fmt.Println("adds:", adds.n)
	// Output: adds: 2
}
