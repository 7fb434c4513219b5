package client_test

import (
	"encoding/json"
	"fmt"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/internal/intern"
	"github.com/loom-k8s/loom/internal/jsondec"
	"github.com/loom-k8s/loom/rest"
)

// benchDeployment is a Deployment of a usual size: three containers with
// ports, environment and resources, labels, an owner and a
// managed-fields entry.
func benchDeployment(name string) *appsv1.Deployment {
	labels := map[string]string{"app": "web", "tier": "front", "team": "payments"}
	var containers []corev1.Container
	for i := range 3 {
		containers = append(containers, corev1.Container{
			Name:  fmt.Sprintf("c%d", i),
			Image: "registry.example.com/web:1.2.3",
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080}},
			Env:   []corev1.EnvVar{{Name: "MODE", Value: "production"}, {Name: "REGION", Value: "eu-west-1"}},
		})
	}
	return &appsv1.Deployment{
		TypeMeta: metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
		ObjectMeta: metav1.ObjectMeta{
			Namespace: "default", Name: name, Labels: labels, ResourceVersion: "42",
			ManagedFields: []metav1.ManagedFieldsEntry{{
				Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "apps/v1",
				FieldsType: "FieldsV1", FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:spec":{"f:replicas":{},"f:template":{"f:spec":{"f:containers":{}}}}}`)},
			}},
		},
		Spec: appsv1.DeploymentSpec{
			Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{
				ObjectMeta: metav1.ObjectMeta{Labels: labels},
				Spec:       corev1.PodSpec{Containers: containers},
			},
		},
	}
}

// BenchmarkWriteCheck measures what a write (Create, Update, Apply) spends
// checking its object against the parts that informers share between
// cached objects (see client.ErrSharedChanged), in three states of the
// process: no informer shares parts (sharing off, or no informer); an
// informer shares parts and the object written is of the caller's own
// making; and an informer caches the object under the written name, and
// the write is a copy of it (what a reconciler sends after DeepCopy).
// "live update" is one Update of a ConfigMap against the test control
// plane, for scale. Run it alone (-run '^$'): the states are those of the
// whole process, and the sharing-off case must come first.
func BenchmarkWriteCheck(b *testing.B) {
	res := client.Resource{Resource: schema.GroupVersionResource{Group: "apps", Version: "v1", Resource: "deployments"}, Namespaced: true}
	own := benchDeployment("web")
	check := func(b *testing.B, obj *appsv1.Deployment) {
		b.ReportAllocs()
		for b.Loop() {
			if err := client.CheckWrite("update", res, "default", obj); err != nil {
				b.Fatal(err)
			}
		}
	}
	tab := intern.Process()
	if tab.Len() > 0 || tab.HasCaches() {
		b.Skip("the process already shares parts; run the benchmark alone")
	}
	b.Run("sharing off", func(b *testing.B) { check(b, own) })

	// Decode the same Deployment twice through the process table, as an
	// informer does: the second decode shares its parts with the first.
	data, err := json.Marshal(own)
	if err != nil {
		b.Fatal(err)
	}
	opts := intern.Options{Share: tab, Structs: true}
	var first, cached appsv1.Deployment
	if err := jsondec.DecodeWith(data, &first, opts); err != nil {
		b.Fatal(err)
	}
	if err := jsondec.DecodeWith(data, &cached, opts); err != nil {
		b.Fatal(err)
	}
	if tab.Len() == 0 {
		b.Fatal("decoding with the process table shared no part")
	}
	remove := tab.AddCache(res.Resource.GroupResource().String(), func(ns, name string) (any, bool) {
		if ns == "default" && name == "web" {
			return &cached, true
		}
		return nil, false
	})
	defer remove()
	b.Run("sharing on/own object", func(b *testing.B) { check(b, benchDeployment("other")) })
	b.Run("sharing on/copy of cached object", func(b *testing.B) { check(b, cached.DeepCopy()) })

	b.Run("live update", func(b *testing.B) {
		cms, err := client.For[corev1.ConfigMap](newREST(b, rest.Protobuf), client.Options{})
		if err != nil {
			b.Fatal(err)
		}
		cm, err := cms.Namespace("default").Create(b.Context(), &corev1.ConfigMap{
			ObjectMeta: metav1.ObjectMeta{GenerateName: "write-check-"},
			Data:       map[string]string{"n": "0"},
		}, metav1.CreateOptions{})
		if err != nil {
			b.Fatal(err)
		}
		defer cms.Namespace("default").Delete(b.Context(), cm.Name, metav1.DeleteOptions{})
		n := 0
		for b.Loop() {
			n++
			cm.Data["n"] = fmt.Sprint(n)
			if cm, err = cms.Namespace("default").Update(b.Context(), cm, metav1.UpdateOptions{}); err != nil {
				b.Fatal(err)
			}
		}
	})
}
