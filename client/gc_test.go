package client_test

import (
	"context"
	"fmt"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/watch"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// ownerWithDependents creates a configmap and n configmaps it owns.
func ownerWithDependents(t *testing.T, cms *client.Client[*corev1.ConfigMap], owner string, n int) []string {
	t.Helper()
	o, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: owner}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	var names []string
	for i := range n {
		name := fmt.Sprintf("%s-dep-%d", owner, i)
		_, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name, OwnerReferences: []metav1.OwnerReference{{
			APIVersion: "v1", Kind: "ConfigMap", Name: o.Name, UID: o.UID, BlockOwnerDeletion: new(true),
		}}}}, metav1.CreateOptions{})
		if err != nil {
			t.Fatal(err)
		}
		names = append(names, name)
	}
	return names
}

// waitFor polls cond until it holds or a minute passes.
func waitFor(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatal(err)
		}
		if ok {
			return
		}
		select {
		case <-ctx.Done():
			t.Fatalf("timed out waiting for %s", what)
		case <-time.After(100 * time.Millisecond):
		}
	}
}

func TestPropagationPolicies(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	ns := namespace(t, rc)
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)

	t.Run("foreground deletes dependents before the owner", func(t *testing.T) {
		deps := ownerWithDependents(t, cms, "fg", 3)
		start, err := cms.List(ctx, metav1.ListOptions{})
		if err != nil {
			t.Fatal(err)
		}
		w, err := cms.Watch(ctx, metav1.ListOptions{ResourceVersion: start.ResourceVersion})
		if err != nil {
			t.Fatal(err)
		}
		defer w.Stop()
		if err := cms.Delete(ctx, "fg", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationForeground)}); err != nil {
			t.Fatal(err)
		}
		var order []string
		for {
			ev, err := w.Next()
			if err != nil {
				t.Fatalf("watch ended before the owner was deleted: %v (deleted so far %v)", err, order)
			}
			if ev.Type != watch.Deleted {
				continue
			}
			order = append(order, ev.Object.Name)
			if ev.Object.Name == "fg" {
				break
			}
		}
		if len(order) != len(deps)+1 {
			t.Fatalf("deleted %v; want every dependent, then the owner", order)
		}
	})

	t.Run("orphan keeps the dependents", func(t *testing.T) {
		deps := ownerWithDependents(t, cms, "or", 2)
		if err := cms.Delete(ctx, "or", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationOrphan)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the owner to go and its dependents to lose their owner reference", func() (bool, error) {
			if _, ok, err := client.Optional(cms.Get(ctx, "or", metav1.GetOptions{})); ok || err != nil {
				return false, err
			}
			for _, d := range deps {
				cm, err := cms.Get(ctx, d, metav1.GetOptions{})
				if err != nil {
					return false, err // a dependent deleted: orphaning failed
				}
				if len(cm.OwnerReferences) != 0 {
					return false, nil
				}
			}
			return true, nil
		})
	})

	t.Run("background deletes the dependents after the owner", func(t *testing.T) {
		deps := ownerWithDependents(t, cms, "bg", 2)
		if err := cms.Delete(ctx, "bg", metav1.DeleteOptions{PropagationPolicy: new(metav1.DeletePropagationBackground)}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, "the garbage collector to delete the dependents", func() (bool, error) {
			for _, d := range deps {
				if _, ok, err := client.Optional(cms.Get(ctx, d, metav1.GetOptions{})); ok || err != nil {
					return false, err
				}
			}
			return true, nil
		})
	})
}
