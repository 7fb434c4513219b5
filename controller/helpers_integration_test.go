package controller_test

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/controller"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// TestHelpersIntegration runs the helpers against kube-apiserver, with
// kube-controller-manager for the garbage collector. One control plane
// serves every subtest; each subtest works in its own namespace.
func TestHelpersIntegration(t *testing.T) {
	rc := restForEnv(t, testenv.Options{Controllers: true})
	h := &helperEnv{rc: rc}

	t.Run("garbage collector follows owner references", h.testGarbageCollection)
	t.Run("garbage collector ignores a cross-namespace owner", h.testCrossNamespaceOwner)
	t.Run("SetControllerReference refusals", h.testControllerRefusals)
	t.Run("CreateOrUpdate", h.testCreateOrUpdate)
	t.Run("CreateOrPatch Deployment", h.testCreateOrPatchDeployment)
	t.Run("CreateOrPatch status subresource", h.testCreateOrPatchStatus)
	t.Run("CreateOrPatch unstructured", h.testCreateOrPatchUnstructured)
	t.Run("ApplyOwned", h.testApplyOwned)
	t.Run("finalizer blocks deletion", h.testFinalizer)
}

type helperEnv struct{ rc *rest.Client }

// clientFor returns a client for E in namespace ns ("" for cluster-scoped
// resources).
func clientFor[E any, T interface {
	*E
	client.Object
}](t *testing.T, h *helperEnv, ns string, opts client.Options) *client.Client[T] {
	t.Helper()
	c, err := client.For[E, T](h.rc, opts)
	if err != nil {
		t.Fatal(err)
	}
	if ns != "" {
		c = c.Namespace(ns)
	}
	return c
}

// namespace creates a namespace named after the test and suffix, deleted
// after the test.
func (h *helperEnv) namespace(t *testing.T, suffix string) string {
	t.Helper()
	nss := clientFor[corev1.Namespace](t, h, "", client.Options{})
	name := strings.ToLower(strings.NewReplacer("/", "-", "_", "-", " ", "-").Replace(t.Name()))
	name = strings.Trim(name[max(0, len(name)-50):], "-") + suffix
	if _, err := nss.Create(t.Context(), &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: name}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = nss.Delete(context.Background(), name, metav1.DeleteOptions{}) })
	return name
}

// waitUntil polls cond every 100 ms until it holds, for at most a minute.
func waitUntil(t *testing.T, what string, cond func() (bool, error)) {
	t.Helper()
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		ok, err := cond()
		if err != nil {
			t.Fatalf("waiting for %s: %v", what, err)
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

// gone reports whether none of the named objects exists.
func gone[T client.Object](ctx context.Context, c *client.Client[T], names ...string) (bool, error) {
	for _, n := range names {
		if _, ok, err := client.Optional(c.Get(ctx, n, metav1.GetOptions{})); ok || err != nil {
			return false, err
		}
	}
	return true, nil
}

func mustCreate[T client.Object](t *testing.T, c *client.Client[T], obj T) T {
	t.Helper()
	out, err := c.Create(t.Context(), obj, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func cm(name string) *corev1.ConfigMap {
	return &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: name}}
}

// webDeployment is a Deployment of no replicas: the deployment controller
// keeps a ReplicaSet for it, but no Pods are needed.
func webDeployment(ns, name string) *appsv1.Deployment {
	labels := map[string]string{"app": name}
	return &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: name},
		Spec: appsv1.DeploymentSpec{
			Replicas: new(int32(0)),
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "app", Image: "nginx"}}},
			},
		},
	}
}

