package workqueue_test

import (
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
)

// testRequeueAfter is a test as you would write it in a _test.go file of
// your own package, there named TestRequeueAfter. It checks that a key
// added with AddAfter becomes ready exactly when its delay has passed,
// without waiting for the delay.
//
// synctest.Test runs the function in a bubble, where the time package is
// fake: the clock starts at midnight UTC, 2000-01-01, stands still while
// a goroutine of the bubble can run, and jumps to the next timer as soon
// as all of them are blocked.
func testRequeueAfter(t *testing.T) {
	synctest.Test(t, func(t *testing.T) {
		// Make the queue inside the bubble, so that its timer is the
		// bubble's, and shut it down before the bubble ends.
		q := workqueue.New(workqueue.Options[string]{})
		defer q.ShutDown()

		start := time.Now()
		q.AddAfter("default/web-0", 30*time.Second)

		// Sleep to just before the delay runs out; Wait returns once
		// the queue's timer, if due, has done its work.
		time.Sleep(30*time.Second - time.Nanosecond)
		synctest.Wait()
		if n := q.Len(); n != 0 {
			t.Fatalf("after %v: Len = %d, want 0", time.Since(start), n)
		}

		// Get blocks; with every goroutine blocked, the clock jumps to
		// the queue's timer, which makes the key ready.
		key, ok := q.Get()
		if !ok || key != "default/web-0" {
			t.Fatalf("Get = %q, %v; want default/web-0", key, ok)
		}
		if d := time.Since(start); d != 30*time.Second {
			t.Errorf("key ready after %v, want 30s", d)
		}
		q.Done(key)
	})
}

// Code that uses a queue's delays, such as a controller that requeues an
// object after some time, is tested without waiting for the delays by
// running the test in a testing/synctest bubble. An example cannot start
// a bubble, having no *testing.T, so the test is the function above; go
// test runs it from a test of this package (TestFakeTimeExample). The
// example itself is compiled, not run.
func Example_fakeTime() {
	_ = testRequeueAfter // in your package: func TestRequeueAfter(t *testing.T)
}
