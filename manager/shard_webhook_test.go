package manager_test

import (
	"context"
	"strconv"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/shard"
)

// TestShardWebhook: with the assignment webhook registered, a new object
// of a sharded kind comes back from its create already labelled with its
// bucket (the leader's watch would label it only afterwards), and an
// object whose bucket label is removed gets it again in the same update.
// An owned object (a Secret) gets its owner's bucket. An object created
// with a bucket label already, as a sharded manager's cached clients write
// it, is not sent to the webhook at all.
func TestShardWebhook(t *testing.T) {
	const ns, ring = "shard-hook", "hook"
	c := cfg(t)
	rc, err := rest.New(c, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	ensureNamespace(t, rc, ns)
	cmRes := client.Resource{Resource: schema.GroupVersionResource{Version: "v1", Resource: "configmaps"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "ConfigMap"}, Namespaced: true}
	url := "https://placeholder/shard-" + ring // the manager injects its address and CA
	secretRes := client.Resource{Resource: schema.GroupVersionResource{Version: "v1", Resource: "secrets"}, Kind: schema.GroupVersionKind{Version: "v1", Kind: "Secret"}, Namespaced: true}
	hook := shard.MutatingWebhook(ring, []client.Resource{cmRes, secretRes}, admissionregistrationv1.WebhookClientConfig{URL: &url})
	// Only this test's namespace: the shared control plane has others.
	hook.NamespaceSelector = &metav1.LabelSelector{MatchLabels: map[string]string{"kubernetes.io/metadata.name": ns}}
	mwcs, _ := client.For[admissionregistrationv1.MutatingWebhookConfiguration](rc, client.Options{})
	if _, err := mwcs.Create(t.Context(), &admissionregistrationv1.MutatingWebhookConfiguration{
		ObjectMeta: metav1.ObjectMeta{Name: "shard-hook"},
		Webhooks:   []admissionregistrationv1.MutatingWebhook{hook},
	}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = mwcs.Delete(context.Background(), "shard-hook", metav1.DeleteOptions{}) })

	mgr, err := manager.New(manager.Options{
		Config: &c, Namespace: ns, Logger: testLogger(t, "h1"),
		LeaderElection: manager.LeaderElection{LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond},
		Sharding: manager.Sharding{Ring: ring, Namespace: ns, Identity: "h1", Kinds: []schema.GroupKind{{Kind: "ConfigMap"}, {Kind: "Secret"}},
			LeaseDuration: 3 * time.Second, RenewDeadline: 2 * time.Second, RetryPeriod: 300 * time.Millisecond},
	})
	if err != nil {
		t.Fatal(err)
	}
	srv, err := mgr.Webhooks(t.Context(), manager.WebhookOptions{Addr: "127.0.0.1:0", LocalURL: true, MutatingConfigs: []string{"shard-hook"}, CertDir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	if path, err := mgr.ShardWebhook(srv); err != nil || path != "/shard-"+ring {
		t.Fatalf("ShardWebhook: %q, %v", path, err)
	}
	ctrl := controller.New[corev1.ConfigMap](mgr, func(context.Context, *corev1.ConfigMap) (controller.Result, error) {
		return controller.Result{}, nil
	}, controller.Options{})
	ctrl.Owns(manager.CachedClient[corev1.Secret](mgr))
	r := &replica{id: "h1", mgr: mgr, done: make(chan error, 1)}
	ctx, cancel := context.WithCancel(context.Background())
	r.cancel = cancel
	go func() { r.done <- mgr.Start(ctx) }()
	t.Cleanup(func() { r.stop(t) })

	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	bucketOf := func(cm *corev1.ConfigMap) string {
		return strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, cm)))
	}
	// The webhook answers once the CA is injected; until then creates
	// pass unlabelled (failurePolicy Ignore).
	i := 0
	eventually(t, "a create labelled by the webhook", func() bool {
		i++
		cm, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "probe-" + strconv.Itoa(i)}}, metav1.CreateOptions{})
		return err == nil && cm.Labels[shard.BucketLabel(ring)] == bucketOf(cm)
	})
	cm, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "labelled-at-create", Labels: map[string]string{"app": "x"}}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Labels[shard.BucketLabel(ring)]; got != bucketOf(cm) || cm.Labels["app"] != "x" {
		t.Fatalf("labels after create: %v, want the bucket %s and app=x", cm.Labels, bucketOf(cm))
	}
	delete(cm.Labels, shard.BucketLabel(ring))
	cm, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if got := cm.Labels[shard.BucketLabel(ring)]; got != bucketOf(cm) {
		t.Fatalf("labels after an update removed the bucket: %v, want the bucket %s back", cm.Labels, bucketOf(cm))
	}
	// The webhook's object selector leaves out objects that have the
	// label, so the API server does not call it for them. A wrong bucket
	// shows it: the webhook would have put the right one.
	pre := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "labelled-before-create"}}
	b, _ := strconv.Atoi(bucketOf(pre))
	wrong := strconv.Itoa((b + 1) % shard.Buckets)
	pre.Labels = map[string]string{shard.BucketLabel(ring): wrong}
	if pre, err = cms.Create(t.Context(), pre, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	if got := pre.Labels[shard.BucketLabel(ring)]; got != wrong {
		t.Fatalf("an object created with a bucket label has %q after create, want %q: the webhook was called", got, wrong)
	}
	secrets, _ := client.For[corev1.Secret](rc, client.Options{})
	sec := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "owned", Namespace: ns}}
	if err := controller.SetControllerReference(cm, sec); err != nil {
		t.Fatal(err)
	}
	sec, err = secrets.Namespace(ns).Create(t.Context(), sec, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	want := strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "Secret"}, sec)))
	if got := sec.Labels[shard.BucketLabel(ring)]; got != want {
		t.Fatalf("an owned Secret's labels after create: %v, want the bucket %s", sec.Labels, want)
	}
	if want != strconv.Itoa(shard.Bucket(shard.Key(schema.GroupKind{Kind: "ConfigMap"}, cm))) {
		t.Fatalf("the Secret's bucket %s is not its owner's", want)
	}
}
