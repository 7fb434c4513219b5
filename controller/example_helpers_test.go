package controller_test

import (
	"context"
	"errors"
	"fmt"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/client/clienttest"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// A reconciler holds a finalizer while the object lives, so that it can
// clean up before the object goes. AddFinalizer only changes the object in
// memory; the Update makes it count.
func ExampleAddFinalizer() {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "default", Name: "settings"}}
	if controller.AddFinalizer(cm, "example.com/cleanup") {
		fmt.Println("write it:", cm.Finalizers) // cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	fmt.Println(controller.AddFinalizer(cm, "example.com/cleanup"))
	// Output:
	// write it: [example.com/cleanup]
	// false
}

// Once the object is being deleted and the clean-up is done, the
// reconciler removes its finalizer and writes the object; the server then
// deletes it.
func ExampleRemoveFinalizer() {
	now := metav1.Now()
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{
		Name: "settings", DeletionTimestamp: &now,
		Finalizers: []string{"example.com/cleanup", "other.example.com/keep"},
	}}
	if cm.DeletionTimestamp != nil && controller.RemoveFinalizer(cm, "example.com/cleanup") {
		fmt.Println("write it:", cm.Finalizers) // cms.Update(ctx, cm, metav1.UpdateOptions{})
	}
	// Output: write it: [other.example.com/keep]
}

func ExampleHasFinalizer() {
	cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Finalizers: []string{"example.com/cleanup"}}}
	fmt.Println(controller.HasFinalizer(cm, "example.com/cleanup"), controller.HasFinalizer(cm, "example.com/other"))
	// Output: true false
}

// A Deployment's reconciler makes the ConfigMap it creates its own, so that
// the garbage collector deletes the ConfigMap with the Deployment. The
// owner must be as read from the server: the reference names it by UID.
func ExampleSetControllerReference() {
	owner := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"}}
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-config"}}
	if err := controller.SetControllerReference(owner, owned); err != nil {
		fmt.Println(err)
		return
	}
	ref := owned.OwnerReferences[0]
	fmt.Println(ref.APIVersion, ref.Kind, ref.Name, ref.UID, *ref.Controller, *ref.BlockOwnerDeletion)
	// then: cms.Create(ctx, owned, metav1.CreateOptions{})

	// A second controller is refused.
	other := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "api", UID: "9a2e"}}
	var ae *controller.AlreadyOwnedError
	if err := controller.SetControllerReference(other, owned); errors.As(err, &ae) {
		fmt.Println("refused; controlled by", ae.Owner.Name)
	}
	// Output:
	// apps/v1 Deployment web 6f1c true true
	// refused; controlled by web
}

// An object may have several owners but only one controller; the garbage
// collector deletes it when the last owner is gone.
func ExampleSetOwnerReference() {
	a := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "a", UID: "a1"}}
	b := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "b", UID: "b1"}}
	shared := &corev1.Secret{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "shared"}}
	for _, owner := range []*corev1.ConfigMap{a, b, a} { // a again: no duplicate
		if err := controller.SetOwnerReference(owner, shared); err != nil {
			fmt.Println(err)
			return
		}
	}
	for _, ref := range shared.OwnerReferences {
		fmt.Println(ref.Kind, ref.Name, ref.Controller == nil)
	}
	// Output:
	// ConfigMap a true
	// ConfigMap b true
}

// An Owns-style handler maps an owned object to its controller.
func ExampleGetControllerOf() {
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-config", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "v1", Kind: "Secret", Name: "bundle", UID: "s1"},
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "6f1c", Controller: new(true)},
	}}}
	if ref := controller.GetControllerOf(owned); ref != nil {
		fmt.Println(ref.Kind, owned.Namespace+"/"+ref.Name)
	}
	// Output: Deployment shop/web
}

// IsControlledBy compares UIDs, so an object left over from an earlier
// owner of the same name is not claimed by the new one.
func ExampleIsControlledBy() {
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-config", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "Deployment", Name: "web", UID: "6f1c", Controller: new(true)},
	}}}
	current := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"}}
	recreated := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "77d0"}}
	fmt.Println(controller.IsControlledBy(owned, current), controller.IsControlledBy(owned, recreated))
	// Output: true false
}

