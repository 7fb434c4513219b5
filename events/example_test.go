package events_test

import (
	"context"
	"fmt"
	"time"

	corev1 "k8s.io/api/core/v1"
	eventsv1 "k8s.io/api/events/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/events"
	"github.com/loom-k8s/loom/rest"
)

func ExampleRecorder() {
	cfg, _ := config.Load(config.LoadOptions{Path: exampleEnv().KubeconfigPath}) // a program: config.Load(config.LoadOptions{})
	rc, _ := rest.New(cfg, rest.Options{})
	rec, err := events.New(rc, events.Options{Controller: "example.com/widget-controller"})
	if err != nil {
		fmt.Println(err)
		return
	}
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	go rec.Start(ctx)

	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cm, _ := cms.Namespace("default").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "example-events"}}, metav1.CreateOptions{})
	for range 3 {
		rec.Eventf(cm, corev1.EventTypeNormal, "Reconciled", "config %s is in sync", cm.Name)
	}

	// Events are sent in the background; the three become one Event with a
	// series of three. (A program would not wait for them; this example
	// waits up to a minute, for a slow API server.)
	evs, _ := client.For[eventsv1.Event](rc, client.Options{})
	for deadline := time.Now().Add(time.Minute); time.Now().Before(deadline); time.Sleep(50 * time.Millisecond) {
		l, err := evs.Namespace("default").List(ctx, metav1.ListOptions{FieldSelector: "regarding.name=example-events"})
		if err == nil && len(l.Items) == 1 && l.Items[0].Series != nil && l.Items[0].Series.Count == 3 {
			fmt.Println(l.Items[0].Reason, l.Items[0].Series.Count)
			return
		}
	}
	fmt.Println("not aggregated within a minute")
	// Output: Reconciled 3
}
