package cache_test

import (
	"context"
	"errors"
	"fmt"

	"github.com/loom-k8s/loom/cache"
)

// MyPod is a plain struct, not an API object.
type MyPod struct {
	Name  string
	Value int
}

func NewMyPod(name string, value int) MyPod {
	return MyPod{
		Name:  name,
		Value: value,
	}
}

// PodKeyFunc gives the DeltaFIFO the unique key of a MyPod, so that it
// can track the changes of each one.
func PodKeyFunc(obj MyPod) (string, error) {
	return obj.Name, nil
}

// A DeltaFIFO of a plain struct with a custom key function. Changing pod1's Name changes its key, so
// its update and delete are deltas of a new key, "pod1-update". Close
// ends the loop once the queue is drained.
func ExampleNewDeltaFIFO() {
	df := cache.NewDeltaFIFO(cache.DeltaFIFOOptions[MyPod]{KeyFunc: PodKeyFunc})
	pod1 := NewMyPod("pod1", 1)
	pod2 := NewMyPod("pod2", 2)
	pod3 := NewMyPod("pod3", 3)
	df.Add(pod1)
	df.Add(pod2)
	df.Add(pod3)
	// The newest object of each queued key.
	fmt.Println(df.List())
	pod1.Name = "pod1-update"
	df.Update(pod1)
	df.Delete(pod1)
	df.Close()
	// Pop every key's deltas.
	for {
		err := df.Pop(context.Background(), func(key string, deltas []cache.Delta[MyPod]) error {
			for _, delta := range deltas {
				switch delta.Type {
				case cache.Added:
					fmt.Printf("Add Event: %v\n", delta.Object)
				case cache.Updated:
					fmt.Printf("Update Event: %v\n", delta.Object)
				case cache.Deleted:
					fmt.Printf("Delete Event: %v\n", delta.Object)
				case cache.Sync:
					fmt.Printf("Sync Event: %v\n", delta.Object)
				case cache.Replaced:
					fmt.Printf("Replaced Event: %v\n", delta.Object)
				}
			}
			return nil
		})
		if errors.Is(err, cache.ErrClosed) {
			break
		}
	}
	// Output:
	// [{pod1 1} {pod2 2} {pod3 3}]
	// Add Event: {pod1 1}
	// Add Event: {pod2 2}
	// Add Event: {pod3 3}
	// Update Event: {pod1-update 1}
	// Delete Event: {pod1-update 1}
}