// testGarbageCollection: references set by SetControllerReference and
// SetOwnerReference, written by Create, make the garbage collector delete
// the owned ConfigMaps once every owner is gone, whether the owner is a
// ConfigMap, a Deployment or a cluster-scoped ClusterRole.
func (h *helperEnv) testGarbageCollection(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	cms := clientFor[corev1.ConfigMap](t, h, ns, client.Options{})
	deps := clientFor[appsv1.Deployment](t, h, ns, client.Options{})
	roles := clientFor[rbacv1.ClusterRole](t, h, "", client.Options{})

	ownerCM := mustCreate(t, cms, cm("owner"))
	ownerDep := mustCreate(t, deps, webDeployment(ns, "web"))
	ownerRole := mustCreate(t, roles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-owner"}})
	t.Cleanup(func() { _ = roles.Delete(context.Background(), ownerRole.Name, metav1.DeleteOptions{}) })

	create := func(name string, set func(owned *corev1.ConfigMap) error) {
		t.Helper()
		owned := cm(name)
		owned.Namespace = ns // scope is read from the namespace
		if err := set(owned); err != nil {
			t.Fatal(err)
		}
		mustCreate(t, cms, owned)
	}
	create("of-cm", func(o *corev1.ConfigMap) error { return controller.SetControllerReference(ownerCM, o) })
	create("of-dep", func(o *corev1.ConfigMap) error { return controller.SetControllerReference(ownerDep, o) })
	create("of-both", func(o *corev1.ConfigMap) error {
		if err := controller.SetControllerReference(ownerDep, o); err != nil {
			return err
		}
		return controller.SetOwnerReference(ownerCM, o)
	})
	create("of-role", func(o *corev1.ConfigMap) error { return controller.SetControllerReference(ownerRole, o) })

	got, err := cms.Get(ctx, "of-dep", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if !controller.IsControlledBy(got, ownerDep) || controller.IsControlledBy(got, ownerCM) {
		t.Fatalf("of-dep: IsControlledBy wrong; ownerReferences %+v", got.OwnerReferences)
	}

	// The ConfigMap owner goes: its only dependent goes; the one the
	// Deployment also owns stays.
	if err := cms.Delete(ctx, "owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "of-cm to be collected", func() (bool, error) { return gone(ctx, cms, "of-cm") })
	if _, ok, err := client.Optional(cms.Get(ctx, "of-both", metav1.GetOptions{})); !ok || err != nil {
		t.Fatalf("of-both was collected while the Deployment still owns it (err %v)", err)
	}

	// The Deployment goes: both of its dependents go.
	if err := deps.Delete(ctx, "web", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "of-dep and of-both to be collected", func() (bool, error) { return gone(ctx, cms, "of-dep", "of-both") })

	// A cluster-scoped owner may own a namespaced object.
	if _, ok, err := client.Optional(cms.Get(ctx, "of-role", metav1.GetOptions{})); !ok || err != nil {
		t.Fatalf("of-role was collected while its ClusterRole exists (err %v)", err)
	}
	if err := roles.Delete(ctx, ownerRole.Name, metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "of-role to be collected", func() (bool, error) { return gone(ctx, cms, "of-role") })
}

// testCrossNamespaceOwner shows what the namespace check prevents: the
// garbage collector treats an owner in another namespace as absent and
// deletes the "owned" object although the owner exists.
func (h *helperEnv) testCrossNamespaceOwner(t *testing.T) {
	ctx := t.Context()
	nsA, nsB := h.namespace(t, "-a"), h.namespace(t, "-b")
	owner := mustCreate(t, clientFor[corev1.ConfigMap](t, h, nsA, client.Options{}), cm("owner"))

	owned := cm("owned")
	owned.Namespace = nsB
	var se *controller.OwnerScopeError
	if err := controller.SetControllerReference(owner, owned); !errors.As(err, &se) {
		t.Fatalf("SetControllerReference across namespaces: %v, want *OwnerScopeError", err)
	}
	// Write the reference anyway, by hand.
	owned.OwnerReferences = []metav1.OwnerReference{{APIVersion: "v1", Kind: "ConfigMap", Name: owner.Name, UID: owner.UID}}
	cmsB := clientFor[corev1.ConfigMap](t, h, nsB, client.Options{})
	mustCreate(t, cmsB, owned)
	waitUntil(t, "the garbage collector to delete the object with a cross-namespace owner", func() (bool, error) {
		return gone(ctx, cmsB, "owned")
	})
}

// testControllerRefusals: with objects as read from the server,
// SetControllerReference refuses a second controller, an owner in another
// namespace and a namespaced owner of a cluster-scoped object, and leaves
// the object as it was.
func (h *helperEnv) testControllerRefusals(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	cms := clientFor[corev1.ConfigMap](t, h, ns, client.Options{})
	deps := clientFor[appsv1.Deployment](t, h, ns, client.Options{})
	roles := clientFor[rbacv1.ClusterRole](t, h, "", client.Options{})

	first := mustCreate(t, deps, webDeployment(ns, "first"))
	second := mustCreate(t, deps, webDeployment(ns, "second"))
	owned := cm("owned")
	owned.Namespace = ns
	if err := controller.SetControllerReference(first, owned); err != nil {
		t.Fatal(err)
	}
	owned = mustCreate(t, cms, owned)

	// Read back: the reference the server stored.
	ref := controller.GetControllerOf(owned)
	if ref == nil || ref.APIVersion != "apps/v1" || ref.Kind != "Deployment" || ref.UID != first.UID ||
		ref.BlockOwnerDeletion == nil || !*ref.BlockOwnerDeletion {
		t.Fatalf("stored controller reference = %+v", ref)
	}
	// Setting the same controller again is a no-op.
	if err := controller.SetControllerReference(first, owned); err != nil || len(owned.OwnerReferences) != 1 {
		t.Fatalf("same controller again: %v, %+v", err, owned.OwnerReferences)
	}

	var ae *controller.AlreadyOwnedError
	if err := controller.SetControllerReference(second, owned); !errors.As(err, &ae) || ae.Owner.UID != first.UID {
		t.Fatalf("second controller: %v, want *AlreadyOwnedError naming %q", err, first.Name)
	}
	if !controller.IsControlledBy(owned, first) {
		t.Fatal("the refused call changed the controller")
	}

	otherNS := h.namespace(t, "-x")
	foreign := mustCreate(t, clientFor[appsv1.Deployment](t, h, otherNS, client.Options{}), webDeployment(otherNS, "foreign"))
	fresh := cm("fresh")
	fresh.Namespace = ns
	var se *controller.OwnerScopeError
	if err := controller.SetControllerReference(foreign, fresh); !errors.As(err, &se) || se.OwnedNamespace != ns {
		t.Fatalf("cross-namespace owner: %v, want *OwnerScopeError", err)
	}

	role := mustCreate(t, roles, &rbacv1.ClusterRole{ObjectMeta: metav1.ObjectMeta{Name: ns + "-role"}})
	t.Cleanup(func() { _ = roles.Delete(context.Background(), role.Name, metav1.DeleteOptions{}) })
	if err := controller.SetControllerReference(first, role); !errors.As(err, &se) || se.OwnedNamespace != "" {
		t.Fatalf("namespaced owner of a cluster-scoped object: %v, want *OwnerScopeError", err)
	}
	if len(role.OwnerReferences) != 0 || len(fresh.OwnerReferences) != 0 {
		t.Fatal("a refused call changed the object")
	}
	if _, err := cms.Get(ctx, "owned", metav1.GetOptions{}); err != nil {
		t.Fatal(err)
	}
}

// testCreateOrUpdate: Created, then Unchanged (no write), then Updated,
// with the server's state checked each time; a mutate that renames the
// object and a stale read both fail without writing.
func (h *helperEnv) testCreateOrUpdate(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	cms := clientFor[corev1.ConfigMap](t, h, ns, client.Options{})
	want := map[string]string{"color": "blue"}
	setData := func(c *corev1.ConfigMap) error { c.Data = want; return nil }

	obj := cm("settings") // no namespace: the client's
	res, err := controller.CreateOrUpdate(ctx, cms.ReadWriter(), obj, setData)
	if err != nil || res != controller.OperationCreated {
		t.Fatalf("first call: %q, %v; want %q", res, err, controller.OperationCreated)
	}
	if obj.UID == "" || obj.ResourceVersion == "" {
		t.Fatal("obj does not hold the created object")
	}
	rv := obj.ResourceVersion

	obj = cm("settings")
	if res, err = controller.CreateOrUpdate(ctx, cms.ReadWriter(), obj, setData); err != nil || res != controller.OperationUnchanged {
		t.Fatalf("second call: %q, %v; want %q", res, err, controller.OperationUnchanged)
	}
	if obj.ResourceVersion != rv {
		t.Fatalf("unchanged call: resourceVersion %s, want %s", obj.ResourceVersion, rv)
	}

	want = map[string]string{"color": "green"}
	obj = &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "settings"}}
	if res, err = controller.CreateOrUpdate(ctx, cms.ReadWriter(), obj, setData); err != nil || res != controller.OperationUpdated {
		t.Fatalf("third call: %q, %v; want %q", res, err, controller.OperationUpdated)
	}
	stored, err := cms.Get(ctx, "settings", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if stored.Data["color"] != "green" || stored.ResourceVersion == rv || obj.ResourceVersion != stored.ResourceVersion {
		t.Fatalf("stored %v at %s (obj at %s); want color green, a new resourceVersion", stored.Data, stored.ResourceVersion, obj.ResourceVersion)
	}
	rv = stored.ResourceVersion

	rename := func(c *corev1.ConfigMap) error { c.Name = "other"; return nil }
	if _, err = controller.CreateOrUpdate(ctx, cms.ReadWriter(), cm("settings"), rename); !errors.Is(err, controller.ErrKeyChanged) {
		t.Fatalf("renaming mutate: %v, want ErrKeyChanged", err)
	}
	if _, err = controller.CreateOrUpdate(ctx, cms.ReadWriter(), cm("fresh"), rename); !errors.Is(err, controller.ErrKeyChanged) {
		t.Fatalf("renaming mutate on create: %v, want ErrKeyChanged", err)
	}
	if ok, _ := gone(ctx, cms, "fresh", "other"); !ok {
		t.Fatal("a renaming mutate created something")
	}

	// Another writer between the read and the write: the update is
	// conditional, so it conflicts instead of overwriting.
	interfere := func(c *corev1.ConfigMap) error {
		if _, err := cms.Mutate(ctx, "settings", func(o *corev1.ConfigMap) error { o.Data["size"] = "L"; return nil }); err != nil {
			return err
		}
		c.Data = map[string]string{"color": "red"}
		return nil
	}
	if _, err = controller.CreateOrUpdate(ctx, cms.ReadWriter(), cm("settings"), interfere); !apierrors.IsConflict(err) {
		t.Fatalf("stale update: %v, want a conflict", err)
	}
	stored, _ = cms.Get(ctx, "settings", metav1.GetOptions{})
	if stored.Data["size"] != "L" || stored.Data["color"] != "green" {
		t.Fatalf("after the conflict: %v", stored.Data)
	}
}

// testCreateOrPatchDeployment: Created, Unchanged, Updated on a
// Deployment's spec; the patch carries only what mutate changed, so a
// concurrent writer's label survives.
func (h *helperEnv) testCreateOrPatchDeployment(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	deps := clientFor[appsv1.Deployment](t, h, ns, client.Options{})
	replicas := int32(0)
	mutate := func(d *appsv1.Deployment) error {
		want := webDeployment(ns, "web")
		d.Spec.Selector = want.Spec.Selector // immutable once set; the same value
		d.Spec.Template.Labels = want.Spec.Template.Labels
		if len(d.Spec.Template.Spec.Containers) == 0 {
			d.Spec.Template.Spec.Containers = want.Spec.Template.Spec.Containers
		}
		d.Spec.Replicas = &replicas
		return nil
	}

	obj := &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if res, err := controller.CreateOrPatch(ctx, deps.ReadWriter(), obj, mutate); err != nil || res != controller.OperationCreated {
		t.Fatalf("create: %q, %v", res, err)
	}
	if res, err := controller.CreateOrPatch(ctx, deps.ReadWriter(), &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}, mutate); err != nil || res != controller.OperationUnchanged {
		t.Fatalf("again: %q, %v; want %q", res, err, controller.OperationUnchanged)
	}

	replicas = 2
	interfere := func(d *appsv1.Deployment) error {
		if _, err := deps.Mutate(ctx, "web", func(o *appsv1.Deployment) error {
			o.Labels = map[string]string{"team": "blue"}
			return nil
		}); err != nil {
			return err
		}
		return mutate(d)
	}
	obj = &appsv1.Deployment{ObjectMeta: metav1.ObjectMeta{Name: "web"}}
	if res, err := controller.CreateOrPatch(ctx, deps.ReadWriter(), obj, interfere); err != nil || res != controller.OperationUpdated {
		t.Fatalf("scale: %q, %v; want %q", res, err, controller.OperationUpdated)
	}
	stored, err := deps.Get(ctx, "web", metav1.GetOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if *stored.Spec.Replicas != 2 || stored.Labels["team"] != "blue" || stored.Generation != 2 {
		t.Fatalf("stored: replicas %d, labels %v, generation %d; want 2, the concurrent label, generation 2",
			*stored.Spec.Replicas, stored.Labels, stored.Generation)
	}
	if *obj.Spec.Replicas != 2 || obj.Labels["team"] != "blue" {
		t.Fatal("obj does not hold the patched object")
	}
}

// testCreateOrPatchStatus: on a typed resource with a status subresource
// that no controller writes (a Service, as kube-controller-manager has no
// load-balancer controller), status set on create is stored, and each
// kind of change gives its OperationResult.
func (h *helperEnv) testCreateOrPatchStatus(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	svcs := clientFor[corev1.Service](t, h, ns, client.Options{})
	port := int32(80)
	ready := metav1.ConditionTrue
	mutate := func(s *corev1.Service) error {
		// Change the port in place: replacing the list would drop the
		// fields the server defaulted (protocol, targetPort), a change
		// each time.
		if len(s.Spec.Ports) == 0 {
			s.Spec.Ports = []corev1.ServicePort{{Name: "http"}}
		}
		s.Spec.Ports[0].Port = port
		controller.SetStatusCondition(&s.Status.Conditions, metav1.Condition{Type: "Ready", Status: ready, Reason: "Test"})
		return nil
	}
	check := func(step string, want controller.OperationResult, res controller.OperationResult, err error) *corev1.Service {
		t.Helper()
		if err != nil || res != want {
			t.Fatalf("%s: %q, %v; want %q", step, res, err, want)
		}
		s, err := svcs.Get(ctx, "api", metav1.GetOptions{})
		if err != nil {
			t.Fatal(err)
		}
		if s.Spec.Ports[0].Port != port || controller.FindStatusCondition(s.Status.Conditions, "Ready") == nil ||
			controller.FindStatusCondition(s.Status.Conditions, "Ready").Status != ready {
			t.Fatalf("%s: stored port %d, conditions %+v; want port %d, Ready %s", step, s.Spec.Ports[0].Port, s.Status.Conditions, port, ready)
		}
		return s
	}
	svc := func() *corev1.Service { return &corev1.Service{ObjectMeta: metav1.ObjectMeta{Name: "api"}} }

	res, err := controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc(), mutate)
	check("create with status", controller.OperationCreated, res, err)
	res, err = controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc(), mutate)
	check("again", controller.OperationUnchanged, res, err)
	ready = metav1.ConditionFalse
	res, err = controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc(), mutate)
	check("status only", controller.OperationUpdatedStatusOnly, res, err)
	port, ready = 8080, metav1.ConditionTrue
	res, err = controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc(), mutate)
	check("spec and status", controller.OperationUpdatedStatus, res, err)
	port = 9090
	res, err = controller.CreateOrPatch(ctx, svcs.ReadWriter(), svc(), mutate)
	check("spec only", controller.OperationUpdated, res, err)
}

