package client_test

import (
	"errors"
	"fmt"

	"github.com/loom-k8s/loom/client"
)

// A write refused because the object holds a part that cached objects
// share and that some code changed in place: the error says where, and
// errors.Is tells it from a server's answer. The fix is in the code that
// changed a cached object: DeepCopy objects read from a cache before
// changing them.
func ExampleSharedChangedError() {
	// As an Update of a Deployment would return it.
	var err error = &client.SharedChangedError{Op: "update", Key: "default/web", Path: ".Spec.Template.Spec.Containers"}

	var sce *client.SharedChangedError
	if errors.Is(err, client.ErrSharedChanged) && errors.As(err, &sce) {
		fmt.Println("changed in place:", sce.Path)
	}
	fmt.Println(err)
	// Output:
	// changed in place: .Spec.Template.Spec.Containers
	// client: update default/web: .Spec.Template.Spec.Containers in the object written: a part shared by cached objects was changed in place (DeepCopy objects read from a cache before changing them)
}
