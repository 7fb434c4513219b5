package queuetest_test

import (
	"fmt"
	"testing"
	"time"

	"github.com/loom-k8s/loom/internal/clock"

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

// In a test of your own queue, Run reports each case as a subtest.
func ExampleRun() {
	_ = func(t *testing.T) {
		queuetest.Run(t, func() workqueue.Interface[string] {
			return workqueue.New(workqueue.Options[string]{})
		})
	}
}

func ExampleCheckDelaying() {
	err := queuetest.CheckDelaying(func() (workqueue.DelayingInterface[string], func(time.Duration)) {
		// The kit advances time through the function returned here; a fake
		// clock makes that instant and the result deterministic.
		clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
		return workqueue.New(workqueue.Options[string]{Clock: clk}), clk.Step
	})
	fmt.Println("violations:", err)
	// Output: violations: <nil>
}

// In a test of your own delaying queue, RunDelaying reports each case,
// core and AddAfter, as a subtest; advance must fire due delays before it
// returns, as a fake clock's Step does.
func ExampleRunDelaying() {
	_ = func(t *testing.T) {
		queuetest.RunDelaying(t, func() (workqueue.DelayingInterface[string], func(time.Duration)) {
			clk := clock.NewFake(time.Date(2026, 1, 1, 0, 0, 0, 0, time.UTC))
			return workqueue.New(workqueue.Options[string]{Clock: clk}), clk.Step
		})
	}
}
