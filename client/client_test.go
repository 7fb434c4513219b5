package client_test

import (
	"context"
	"errors"
	"fmt"
	"reflect"
	"strings"
	"sync"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/types"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

// namespace creates a namespace for one test and deletes it afterwards.
func namespace(t *testing.T, rc *rest.Client) string {
	t.Helper()
	nss, err := client.For[corev1.Namespace](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-", "=", "-").Replace(t.Name()))
	if len(name) > 50 {
		name = name[:50]
	}
	name = strings.Trim(name, "-")
	if _, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nss.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	// kube-controller-manager gives every new namespace a "default" service
	// account, which pods need; wait for it.
	sas, _ := client.For[corev1.ServiceAccount](rc, client.Options{})
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		if _, ok, err := client.Optional(sas.Namespace(name).Get(ctx, "default", metav1.GetOptions{})); ok {
			return name
		} else if err != nil && ctx.Err() == nil {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("namespace %s never got its default service account", name)
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// podSpec is bound to a node nobody runs, so that neither the scheduler nor
// kwok changes pods behind a test's back (which would make its updates
// conflict). Tests that want a running pod clear NodeName.
func podSpec() corev1.PodSpec {
	return corev1.PodSpec{NodeName: "no-such-node", Containers: []corev1.Container{{Name: "app", Image: "nginx"}}}
}

func TestCRUDTyped(t *testing.T) {
	for _, ct := range []rest.ContentType{rest.JSON, rest.Protobuf} {
		t.Run(ct.String(), func(t *testing.T) {
			rc := newREST(t, ct)
			ns := namespace(t, rc)
			ctx := t.Context()

			pods, err := client.For[corev1.Pod](rc, client.Options{})
			if err != nil {
				t.Fatal(err)
			}
			pods = pods.Namespace(ns)
			created, err := pods.Create(ctx, &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "p1", Labels: map[string]string{"app": "web"}}, Spec: podSpec()}, metav1.CreateOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if created.UID == "" || created.Namespace != ns || created.Kind != "Pod" {
				t.Fatalf("created %+v", created.ObjectMeta)
			}
			got, err := pods.Get(ctx, "p1", metav1.GetOptions{})
			if err != nil || got.UID != created.UID {
				t.Fatalf("get: %v %v", got, err)
			}
			got.Labels["tier"] = "front"
			updated, err := pods.Update(ctx, got, metav1.UpdateOptions{})
			if err != nil || updated.Labels["tier"] != "front" || updated.ResourceVersion == got.ResourceVersion {
				t.Fatalf("update: %v %v", updated, err)
			}
			list, err := pods.List(ctx, metav1.ListOptions{LabelSelector: "app=web"})
			if err != nil || len(list.Items) != 1 || list.Items[0].Name != "p1" || list.ResourceVersion == "" {
				t.Fatalf("list: %+v %v", list, err)
			}
			if err := pods.Delete(ctx, "p1", metav1.DeleteOptions{GracePeriodSeconds: new(int64)}); err != nil {
				t.Fatal(err)
			}
			if _, ok, err := client.Optional(pods.Get(ctx, "p1", metav1.GetOptions{})); ok || err != nil {
				t.Fatalf("after delete: ok=%v err=%v", ok, err)
			}
			if _, err := pods.Get(ctx, "p1", metav1.GetOptions{}); !apierrors.IsNotFound(err) {
				t.Fatalf("get after delete: %v", err)
			}

			cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
			cm, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c1", Namespace: ns}, Data: map[string]string{"k": "v"}}, metav1.CreateOptions{})
			if err != nil || cm.Data["k"] != "v" {
				t.Fatalf("configmap create (namespace from the object): %v %v", cm, err)
			}
			if _, err := cms.Namespace("other").Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c2", Namespace: ns}}, metav1.CreateOptions{}); err == nil || !strings.Contains(err.Error(), "namespace") {
				t.Fatalf("namespace mismatch not caught: %v", err)
			}
			if _, err := cms.Get(ctx, "c1", metav1.GetOptions{}); err == nil || !strings.Contains(err.Error(), "needs a namespace") {
				t.Fatalf("get without namespace: %v", err)
			}

			deploys, _ := client.For[appsv1.Deployment](rc, client.Options{})
			d, err := deploys.Namespace(ns).Create(ctx, &appsv1.Deployment{
				ObjectMeta: metav1.ObjectMeta{Name: "d1"},
				Spec: appsv1.DeploymentSpec{Replicas: new(int32(2)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "d1"}},
					Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "d1"}}, Spec: podSpec()}},
			}, metav1.CreateOptions{})
			if err != nil || *d.Spec.Replicas != 2 {
				t.Fatalf("deployment: %v %v", d, err)
			}
			// A list's items come without apiVersion and kind; List gives
			// them those of the resource, a group's too.
			dl, err := deploys.Namespace(ns).List(ctx, metav1.ListOptions{})
			if err != nil || len(dl.Items) != 1 || dl.Items[0].APIVersion != "apps/v1" || dl.Items[0].Kind != "Deployment" {
				t.Fatalf("listed deployments: %v %v", dl, err)
			}
			nodes, _ := client.For[corev1.Node](rc, client.Options{})
			if _, err := nodes.Namespace("x").List(ctx, metav1.ListOptions{}); err == nil || !strings.Contains(err.Error(), "cluster-scoped") {
				t.Fatalf("namespace on a cluster-scoped resource: %v", err)
			}
		})
	}
}