var (
	crdResource = client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiextensions.k8s.io", Version: "v1", Resource: "customresourcedefinitions"},
		Kind:     schema.GroupVersionKind{Group: "apiextensions.k8s.io", Version: "v1", Kind: "CustomResourceDefinition"},
	}
	// Gizmos have a status subresource; gadgets do not.
	gizmoResource = client.Resource{
		Resource:   schema.GroupVersionResource{Group: "helpers.loom.dev", Version: "v1", Resource: "gizmos"},
		Kind:       schema.GroupVersionKind{Group: "helpers.loom.dev", Version: "v1", Kind: "Gizmo"},
		Namespaced: true,
	}
	gadgetResource = client.Resource{
		Resource:   schema.GroupVersionResource{Group: "helpers.loom.dev", Version: "v1", Resource: "gadgets"},
		Kind:       schema.GroupVersionKind{Group: "helpers.loom.dev", Version: "v1", Kind: "Gadget"},
		Namespaced: true,
	}
)

// installCRD installs a CRD for r, with a status subresource or not, and
// waits until it serves.
func (h *helperEnv) installCRD(t *testing.T, r client.Resource, status bool) {
	t.Helper()
	subresources := `{}`
	if status {
		subresources = `{"status": {}}`
	}
	crd := fmt.Sprintf(`{"apiVersion":"apiextensions.k8s.io/v1","kind":"CustomResourceDefinition",
	 "metadata":{"name":"%[1]s.%[2]s"},
	 "spec":{"group":"%[2]s","scope":"Namespaced","names":{"plural":"%[1]s","kind":"%[3]s"},
	  "versions":[{"name":"v1","served":true,"storage":true,"subresources":%[4]s,
	   "schema":{"openAPIV3Schema":{"type":"object","properties":{
	    "spec":{"type":"object","x-kubernetes-preserve-unknown-fields":true},
	    "status":{"type":"object","x-kubernetes-preserve-unknown-fields":true}}}}}]}}`,
		r.Resource.Resource, r.Resource.Group, r.Kind.Kind, subresources)
	var obj unstructured.Unstructured
	if err := json.Unmarshal([]byte(crd), &obj.Object); err != nil {
		t.Fatal(err)
	}
	crds := clientFor[unstructured.Unstructured](t, h, "", client.Options{Resource: crdResource})
	if _, err := crds.Create(t.Context(), &obj, metav1.CreateOptions{}); err != nil && !apierrors.IsAlreadyExists(err) {
		t.Fatal(err)
	}
	objs := clientFor[unstructured.Unstructured](t, h, "default", client.Options{Resource: r})
	waitUntil(t, r.Resource.Resource+" to be served", func() (bool, error) {
		_, err := objs.List(t.Context(), metav1.ListOptions{})
		return err == nil, nil
	})
}

