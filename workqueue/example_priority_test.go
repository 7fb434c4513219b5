package workqueue_test

import (
	"fmt"

	"github.com/loom-k8s/loom/workqueue"
)

// A controller that starts goes through the objects it lists at low
// priority; a change seen meanwhile goes first.
func ExampleQueue_AddWithPriority() {
	q := workqueue.New(workqueue.Options[string]{})
	defer q.ShutDown()
	for _, key := range []string{"default/a", "default/b", "default/c"} {
		q.AddWithPriority(key, workqueue.PriorityLow) // the initial list
	}
	q.Add("default/z")                                       // a change, at PriorityNormal
	q.AddWithPriority("default/c", workqueue.PriorityNormal) // c changed too: raised
	for q.Len() > 0 {
		key, _ := q.Get()
		fmt.Println(key)
		q.Done(key)
	}
	// Output:
	// default/z
	// default/c
	// default/a
	// default/b
}
