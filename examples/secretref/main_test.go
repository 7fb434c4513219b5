package main

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/manager"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// TestSecretRef runs the controller against a real control plane with 40
// Secrets, of which Deployments name three: only those are held in full,
// a change to one rolls its Deployment, and a Secret created after the
// Deployment that names it is picked up.
func TestSecretRef(t *testing.T) {
	env := testenv.New(t, testenv.Options{})
	ctx := t.Context()
	rc, err := env.REST(rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	secrets, _ := client.For[corev1.Secret](rc, client.Options{})
	deps, _ := client.For[appsv1.Deployment](rc, client.Options{})
	secrets, deps = secrets.Namespace("default"), deps.Namespace("default")
	for i := range 40 {
		s := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprintf("s-%d", i)}, Data: map[string][]byte{"v": []byte("0"), "pad": make([]byte, 8192)}}
		if _, err := secrets.Create(ctx, s, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	for name, secret := range map[string]string{"web-1": "s-1", "web-2": "s-2", "web-3": "s-3", "plain": "", "early": "later"} {
		if _, err := deps.Create(ctx, deployment(name, secret), metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}

	cfg, err := env.Config()
	if err != nil {
		t.Fatal(err)
	}
	mgr, err := manager.New(manager.Options{Config: &cfg})
	if err != nil {
		t.Fatal(err)
	}
	if err := setup(mgr); err != nil {
		t.Fatal(err)
	}
	held := manager.CachedClient[corev1.Secret](mgr, cache.InformerForOptions{ReferencedOnly: true}) // the controller's own
	runCtx, stop := context.WithCancel(ctx)
	var wg sync.WaitGroup
	var runErr error
	wg.Go(func() { runErr = mgr.Start(runCtx) })
	t.Cleanup(func() {
		stop()
		wg.Wait()
		if runErr != nil && !errors.Is(runErr, context.Canceled) {
			t.Errorf("manager: %v", runErr)
		}
	})

	hashOf := func(name string) string {
		s, err := secrets.Get(ctx, name, metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		return Hash(s)
	}
	waitHash := func(dep, want string) {
		t.Helper()
		deadline := time.Now().Add(60 * time.Second)
		for {
			d, err := deps.Get(ctx, dep, metav1.GetOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if got := d.Spec.Template.Annotations[HashAnnotation]; got == want {
				return
			} else if time.Now().After(deadline) {
				t.Fatalf("deployment %s: hash %q after 60s, want %q", dep, got, want)
			}
			time.Sleep(20 * time.Millisecond)
		}
	}
	for i := 1; i <= 3; i++ {
		waitHash(fmt.Sprintf("web-%d", i), hashOf(fmt.Sprintf("s-%d", i)))
	}
	if n, all := held.Held(), len(held.Metadata().Indexer().List()); n != 3 || all < 40 {
		t.Fatalf("held %d Secrets in full and %d as metadata, want 3 and at least 40", n, all)
	}

	// A change to a named Secret rolls its Deployment.
	s1, err := secrets.Get(ctx, "s-1", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	s1.Data["v"] = []byte("1")
	if _, err := secrets.Update(ctx, s1, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHash("web-1", hashOf("s-1"))

	// A Secret created after the Deployment that names it.
	later := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Name: "later"}, Data: map[string][]byte{"v": []byte("late")}}
	if _, err := secrets.Create(ctx, later, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	waitHash("early", hashOf("later"))
	if n := held.Held(); n != 4 {
		t.Fatalf("held %d Secrets in full, want the 4 named", n)
	}
	d, err := deps.Get(ctx, "plain", metav1.GetOptions{})
	if err != nil || d.Spec.Template.Annotations[HashAnnotation] != "" {
		t.Fatalf("a Deployment that names no Secret was changed: %v %v", d.Spec.Template.Annotations, err)
	}
}

func deployment(name, secret string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	d := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}}},
			},
		},
	}
	if secret != "" {
		d.Annotations = map[string]string{SecretAnnotation: secret}
	}
	return d
}
