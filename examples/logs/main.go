// Command logs shows pod logs: it starts a pod and follows its log, printing
// lines until the log has shown a few or the context ends.
//
//	go run ./examples/logs [--kubeconfig FILE] [-n NAMESPACE]
//
// Without a kubeconfig it starts a local control plane with one fake node,
// whose containers "log" what the example appends to the node's log file
// (testenv.Env.AppendPodLog); on a real cluster the container prints them.
package main

import (
	"bufio"
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/examples/internal/cluster"
	"github.com/loom-k8s/loom/testenv"
)

func main() { cluster.Main("logs", testenv.Options{Controllers: true, Scheduler: true, Nodes: 1}, run) }

func run(ctx context.Context, conn *cluster.Conn) error {

	pods, err := client.For[corev1.Pod](conn.REST, client.Options{})
	if err != nil {
		return err
	}
	pods = pods.Namespace(conn.Namespace)
	if _, err := pods.Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "loom-logs-example"},
		Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "busybox",
			Command: []string{"sh", "-c", "for i in 1 2 3; do echo line $i; sleep 1; done; sleep 3600"}}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	defer pods.Delete(context.Background(), "loom-logs-example", metav1.DeleteOptions{GracePeriodSeconds: new(int64)})

	for {
		p, err := pods.Get(ctx, "loom-logs-example", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if p.Status.Phase == corev1.PodRunning {
			break
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-time.After(200 * time.Millisecond):
		}
	}
	fmt.Println("pod is running; following its log")
	if conn.Local != nil {
		// On the local control plane's fake node nothing runs the command:
		// write what it would print where the node serves logs from.
		if err := conn.Local.AppendPodLog("line 1", "line 2", "line 3"); err != nil {
			return err
		}
	}

	fctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	stream, err := client.Logs(fctx, pods, "loom-logs-example", corev1.PodLogOptions{Follow: true, Timestamps: false})
	if err != nil {
		return err
	}
	defer stream.Close()
	sc := bufio.NewScanner(stream)
	for n := 0; n < 3 && sc.Scan(); n++ {
		fmt.Println("log:", sc.Text())
	}
	return sc.Err()
}
