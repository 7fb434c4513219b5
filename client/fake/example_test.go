package fake_test

import (
	"context"
	"fmt"
	"log"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/fake"
	"github.com/loom-k8s/loom/rest"
)

// Example writes through a typed client to the in-memory API server and
// meets its rules: a stale update is a conflict.
func Example() {
	ctx := context.Background()
	srv, err := fake.New(fake.Options{})
	if err != nil {
		log.Fatal(err)
	}
	rc, err := srv.REST(rest.Options{}) // or manager.Options{Config: &cfg, Transport: srv.Transport()}
	if err != nil {
		log.Fatal(err)
	}
	cms, err := client.For[corev1.ConfigMap](rc, client.Options{})
	if err != nil {
		log.Fatal(err)
	}
	cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", GenerateName: "settings-"},
		Data: map[string]string{"mode": "fast"}}, metav1.CreateOptions{})
	if err != nil {
		log.Fatal(err)
	}
	stale := cm.DeepCopy()
	cm.Data["mode"] = "safe"
	if _, err := cms.Update(ctx, cm, metav1.UpdateOptions{}); err != nil {
		log.Fatal(err)
	}
	_, err = cms.Update(ctx, stale, metav1.UpdateOptions{})
	fmt.Println("generated name:", len(cm.Name) == len("settings-")+5)
	fmt.Println("stale update is a conflict:", apierrors.IsConflict(err))
	// Output:
	// generated name: true
	// stale update is a conflict: true
}
