package queuetest_test

import (
	"fmt"
	"testing"
	"testing/synctest"
	"time"

	"github.com/loom-k8s/loom/workqueue"
	"github.com/loom-k8s/loom/workqueue/queuetest"
)

func ExampleCheck() {
	err := queuetest.Check(func() workqueue.Interface[string] {
		return workqueue.New(workqueue.Options[string]{})
	})
	fmt.Println("violations:", err)
	// Output: violations: <nil>
}

func ExampleStress() {
	res, err := queuetest.Stress(func() workqueue.Interface[string] {
		return workqueue.New(workqueue.Options[string]{})
	}, queuetest.StressOptions{Sequences: 1000})
	fmt.Println("producer sequences:", res.ProducerSequences, "violations:", res.Violations, err)
	// Output: producer sequences: 1000 violations: 0 <nil>
}

// In a test of your own queue, Run reports each case as a subtest. It
// needs the test's *testing.T, so it is compiled, not run.
func ExampleRun() {
	_ = func(t *testing.T) {
		queuetest.Run(t, func() workqueue.Interface[string] {
			return workqueue.New(workqueue.Options[string]{})
		})
	}
}

// A workqueue.Queue runs on the real clock; in a testing/synctest bubble
// that clock is fake, so advance can sleep and then wait for the queue's
// timer to deliver what fell due. CheckDelaying, which starts no
// subtests, runs in one bubble. A bubble needs the test's *testing.T, so
// the example is compiled, not run.
func ExampleCheckDelaying() {
	_ = func(t *testing.T) {
		synctest.Test(t, func(t *testing.T) {
			err := queuetest.CheckDelaying(func() (workqueue.DelayingInterface[string], func(time.Duration)) {
				advance := func(d time.Duration) {
					time.Sleep(d)
					synctest.Wait()
				}
				return workqueue.New(workqueue.Options[string]{}), advance
			})
			if err != nil {
				t.Error(err)
			}
		})
	}
}

// myFakeClock and newMyQueue stand for a fake clock of your own and a
// delaying queue of yours that runs on it.
type myFakeClock struct{}

func (*myFakeClock) Step(time.Duration) {}

func newMyQueue(*myFakeClock) workqueue.DelayingInterface[string] { return nil }

// In a test of your own delaying queue, RunDelaying reports each case,
// core and AddAfter, as a subtest; advance must fire due delays before it
// returns, as a fake clock's Step does. A bubble of testing/synctest
// cannot hold subtests: to test a queue on the real clock, such as a
// workqueue.Queue, use CheckDelaying in a bubble. It needs the test's
// *testing.T, so it is compiled, not run.
func ExampleRunDelaying() {
	_ = func(t *testing.T) {
		queuetest.RunDelaying(t, func() (workqueue.DelayingInterface[string], func(time.Duration)) {
			clk := &myFakeClock{}
			return newMyQueue(clk), clk.Step
		})
	}
}
