// Command scale shows the scale client: it creates a Deployment and scales
// it through its scale subresource, found through discovery.
//
//	go run ./examples/scale [--kubeconfig FILE] [-n NAMESPACE]
package main

import (
	"context"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/examples/internal/cluster"
	"github.com/loom-k8s/loom/testenv"
)

func main() { cluster.Main("scale", testenv.Options{}, run) }

func run(ctx context.Context, conn *cluster.Conn) error {

	deploys, err := client.For[appsv1.Deployment](conn.REST, client.Options{})
	if err != nil {
		return err
	}
	deploys = deploys.Namespace(conn.Namespace)
	one := int32(1)
	labels := map[string]string{"app": "loom-scale-example"}
	if _, err := deploys.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "loom-scale-example"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer deploys.Delete(context.Background(), "loom-scale-example", metav1.DeleteOptions{})

	scaler := client.NewScaler(conn.REST, discovery.NewCached(discovery.New(conn.REST, discovery.Options{}), discovery.CacheOptions{}))
	s, err := scaler.Get(ctx, "deploy", conn.Namespace, "loom-scale-example")
	if err != nil {
		return err
	}
	fmt.Printf("deployment/loom-scale-example has %d replica(s)\n", s.Spec.Replicas)
	s, err = scaler.SetReplicas(ctx, "deploy", conn.Namespace, "loom-scale-example", 3, "")
	if err != nil {
		return err
	}
	fmt.Printf("scaled to %d replicas\n", s.Spec.Replicas)
	d, err := deploys.Get(ctx, "loom-scale-example", metav1.GetOptions{})
	if err != nil {
		return err
	}
	fmt.Printf("the deployment's spec.replicas is now %d\n", *d.Spec.Replicas)
	return nil
}