// The garbage collector honours an owner reference only if a namespaced
// owner is in its dependent's namespace; a cluster-scoped owner may own
// anything.
func ExampleOwnerScopeError() {
	owner := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"}}
	elsewhere := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "billing", Name: "web-config"}}
	clusterScoped := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "web-reader"}}
	for _, owned := range []client.Object{elsewhere, clusterScoped} {
		var se *controller.OwnerScopeError
		err := controller.SetControllerReference(owner, owned)
		fmt.Println(errors.As(err, &se), err)
	}
	role := &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: "shop-admin", UID: "c1"}}
	fmt.Println(controller.SetControllerReference(role, elsewhere))
	// Output:
	// true controller: Deployment shop/web cannot own billing/web-config: a namespaced owner owns only objects in its namespace
	// true controller: Deployment shop/web cannot own cluster-scoped "web-reader": a namespaced owner owns only objects in its namespace
	// <nil>
}

// exampleClient starts a control plane (etcd and kube-apiserver) for an
// example and returns a ConfigMap client in the default namespace and a
// function that stops it all.
func exampleClient[E any, T interface {
	*E
	client.Object
}]() (*client.Client[T], func(), error) {
	env, err := testenv.Start(context.Background(), testenv.Options{})
	if err != nil {
		return nil, nil, err
	}
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err == nil {
		var rc *rest.Client
		if rc, err = rest.New(cfg, rest.Options{}); err == nil {
			var c *client.Client[T]
			if c, err = client.For[E, T](rc, client.Options{}); err == nil {
				return c.Namespace("default"), func() { rc.CloseIdleConnections(); _ = env.Stop() }, nil
			}
		}
	}
	_ = env.Stop()
	return nil, nil, err
}

// CreateOrUpdate writes only when mutate changed something. mutate sets
// what the reconciler owns and leaves the rest, including what the server
// filled in.
func ExampleCreateOrUpdate() {
	cms, stop, err := exampleClient[corev1.ConfigMap]()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	color := "blue"
	for range 3 {
		cm := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "settings"}}
		res, err := controller.CreateOrUpdate(ctx, cms.ReadWriter(), cm, func(cm *corev1.ConfigMap) error {
			if cm.Data == nil {
				cm.Data = map[string]string{}
			}
			cm.Data["color"] = color
			return nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res, cm.Data["color"])
		if res == controller.OperationUnchanged {
			color = "green"
		}
	}
	// Output:
	// created blue
	// unchanged blue
	// updated green
}

// CreateOrPatch sends only what mutate changed, and writes status through
// the status subresource. kube-apiserver alone (no controllers) leaves a
// Service's status to whoever writes it.
func ExampleCreateOrPatch() {
	svcs, stop, err := exampleClient[corev1.Service]()
	if err != nil {
		fmt.Println(err)
		return
	}
	defer stop()
	ctx := context.Background()

	port, ready := int32(80), metav1.ConditionFalse
	reconcile := func() {
		svc := &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"}}
		res, err := controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc, func(s *corev1.Service) error {
			if len(s.Spec.Ports) == 0 {
				s.Spec.Ports = []corev1.ServicePort{{Name: "http"}}
			}
			s.Spec.Ports[0].Port = port
			controller.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Ready", Status: ready, Reason: "Example"})
			return nil
		})
		if err != nil {
			fmt.Println(err)
			return
		}
		fmt.Println(res, svc.Spec.Ports[0].Port, controller.IsStatusConditionTrue(svc.Status.Conditions, "Ready"))
	}
	reconcile()
	ready = metav1.ConditionTrue
	reconcile()
	port = 8080
	reconcile()
	reconcile()
	// Output:
	// created 80 false
	// updatedStatusOnly 80 true
	// updated 8080 true
	// unchanged 8080 true
}

// Conditions live in the status; SetStatusCondition reports whether the
// status needs writing.
func ExampleSetStatusCondition() {
	var conds []metav1.Condition
	c := metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", Message: "3/3 replicas"}
	fmt.Println(controller.SetStatusCondition(&conds, c))
	fmt.Println(controller.SetStatusCondition(&conds, c)) // the same again: nothing to write
	fmt.Println(len(conds), conds[0].LastTransitionTime.IsZero())
	// Output:
	// true
	// false
	// 1 false
}

