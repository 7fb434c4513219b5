package testenv_test

import (
	"context"
	"fmt"

	"github.com/loom-k8s/loom/testenv"
)

// Start runs a control plane outside a test, as `loom dev up` does. In a
// test, testenv.New(t, testenv.Options{}) does the same and stops it when the
// test ends.
func ExampleStart() {
	env, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		fmt.Println(err)
		return
	}
	defer env.Stop()
	hc, err := env.HTTPClient()
	if err != nil {
		fmt.Println(err)
		return
	}
	resp, err := hc.Get(env.URL + "/api/v1/namespaces/kube-system")
	if err != nil {
		fmt.Println(err)
		return
	}
	resp.Body.Close()
	fmt.Println(resp.Status)
	// Output: 200 OK
}