// testCreateOrPatchUnstructured: CreateOrPatch on custom resources, with
// and without a status subresource.
func (h *helperEnv) testCreateOrPatchUnstructured(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	h.installCRD(t, gizmoResource, true)
	h.installCRD(t, gadgetResource, false)

	for _, r := range []client.Resource{gizmoResource, gadgetResource} {
		t.Run(r.Resource.Resource, func(t *testing.T) {
			objs := clientFor[unstructured.Unstructured](t, h, ns, client.Options{Resource: r})
			size, phase := int64(1), "Pending"
			mutate := func(u *unstructured.Unstructured) error {
				if err := unstructured.SetNestedField(u.Object, size, "spec", "size"); err != nil {
					return err
				}
				return unstructured.SetNestedField(u.Object, phase, "status", "phase")
			}
			newObj := func() *unstructured.Unstructured {
				u := &unstructured.Unstructured{}
				u.SetGroupVersionKind(r.Kind)
				u.SetName("one")
				return u
			}
			steps := []struct {
				name  string
				size  int64
				phase string
				want  controller.OperationResult
			}{
				{"create with status", 1, "Pending", controller.OperationCreated},
				{"again", 1, "Pending", controller.OperationUnchanged},
				{"status only", 1, "Running", controller.OperationUpdatedStatusOnly},
				{"spec and status", 2, "Scaling", controller.OperationUpdatedStatus},
				{"spec only", 3, "Scaling", controller.OperationUpdated},
			}
			for _, s := range steps {
				size, phase = s.size, s.phase
				obj := newObj()
				res, err := controller.CreateOrPatch(ctx, objs.ReadWriter(), obj, mutate)
				if err != nil || res != s.want {
					t.Fatalf("%s: %q, %v; want %q", s.name, res, err, s.want)
				}
				stored, err := objs.Get(ctx, "one", metav1.GetOptions{})
				if err != nil {
					t.Fatal(err)
				}
				gotSize, _, _ := unstructured.NestedInt64(stored.Object, "spec", "size")
				gotPhase, _, _ := unstructured.NestedString(stored.Object, "status", "phase")
				if gotSize != s.size || gotPhase != s.phase {
					t.Fatalf("%s: stored size %d, phase %q; want %d, %q", s.name, gotSize, gotPhase, s.size, s.phase)
				}
				if objPhase, _, _ := unstructured.NestedString(obj.Object, "status", "phase"); objPhase != s.phase || obj.GetResourceVersion() != stored.GetResourceVersion() {
					t.Fatalf("%s: obj does not hold the stored object", s.name)
				}
			}
		})
	}
}

