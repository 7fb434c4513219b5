package main

import (
	"bytes"
	"context"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

func TestLogsAndScale(t *testing.T) {
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.CloseIdleConnections()
	ctx := t.Context()
	deploys, _ := client.For[appsv1.Deployment](rc, client.Options{})
	one := int32(1)
	labels := map[string]string{"app": "web"}
	if _, err := deploys.Namespace("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web"},
		Spec: appsv1.DeploymentSpec{Replicas: &one, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	var out bytes.Buffer
	if err := run(ctx, []string{"scale", "deploy", "web", "--replicas", "3", "--kubeconfig", env.KubeconfigPath}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "deploy/web scaled to 3\n" {
		t.Fatalf("scale printed %q", out.String())
	}
	d, _ := deploys.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
	if *d.Spec.Replicas != 3 {
		t.Fatalf("replicas %d", *d.Spec.Replicas)
	}
	out.Reset()
	if err := run(ctx, []string{"scale", "configmaps/x", "--replicas", "1", "--kubeconfig", env.KubeconfigPath}, &out, &out); err == nil || !strings.Contains(err.Error(), "no scale subresource") {
		t.Fatalf("scale configmaps: %v", err)
	}

	// Logs of a running pod on the fake node.
	if err := env.AppendPodLog("hello from loom", "second line"); err != nil {
		t.Fatal(err)
	}
	pods, _ := client.For[corev1.Pod](rc, client.Options{})
	var pod string
	wctx, cancel := context.WithTimeout(ctx, time.Minute)
	defer cancel()
	for pod == "" {
		l, err := pods.Namespace("default").List(wctx, metav1.ListOptions{LabelSelector: "app=web"})
		if err != nil {
			t.Fatal(err)
		}
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				pod = p.Name
			}
		}
		if pod == "" {
			select {
			case <-wctx.Done():
				t.Fatal("no running pod")
			case <-time.After(100 * time.Millisecond):
			}
		}
	}
	out.Reset()
	if err := run(ctx, []string{"logs", pod, "--tail", "1", "--kubeconfig", env.KubeconfigPath}, &out, &out); err != nil {
		t.Fatal(err)
	}
	if out.String() != "second line\n" {
		t.Fatalf("logs --tail 1 printed %q", out.String())
	}
	out.Reset()
	if err := run(ctx, []string{"logs", "no-such-pod", "--kubeconfig", env.KubeconfigPath}, &out, &out); err == nil || !strings.Contains(err.Error(), "not found") {
		t.Fatalf("logs of a missing pod: %v", err)
	}
}
