// Command typed shows the typed client: create, get, list by label,
// update with a retry on conflict, watch, and delete ConfigMaps.
//
//	go run ./examples/typed [--kubeconfig FILE] [--context NAME] [-n NAMESPACE]
package main

import (
	"context"
	"fmt"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/examples/internal/cluster"
	"github.com/loom-k8s/loom/testenv"
)

func main() { cluster.Main("typed", testenv.Options{}, run) }

func run(ctx context.Context, conn *cluster.Conn) error {

	// One generic client per type; no generated code.
	cms, err := client.For[corev1.ConfigMap](conn.REST, client.Options{})
	if err != nil {
		return err
	}
	cms = cms.Namespace(conn.Namespace)

	start, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "example=typed"})
	if err != nil {
		return err
	}
	w, err := cms.Watch(ctx, metav1.ListOptions{LabelSelector: "example=typed", ResourceVersion: start.ResourceVersion})
	if err != nil {
		return err
	}
	defer w.Stop()

	cm, err := cms.Create(ctx, &corev1.ConfigMap{
		ObjectMeta: metav1.ObjectMeta{Name: "loom-typed-example", Labels: map[string]string{"example": "typed"}},
		Data:       map[string]string{"greeting": "hello"},
	}, metav1.CreateOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("created %s/%s (uid %s)\n", cm.Namespace, cm.Name, cm.UID)

	// Read-modify-write, retried from a fresh read on 409 Conflict.
	cm, err = cms.Mutate(ctx, cm.Name, func(cm *corev1.ConfigMap) error {
		cm.Data["greeting"] = "hello, loom"
		return nil
	})
	if err != nil {
		return err
	}
	fmt.Printf("updated greeting to %q\n", cm.Data["greeting"])

	list, err := cms.List(ctx, metav1.ListOptions{LabelSelector: "example=typed"})
	if err != nil {
		return err
	}
	fmt.Printf("listed %d configmap(s) labelled example=typed\n", len(list.Items))

	if err := cms.Delete(ctx, cm.Name, metav1.DeleteOptions{}); err != nil {
		return err
	}
	for range 3 {
		ev, err := w.Next()
		if err != nil {
			return err
		}
		fmt.Printf("watch: %s %s\n", ev.Type, ev.Object.Name)
	}
	return nil
}