// testFinalizer: a finalizer written with AddFinalizer and Update turns
// Delete into setting deletionTimestamp; the object stays until
// RemoveFinalizer and Update.
func (h *helperEnv) testFinalizer(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	cms := clientFor[corev1.ConfigMap](t, h, ns, client.Options{})
	const finalizer = "helpers.loom.dev/cleanup"

	obj := mustCreate(t, cms, cm("guarded"))
	// A sentinel for the garbage collector: a ConfigMap owned by another,
	// deleted after guarded.
	owner := mustCreate(t, cms, cm("sentinel-owner"))
	sentinel := cm("sentinel")
	sentinel.Namespace = ns // scope is read from the namespace
	if err := controller.SetControllerReference(owner, sentinel); err != nil {
		t.Fatal(err)
	}
	mustCreate(t, cms, sentinel)
	if !controller.AddFinalizer(obj, finalizer) {
		t.Fatal("AddFinalizer: no change")
	}
	obj, err := cms.Update(ctx, obj, metav1.UpdateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	if controller.AddFinalizer(obj, finalizer) {
		t.Fatal("AddFinalizer on the stored object: a change")
	}
	if err := cms.Delete(ctx, "guarded", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	// The garbage collector handles the finalizers it knows; ours is
	// unknown to it, so the object must stay. The collector takes the
	// changes of ConfigMaps in order: once it has deleted the sentinel,
	// whose owner went after guarded was deleted, it has taken guarded's
	// deletion too, and would have acted on it by now.
	if err := cms.Delete(ctx, "sentinel-owner", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	waitUntil(t, "the sentinel to be collected", func() (bool, error) { return gone(ctx, cms, "sentinel") })
	obj, err = cms.Get(ctx, "guarded", metav1.GetOptions{})
	if err != nil {
		t.Fatalf("deleted despite the finalizer: %v", err)
	}
	if obj.DeletionTimestamp == nil || !controller.HasFinalizer(obj, finalizer) {
		t.Fatalf("deletionTimestamp %v, finalizers %v", obj.DeletionTimestamp, obj.Finalizers)
	}

	if !controller.RemoveFinalizer(obj, finalizer) {
		t.Fatal("RemoveFinalizer: no change")
	}
	if _, err := cms.Update(ctx, obj, metav1.UpdateOptions{}); err != nil && !apierrors.IsNotFound(err) {
		t.Fatal(err)
	}
	waitUntil(t, "the object to be deleted", func() (bool, error) { return gone(ctx, cms, "guarded") })
}

// testApplyOwned applies a Deployment owned by a ConfigMap: the first
// call creates it with the owner reference, a second with the same
// desired state leaves the spec as it was, and a field another manager took is taken
// back with Force.
func (h *helperEnv) testApplyOwned(t *testing.T) {
	ctx := t.Context()
	ns := h.namespace(t, "")
	owner, err := clientFor[corev1.ConfigMap](t, h, ns, client.Options{}).Create(ctx, cm("owner"), metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	deploys := clientFor[appsv1.Deployment](t, h, ns, client.Options{FieldOwner: "web-operator"})
	desired := func() *appsv1.Deployment {
		labels := map[string]string{"app": "web"}
		return &appsv1.Deployment{
			ObjectMeta: metav1.ObjectMeta{Namespace: ns, Name: "web"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: labels},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: labels},
					Spec: corev1.PodSpec{
						NodeName:   "nobody",
						Containers: []corev1.Container{{Name: "web", Image: "nginx:1.27"}},
					},
				},
			},
		}
	}
	force := client.ApplyOptions{Force: true}
	first, err := controller.ApplyOwned(ctx, deploys, owner, desired(), force)
	if err != nil {
		t.Fatal(err)
	}
	if !controller.IsControlledBy(first, owner) {
		t.Fatalf("owner references %+v; want %s as the controller", first.OwnerReferences, owner.Name)
	}
	again, err := controller.ApplyOwned(ctx, deploys, owner, desired(), force)
	if err != nil {
		t.Fatal(err)
	}
	// The Deployment controller writes status and annotations in
	// between; the spec's generation says whether the apply changed it.
	if again.Generation != first.Generation {
		t.Errorf("an apply of the same state moved the generation from %d to %d", first.Generation, again.Generation)
	}

	// Another manager takes the image; the controller's next apply
	// conflicts without Force and takes it back with it.
	intruder := clientFor[appsv1.Deployment](t, h, ns, client.Options{FieldOwner: "intruder"})
	taken := desired()
	taken.Spec.Template.Spec.Containers[0].Image = "nginx:evil"
	if _, err := intruder.Apply(ctx, taken, force); err != nil {
		t.Fatal(err)
	}
	if _, err := controller.ApplyOwned(ctx, deploys, owner, desired(), client.ApplyOptions{}); !apierrors.IsConflict(err) {
		t.Fatalf("apply without Force over the intruder's image = %v, want a 409 Conflict", err)
	}
	back, err := controller.ApplyOwned(ctx, deploys, owner, desired(), force)
	if err != nil {
		t.Fatal(err)
	}
	if img := back.Spec.Template.Spec.Containers[0].Image; img != "nginx:1.27" {
		t.Errorf("image after the forced apply = %s, want nginx:1.27", img)
	}
}
