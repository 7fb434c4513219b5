package client_test

import (
	"testing"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/rest"
)

func isAlreadyExists(err error) bool { return apierrors.IsAlreadyExists(err) }
func isConflict(err error) bool      { return apierrors.IsConflict(err) }

func deployWeb(t *testing.T, rc *rest.Client, ns, name string, replicas int32) *appsv1.Deployment {
	t.Helper()
	deploys, err := client.For[appsv1.Deployment](rc, client.Options{})
	if err != nil {
		t.Fatal(err)
	}
	d, err := deploys.Namespace(ns).Create(t.Context(), &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Spec: appsv1.DeploymentSpec{Replicas: &replicas, Selector: &metav1.LabelSelector{MatchLabels: map[string]string{"app": name}},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: map[string]string{"app": name}}, Spec: podSpec()}},
	}, metav1.CreateOptions{})
	if err != nil {
		t.Fatal(err)
	}
	return d
}