// SetObservedStatusCondition records the generation of the spec that the
// condition describes.
func ExampleSetObservedStatusCondition() {
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 4}}
	var conds []metav1.Condition
	controller.SetObservedStatusCondition(&conds, d, metav1.Condition{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available"})
	fmt.Println(conds[0].ObservedGeneration)
	// Output: 4
}

// IsStatusConditionTrueForGeneration ignores a True condition written for an
// older spec.
func ExampleIsStatusConditionTrueForGeneration() {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue, Reason: "Available", ObservedGeneration: 4}}
	d := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web", Generation: 4}}
	fmt.Println(controller.IsStatusConditionTrueForGeneration(conds, d, "Ready"))
	d.Generation = 5 // the spec changed since
	fmt.Println(controller.IsStatusConditionTrue(conds, "Ready"), controller.IsStatusConditionTrueForGeneration(conds, d, "Ready"))
	// Output:
	// true
	// true false
}

func ExampleRemoveStatusCondition() {
	conds := []metav1.Condition{{Type: "Progressing", Status: metav1.ConditionTrue}, {Type: "Ready", Status: metav1.ConditionTrue}}
	fmt.Println(controller.RemoveStatusCondition(&conds, "Progressing"), len(conds), conds[0].Type)
	// Output: true 1 Ready
}

func ExampleFindStatusCondition() {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionFalse, Reason: "Scaling"}}
	if c := controller.FindStatusCondition(conds, "Ready"); c != nil {
		fmt.Println(c.Status, c.Reason)
	}
	fmt.Println(controller.FindStatusCondition(conds, "Degraded") == nil)
	// Output:
	// False Scaling
	// true
}

func ExampleIsStatusConditionTrue() {
	conds := []metav1.Condition{{Type: "Ready", Status: metav1.ConditionTrue}}
	fmt.Println(controller.IsStatusConditionTrue(conds, "Ready"), controller.IsStatusConditionTrue(conds, "Degraded"))
	// Output: true false
}

// Absent and Unknown conditions are neither true nor false.
func ExampleIsStatusConditionFalse() {
	conds := []metav1.Condition{{Type: "Degraded", Status: metav1.ConditionFalse}, {Type: "Ready", Status: metav1.ConditionUnknown}}
	fmt.Println(controller.IsStatusConditionFalse(conds, "Degraded"), controller.IsStatusConditionFalse(conds, "Ready"), controller.IsStatusConditionFalse(conds, "Synced"))
	// Output: true false false
}

func ExampleAlreadyOwnedError() {
	owned := &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web-config", OwnerReferences: []metav1.OwnerReference{
		{APIVersion: "apps/v1", Kind: "StatefulSet", Name: "db", UID: "d1", Controller: new(true)},
	}}}
	owner := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6f1c"}}
	err := controller.SetControllerReference(owner, owned)
	var ae *controller.AlreadyOwnedError
	if errors.As(err, &ae) {
		fmt.Println(ae.Owner.Kind, ae.Owner.Name)
		fmt.Println(err)
	}
	// Output:
	// StatefulSet db
	// controller: shop/web-config is already controlled by apps/v1 StatefulSet "db"
}

// ApplyOwned states the desired Deployment of an owner and applies it
// server-side: no read, no diff. Here a clienttest.Recorder stands for
// the API server, as in a reconciler's unit test.
func ExampleApplyOwned() {
	owner := &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web", UID: "6d1a"},
	}
	desired := &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: "shop", Name: "web"},
		Spec: appsv1.DeploymentSpec{
			Template: corev1.PodTemplateSpec{Spec: corev1.PodSpec{
				Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
			}},
		},
	}
	var server clienttest.Recorder[*appsv1.Deployment]
	if _, err := controller.ApplyOwned(context.Background(), &server, owner, desired, client.ApplyOptions{FieldManager: "web-operator", Force: true}); err != nil {
		fmt.Println(err)
	}
	call := server.Calls()[0]
	fmt.Println(call.Verb, call.Object.Name, "controlled by", controller.GetControllerOf(call.Object).Name)
	// Output:
	// apply web controlled by web
}
