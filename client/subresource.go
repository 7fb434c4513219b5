package client

import (
	"context"
	"fmt"
	"io"

	corev1 "k8s.io/api/core/v1"
	policyv1 "k8s.io/api/policy/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// Evict asks the API server to evict the named pod, honouring its
// PodDisruptionBudgets: a budget that forbids it now fails with 429.
func Evict(ctx context.Context, pods *Client[*corev1.Pod], name string, opts metav1.DeleteOptions) error {
	res, ns, err := pods.named(ctx, "evict", name)
	if err != nil {
		return err
	}
	ev := &policyv1.Eviction{
		TypeMeta:      metav1.TypeMeta{APIVersion: "policy/v1", Kind: "Eviction"},
		ObjectMeta:    metav1.ObjectMeta{Name: name, Namespace: ns},
		DeleteOptions: &opts,
	}
	return pods.req(pods.rc.Post(), res, ns, asObject).Name(name).SubResource("eviction").Body(ev).Do(ctx, nil)
}

// Bind assigns the named pod to a node, as a scheduler does, through the
// pods/binding subresource.
func Bind(ctx context.Context, pods *Client[*corev1.Pod], name, node string, opts metav1.CreateOptions) error {
	res, ns, err := pods.named(ctx, "bind", name)
	if err != nil {
		return err
	}
	b := &corev1.Binding{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "Binding"},
		ObjectMeta: metav1.ObjectMeta{Name: name, Namespace: ns},
		Target:     corev1.ObjectReference{APIVersion: "v1", Kind: "Node", Name: node},
	}
	return pods.req(pods.rc.Post(), res, ns, asObject).Name(name).SubResource("binding").Options(&opts).Body(b).Do(ctx, nil)
}

// Logs streams the log of the named pod: one container (opts.Container,
// required when the pod has several), following it (opts.Follow), the last
// opts.TailLines lines, since opts.SinceSeconds or opts.SinceTime, of the
// previous instance (opts.Previous), with timestamps (opts.Timestamps). The
// caller reads and closes the stream; cancelling ctx ends it.
func Logs(ctx context.Context, pods *Client[*corev1.Pod], name string, opts corev1.PodLogOptions) (io.ReadCloser, error) {
	res, ns, err := pods.named(ctx, "logs", name)
	if err != nil {
		return nil, err
	}
	rc, err := pods.req(pods.rc.Get(), res, ns, asObject).Name(name).SubResource("log").Options(&opts).Stream(ctx)
	if err != nil {
		return nil, fmt.Errorf("client: logs of pod %s/%s: %w", ns, name, err)
	}
	return rc, nil
}
