package queuetest_test

import (
	"fmt"
	"testing"

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