func TestProtobufAndJSONAgree(t *testing.T) {
	rcJ, rcP := newREST(t, rest.JSON), newREST(t, rest.Protobuf)
	ns := namespace(t, rcJ)
	pj, _ := client.For[corev1.Pod](rcJ, client.Options{})
	pp, _ := client.For[corev1.Pod](rcP, client.Options{})
	spec := podSpec()
	if _, err := pj.Namespace(ns).Create(t.Context(), &corev1.Pod{ObjectMeta: metav1.ObjectMeta{Name: "same", Labels: map[string]string{"a": "b"}, Annotations: map[string]string{"x": "y"}}, Spec: spec}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	a, err := pj.Namespace(ns).Get(t.Context(), "same", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	b, err := pp.Namespace(ns).Get(t.Context(), "same", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !reflect.DeepEqual(a, b) {
		t.Fatalf("JSON and protobuf reads differ:\n%+v\n%+v", a, b)
	}
	la, err := pj.Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	lb, err := pp.Namespace(ns).List(t.Context(), metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if len(la.Items) != 1 || !reflect.DeepEqual(la.Items, lb.Items) || la.ResourceVersion != lb.ResourceVersion {
		t.Fatalf("JSON and protobuf lists differ:\n%+v\n%+v", la, lb)
	}
}

func TestConflictThenRetry(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	ns := namespace(t, rc)
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	orig, err := cms.Create(t.Context(), &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "counter"}, Data: map[string]string{"n": "0"}}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	fresh := orig.DeepCopy()
	fresh.Data["n"] = "1"
	if _, err := cms.Update(t.Context(), fresh, metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	stale := orig.DeepCopy()
	stale.Data["n"] = "stale"
	if _, err := cms.Update(t.Context(), stale, metav1.UpdateOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: want 409 Conflict, got %v", err)
	}
	// Mutate re-reads and retries when its update conflicts: the first
	// attempt is made stale on purpose by a write in between.
	calls := 0
	got, err := cms.Mutate(t.Context(), "counter", func(cm *corev1.ConfigMap) error {
		calls++
		if calls == 1 {
			other := cm.DeepCopy()
			other.Data["n"] = "2"
			if _, err := cms.Update(t.Context(), other, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
		cm.Data["n"] += "+1"
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if calls != 2 || got.Data["n"] != "2+1" {
		t.Fatalf("mutate ran %d times and stored %q; want 2 and %q", calls, got.Data["n"], "2+1")
	}

	// Many writers incrementing one counter: every increment lands. The
	// budget is generous because eight writers collide on purpose.
	if _, err := cms.Update(t.Context(), func() *corev1.ConfigMap { c := got.DeepCopy(); c.Data["n"] = "0"; return c }(), metav1.UpdateOptions{}); err != nil {
		t.Fatal(err)
	}
	const writers, each = 8, 5
	var wg sync.WaitGroup
	for range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range each {
				err := client.RetryOnConflict(t.Context(), client.Backoff{Steps: 200, Duration: time.Millisecond, Factor: 1, Jitter: 1}, func() error {
					cm, err := cms.Get(t.Context(), "counter", metav1.GetOptions{})
					if err != nil {
						return err
					}
					var n int
					fmt.Sscan(cm.Data["n"], &n)
					cm.Data["n"] = fmt.Sprint(n + 1)
					_, err = cms.Update(t.Context(), cm, metav1.UpdateOptions{})
					return err
				})
				if err != nil {
					t.Error(err)
				}
			}
		}()
	}
	wg.Wait()
	final, err := cms.Get(t.Context(), "counter", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if final.Data["n"] != fmt.Sprint(writers*each) {
		t.Fatalf("counter = %s, want %d", final.Data["n"], writers*each)
	}
}

func TestPatchKinds(t *testing.T) {
	rc := newREST(t, rest.Protobuf)
	ns := namespace(t, rc)
	ctx := t.Context()
	deploys, _ := client.For[appsv1.Deployment](rc, client.Options{})
	deploys = deploys.Namespace(ns)
	_, err := deploys.Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: map[string]string{"a": "1"}},
		Spec: appsv1.DeploymentSpec{Replicas: new(int32(1)), Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
				Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx:1"}, {Name: "side", Image: "busybox"}}}}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	tests := []struct {
		name  string
		pt    types.PatchType
		patch string
		check func(*appsv1.Deployment) error
	}{
		{"json patch", types.JSONPatchType, `[{"op":"replace","path":"/spec/replicas","value":3}]`, func(d *appsv1.Deployment) error {
			if *d.Spec.Replicas != 3 {
				return fmt.Errorf("replicas %d", *d.Spec.Replicas)
			}
			return nil
		}},
		{"merge patch", types.MergePatchType, `{"metadata":{"labels":{"b":"2"}}}`, func(d *appsv1.Deployment) error {
			if d.Labels["a"] != "1" || d.Labels["b"] != "2" {
				return fmt.Errorf("labels %v", d.Labels)
			}
			return nil
		}},
		// A strategic merge patch merges the containers list by name; a
		// merge patch would have replaced it.
		{"strategic merge patch", types.StrategicMergePatchType, `{"spec":{"template":{"spec":{"containers":[{"name":"app","image":"nginx:2"}]}}}}`, func(d *appsv1.Deployment) error {
			c := d.Spec.Template.Spec.Containers
			if len(c) != 2 || c[0].Image != "nginx:2" || c[1].Name != "side" {
				return fmt.Errorf("containers %+v", c)
			}
			return nil
		}},
	}
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			d, err := deploys.Patch(ctx, "web", tt.pt, []byte(tt.patch), metav1.PatchOptions{})
			if err != nil {
				t.Fatal(err)
			}
			if err := tt.check(d); err != nil {
				t.Fatal(err)
			}
		})
	}

	t.Run("server-side apply", func(t *testing.T) {
		cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
		cms = cms.Namespace(ns)
		mine := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "applied"}, Data: map[string]string{"owner": "alice", "a": "1"}}
		if _, err := cms.Apply(ctx, mine, client.ApplyOptions{FieldManager: "alice"}); err != nil {
			t.Fatal(err)
		}
		if mine.Kind != "" {
			t.Fatal("Apply changed the caller's object")
		}
		// bob sets a field alice owns, to another value: conflict.
		theirs := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "applied"}, Data: map[string]string{"owner": "bob", "b": "2"}}
		_, err := cms.Apply(ctx, theirs, client.ApplyOptions{FieldManager: "bob"})
		if !apierrors.IsConflict(err) || !strings.Contains(err.Error(), "alice") {
			t.Fatalf("want a 409 conflict naming alice, got %v", err)
		}
		got, err := cms.Apply(ctx, theirs, client.ApplyOptions{FieldManager: "bob", Force: true})
		if err != nil {
			t.Fatal(err)
		}
		if got.Data["owner"] != "bob" || got.Data["a"] != "1" || got.Data["b"] != "2" {
			t.Fatalf("after forced apply: %v", got.Data)
		}
		managers := map[string]bool{}
		for _, mf := range got.ManagedFields {
			managers[mf.Manager] = true
		}
		if !managers["alice"] || !managers["bob"] {
			t.Fatalf("managed fields %v", managers)
		}
		if _, err := cms.Apply(ctx, theirs, client.ApplyOptions{}); !errors.Is(err, client.ErrNoFieldManager) {
			t.Fatalf("apply without field manager: %v", err)
		}
	})
}

