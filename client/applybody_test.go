package client

import (
	"encoding/json"
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/util/intstr"
)

func TestApplyBody(t *testing.T) {
	zero := int32(0)
	for _, tt := range []struct {
		name string
		obj  any
		want string
	}{{
		name: "unset fields are left out, zero structs too",
		obj: &appsv1.Deployment{
			TypeMeta:   metav1.TypeMeta{APIVersion: "apps/v1", Kind: "Deployment"},
			ObjectMeta: metav1.ObjectMeta{Name: "web", Namespace: "default"},
			Spec: appsv1.DeploymentSpec{
				Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": "web"}},
				Template: corev1.PodTemplateSpec{
					ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": "web"}},
					Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "web", Image: "nginx"}}},
				},
			},
		},
		want: `{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web","namespace":"default"},` +
			`"spec":{"selector":{"matchLabels":{"app":"web"}},"template":{"metadata":{"labels":{"app":"web"}},` +
			`"spec":{"containers":[{"name":"web"` + `,"image":"nginx"}]}}}}`,
	}, {
		name: "a pointer to zero is sent",
		obj:  &appsv1.Deployment{Spec: appsv1.DeploymentSpec{Replicas: &zero}},
		want: `{"spec":{"replicas":0}}`,
	}, {
		name: "an empty struct behind a pointer is sent; required zero fields are sent",
		obj: &corev1.PodSpec{
			Volumes:    []corev1.Volume{{Name: "tmp", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}}},
			Containers: []corev1.Container{{Name: "c", Ports: []corev1.ContainerPort{{ContainerPort: 0}}}},
		},
		want: `{"containers":[{"name":"c","ports":[{"containerPort":0}]}],"volumes":[{"name":"tmp","emptyDir":{}}]}`,
	}, {
		name: "types that encode themselves: set when not zero",
		obj: &corev1.ServicePort{
			Port:       80,
			TargetPort: intstr.FromString("http"),
		},
		want: `{"port":80,"targetPort":"http"}`,
	}, {
		name: "quantities in maps, times left out when zero",
		obj: &corev1.Container{
			Name: "c",
			Resources: corev1.ResourceRequirements{
				Limits: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m")},
			},
		},
		want: `{"name":"c","resources":{"limits":{"cpu":"500m"}}}`,
	}, {
		name: "an empty map set on purpose is sent",
		obj:  &metav1.ObjectMeta{Name: "x", Labels: map[string]string{}},
		want: `{"name":"x","labels":{}}`,
	}, {
		name: "unstructured objects are sent as they are",
		obj: &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": "c", "creationTimestamp": nil},
		}},
		want: `{"apiVersion":"v1","kind":"ConfigMap","metadata":{"creationTimestamp":null,"name":"c"}}`,
	}} {
		t.Run(tt.name, func(t *testing.T) {
			got, err := applyBody(tt.obj)
			if err != nil {
				t.Fatal(err)
			}
			if !sameJSON(t, got, tt.want) {
				t.Errorf("applyBody =\n%s\nwant\n%s", got, tt.want)
			}
		})
	}
}

func sameJSON(t *testing.T, a []byte, b string) bool {
	t.Helper()
	var x, y any
	if err := json.Unmarshal(a, &x); err != nil {
		t.Fatal(err)
	}
	if err := json.Unmarshal([]byte(b), &y); err != nil {
		t.Fatal(err)
	}
	ja, _ := json.Marshal(x)
	jb, _ := json.Marshal(y)
	return string(ja) == string(jb)
}
