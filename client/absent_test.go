package client_test

import (
	"errors"
	"fmt"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
)

func TestOptional(t *testing.T) {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "a"}}
	notFound := apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, "a")
	denied := apierrors.NewForbidden(schema.GroupResource{Resource: "configmaps"}, "a", errors.New("no"))
	for _, tt := range []struct {
		name    string
		obj     *corev1.ConfigMap
		err     error
		wantObj bool
		wantOK  bool
		wantErr error
	}{
		{"found", cm, nil, true, true, nil},
		{"absent", nil, notFound, false, false, nil},
		{"wrapped absent", nil, fmt.Errorf("reading: %w", notFound), false, false, nil},
		{"other error", nil, denied, false, false, denied},
	} {
		t.Run(tt.name, func(t *testing.T) {
			obj, ok, err := client.Optional(tt.obj, tt.err)
			if (obj != nil) != tt.wantObj || ok != tt.wantOK || !errors.Is(err, tt.wantErr) || (err == nil) != (tt.wantErr == nil) {
				t.Errorf("Optional = %v, %v, %v; want object %v, ok %v, err %v", obj, ok, err, tt.wantObj, tt.wantOK, tt.wantErr)
			}
			if got := client.IgnoreNotFound(tt.err); !errors.Is(got, tt.wantErr) || (got == nil) != (tt.wantErr == nil) {
				t.Errorf("IgnoreNotFound = %v, want %v", got, tt.wantErr)
			}
		})
	}
}

// Optional turns a Get's NotFound into ok=false, for reads where an
// absent object is an answer.
func ExampleOptional() {
	get := func(name string) (*corev1.ConfigMap, error) { // stands for any Get
		return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "configmaps"}, name)
	}
	cm, ok, err := client.Optional(get("settings"))
	fmt.Println(cm == nil, ok, err)
	// Output:
	// true false <nil>
}
