package main

import (
	"context"
	"errors"
	"io"
	"slices"
	"testing"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

func TestSplitStreamFlags(t *testing.T) {
	got := splitStreamFlags([]string{"-it", "pod", "-c", "main", "--", "sh", "-it"})
	want := []string{"-i", "-t", "pod", "-c", "main", "--", "sh", "-it"}
	if !slices.Equal(got, want) {
		t.Fatalf("got %q, want %q", got, want)
	}
	if got := splitStreamFlags([]string{"-n", "ns", "-ti", "-iq"}); !slices.Equal(got, []string{"-n", "ns", "-t", "-i", "-i", "-q"}) {
		t.Fatalf("got %q", got)
	}
}

func TestNamedPort(t *testing.T) {
	pod := &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "web"}, Spec: corev1.PodSpec{Containers: []corev1.Container{
		{Name: "main", Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}}},
	}}}
	for in, want := range map[string]string{"http": "8080", ":http": ":8080", "9000:http": "9000:8080", "80": "80", "1:2": "1:2"} {
		if got, err := namedPort(pod, in); err != nil || got != want {
			t.Errorf("namedPort(%q) = %q, %v; want %q", in, got, err, want)
		}
	}
	if _, err := namedPort(pod, ":grpc"); err == nil {
		t.Error("namedPort(:grpc): no error for a port the pod does not name")
	}
}

func TestStreamCommandsUsage(t *testing.T) {
	for _, args := range [][]string{
		{"exec", "pod"},
		{"exec", "--", "echo"},
		{"exec", "pod", "--protocol", "carrier-pigeon", "--", "echo"},
		{"attach"},
		{"port-forward", "pod"},
		{"port-forward", "svc/web", "80"},
	} {
		if err := run(context.Background(), args, io.Discard, io.Discard); !errors.Is(err, errUsage) {
			t.Errorf("loom %q: %v, want a usage error", args, err)
		}
	}
}
