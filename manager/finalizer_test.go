package manager_test

import (
	"context"
	"errors"
	"sync"
	"testing"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/cache"
	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/manager"
)

const finalizer = "loom.dev/cleanup"

// TestFinalizerBlocksDeletionUntilTheControllerIsDone: the controller puts
// a finalizer on every labelled ConfigMap; a delete then only marks the
// object, the controller sees that as an update, does its cleanup once it
// is allowed to, and removes the finalizer, after which the object is gone.
func TestFinalizerBlocksDeletionUntilTheControllerIsDone(t *testing.T) {
	mgr, err := manager.New(manager.Options{Config: new(cfg(t))})
	if err != nil {
		t.Fatal(err)
	}
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](mgr.REST(), client.Options{})
	allow := make(chan struct{}) // closed when the cleanup may finish
	var mu sync.Mutex
	var cleaned []string
	rec := func(ctx context.Context, cm *corev1.ConfigMap) (controller.Result, error) {
		if cm.DeletionTimestamp == nil {
			if controller.HasFinalizer(cm, finalizer) {
				return controller.Result{}, nil
			}
			next := cm.DeepCopy()
			controller.AddFinalizer(next, finalizer)
			_, err := cms.Update(ctx, next, metav1.UpdateOptions{})
			return controller.Result{}, err
		}
		select {
		case <-allow:
		default:
			return controller.Result{}, errCleanupPending // retried with backoff
		}
		mu.Lock()
		cleaned = append(cleaned, cm.Name)
		mu.Unlock()
		next := cm.DeepCopy()
		controller.RemoveFinalizer(next, finalizer)
		_, err := cms.Update(ctx, next, metav1.UpdateOptions{})
		return controller.Result{}, err
	}
	controller.New(mgr, rec, controller.Options{Name: "finalizer", For: cache.InformerForOptions{LabelSelector: "loom.dev/finalized"}})
	mctx, cancel := context.WithCancel(ctx)
	done := make(chan error, 1)
	go func() { done <- mgr.Start(mctx) }()
	defer func() { cancel(); <-done }()

	live := cms.Namespace("default")
	if _, err := live.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "guarded", Labels: map[string]string{"loom.dev/finalized": "yes"}}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	eventually(t, "the controller's finalizer", func() bool {
		cm, err := live.Get(ctx, "guarded", metav1.GetOptions{})
		return err == nil && controller.HasFinalizer(cm, finalizer)
	})
	if err := live.Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The delete only marks the object while the finalizer is there.
	cm, err := live.Get(ctx, "guarded", metav1.GetOptions{})
	if err != nil || cm.DeletionTimestamp == nil {
		t.Fatalf("after delete: %v, %v; want the object marked for deletion and still there", cm, err)
	}
	close(allow)
	eventually(t, "the object to be gone", func() bool {
		_, err := live.Get(ctx, "guarded", metav1.GetOptions{})
		return apierrors.IsNotFound(err)
	})
	mu.Lock()
	defer mu.Unlock()
	if len(cleaned) != 1 || cleaned[0] != "guarded" {
		t.Fatalf("cleanup ran for %v", cleaned)
	}
}

var errCleanupPending = errors.New("cleanup not finished yet")
