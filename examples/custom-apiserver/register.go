package main

import (
	"context"
	"fmt"
	"os"

	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/rest"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/server"
)

// The Service that --register creates, and the host name kube-apiserver
// then expects in the serving certificate.
const (
	serviceNamespace = "default"
	serviceName      = "restaurant-apiserver"
	serviceHost      = serviceName + "." + serviceNamespace + ".svc"
)

// register points kube-apiserver at a server on 127.0.0.1:port, for a
// development cluster such as `loom dev up`: a Service of type
// ExternalName with externalName "127.0.0.1" (Endpoints and EndpointSlices
// may not hold loopback addresses, and kube-apiserver dials an
// ExternalName Service's external name directly) and an APIService per served version, trusting the serving
// certificate in certDir. It uses server-side apply, so running it again
// updates them. In a real cluster, deploy the server behind an ordinary
// Service instead.
func register(ctx context.Context, kubeconfig string, port int, certDir string) error {
	caBundle, err := os.ReadFile(server.ServingCertFile(certDir))
	if err != nil {
		return fmt.Errorf("register: serving certificate: %w", err)
	}
	cfg, err := config.Load(config.LoadOptions{Path: kubeconfig})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		return fmt.Errorf("register: %w", err)
	}
	services, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: client.Resource{
		Resource:   schema.GroupVersionResource{Version: "v1", Resource: "services"},
		Kind:       schema.GroupVersionKind{Version: "v1", Kind: "Service"},
		Namespaced: true,
	}})
	if err != nil {
		return err
	}
	apiServices, err := client.For[unstructured.Unstructured](rc, client.Options{Resource: client.Resource{
		Resource: schema.GroupVersionResource{Group: "apiregistration.k8s.io", Version: "v1", Resource: "apiservices"},
		Kind:     schema.GroupVersionKind{Group: "apiregistration.k8s.io", Version: "v1", Kind: "APIService"},
	}})
	if err != nil {
		return err
	}
	apply := client.ApplyOptions{FieldManager: "restaurant-apiserver", Force: true}
	svc := &unstructured.Unstructured{Object: map[string]any{
		"apiVersion": "v1", "kind": "Service",
		"metadata": map[string]any{"name": serviceName, "namespace": serviceNamespace},
		"spec":     map[string]any{"type": "ExternalName", "externalName": "127.0.0.1"},
	}}
	if _, err := services.Namespace(serviceNamespace).Apply(ctx, svc, apply); err != nil {
		return fmt.Errorf("register: Service %s/%s: %w", serviceNamespace, serviceName, err)
	}
	for _, gv := range server.GroupVersions {
		as := &unstructured.Unstructured{Object: map[string]any{
			"apiVersion": "apiregistration.k8s.io/v1", "kind": "APIService",
			"metadata": map[string]any{"name": gv.Version + "." + restaurant.GroupName},
			"spec": map[string]any{
				"group": gv.Group, "version": gv.Version,
				"service":              map[string]any{"namespace": serviceNamespace, "name": serviceName, "port": int64(port)},
				"caBundle":             caBundle, // encoded as base64 by the JSON encoder
				"groupPriorityMinimum": int64(1000),
				"versionPriority":      int64(15),
			},
		}}
		if _, err := apiServices.Apply(ctx, as, apply); err != nil {
			return fmt.Errorf("register: APIService %s: %w", as.GetName(), err)
		}
	}
	return nil
}