func TestDeleteCollectionAndPreconditions(t *testing.T) {
	rc := newREST(t, rest.JSON)
	ns := namespace(t, rc)
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](rc, client.Options{})
	cms = cms.Namespace(ns)
	for i := range 6 {
		group := "keep"
		if i%2 == 0 {
			group = "drop"
		}
		if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: fmt.Sprint("cm-", i), Labels: map[string]string{"group": group}}}, metav1.CreateOptions{}); err != nil {
			t.Fatal(err)
		}
	}
	if err := cms.DeleteCollection(ctx, metav1.DeleteOptions{}, metav1.ListOptions{LabelSelector: "group=drop"}); err != nil {
		t.Fatal(err)
	}
	left, err := cms.List(ctx, metav1.ListOptions{})
	if err != nil {
		t.Fatal(err)
	}
	for _, cm := range left.Items {
		if cm.Labels["group"] == "drop" {
			t.Errorf("%s survived DeleteCollection", cm.Name)
		}
	}
	keep := 0
	for _, cm := range left.Items {
		if cm.Labels["group"] == "keep" {
			keep++
		}
	}
	if keep != 3 {
		t.Fatalf("%d kept, want 3", keep)
	}
	// A delete with a wrong UID precondition is refused with 409.
	wrong := types.UID("not-the-uid")
	err = cms.Delete(ctx, "cm-1", metav1.DeleteOptions{Preconditions: &metav1.Preconditions{UID: &wrong}})
	if !apierrors.IsConflict(err) {
		t.Fatalf("delete with a wrong UID: want 409, got %v", err)
	}
}

func TestUnknownTypes(t *testing.T) {
	rc := newREST(t, rest.JSON)
	_, err := client.For[struct{ corev1.Pod }](rc, client.Options{})
	var ute *client.UnknownTypeError
	if !errors.As(err, &ute) {
		t.Fatalf("want *UnknownTypeError, got %v", err)
	}
}
