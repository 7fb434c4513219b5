// Package server is the restaurant API server: the storage, the admission
// plugin, the price subresource and the wiring into k8s.io/apiserver's
// generic API server, with authentication and authorization delegated to
// kube-apiserver.
package server

import (
	"context"
	"errors"
	"fmt"
	"net"
	"path/filepath"
	"strings"

	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	openapinamer "k8s.io/apiserver/pkg/endpoints/openapi"
	"k8s.io/apiserver/pkg/registry/rest"
	genericapiserver "k8s.io/apiserver/pkg/server"
	genericoptions "k8s.io/apiserver/pkg/server/options"
	basecompatibility "k8s.io/component-base/compatibility"

	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1alpha1"
	"github.com/loom-k8s/loom/examples/custom-apiserver/apis/restaurant/v1beta1"
)

// Options configure the server.
type Options struct {
	// Kubeconfig reaches kube-apiserver, for delegated authentication
	// (TokenReview, and the client CA and request-header settings in
	// kube-system/extension-apiserver-authentication), delegated
	// authorization (SubjectAccessReview) and the admission plugins that
	// read it (namespaces, webhooks, policies). Empty means in-cluster.
	Kubeconfig string
	// BindAddress and SecurePort are where the server listens, unless
	// Listener is set. An empty BindAddress means 127.0.0.1. SecurePort 0
	// is refused.
	BindAddress string
	SecurePort  int
	// Listener, if set, is used instead of BindAddress and SecurePort.
	Listener net.Listener
	// Storage is "memory" or "file:PATH".
	Storage string
	// CertDir holds the serving certificate (apiserver.crt and
	// apiserver.key); a self-signed one is made there if missing, for
	// ServingHosts.
	CertDir string
	// ServingHosts are the DNS names of the self-signed certificate,
	// besides localhost and 127.0.0.1: kube-apiserver checks
	// <service>.<namespace>.svc.
	ServingHosts []string
}

// Errors for bad options.
var (
	ErrBadStorage     = errors.New(`--storage must be "memory" or "file:PATH"`)
	ErrNoPort         = errors.New("a secure port (1-65535) or a listener is required")
	ErrNoCertDir      = errors.New("a certificate folder is required")
	ErrBadBindAddress = errors.New("the bind address is not an IP address")
)

// storagePath returns the file of a "file:PATH" storage, or "" for memory.
func (o Options) storagePath() (string, error) {
	switch {
	case o.Storage == "memory":
		return "", nil
	case strings.HasPrefix(o.Storage, "file:") && len(o.Storage) > len("file:"):
		return filepath.Clean(strings.TrimPrefix(o.Storage, "file:")), nil
	}
	return "", fmt.Errorf("%w, not %q", ErrBadStorage, o.Storage)
}

// Validate checks the options without side effects.
func (o Options) Validate() error {
	if _, err := o.storagePath(); err != nil {
		return err
	}
	if o.Listener == nil && (o.SecurePort <= 0 || o.SecurePort > 65535) {
		return ErrNoPort
	}
	if o.CertDir == "" {
		return ErrNoCertDir
	}
	if o.BindAddress != "" && net.ParseIP(o.BindAddress) == nil {
		return fmt.Errorf("%w: %q", ErrBadBindAddress, o.BindAddress)
	}
	return nil
}

// ServingCertFile is the serving certificate in certDir; it also holds the
// CA of a self-signed one, so it serves as the APIService's caBundle.
func ServingCertFile(certDir string) string { return filepath.Join(certDir, "apiserver.crt") }

// Server is a configured restaurant API server.
type Server struct {
	generic  *genericapiserver.GenericAPIServer
	Backend  *Backend
	Pizzas   *Store
	Toppings *Store
}

// New configures a server: storage, certificates, delegated
// authentication and authorization, admission, and the API group.
func New(o Options) (*Server, error) {
	if err := o.Validate(); err != nil {
		return nil, err
	}
	path, _ := o.storagePath()
	backend, err := NewBackend(path, Codecs.LegacyCodec(v1beta1.SchemeGroupVersion), Codecs.UniversalDecoder(restaurant.SchemeGroupVersion))
	if err != nil {
		return nil, err
	}
	s := &Server{Backend: backend}
	if s.Pizzas, err = NewStore(backend, Pizzas()); err != nil {
		return nil, err
	}
	if s.Toppings, err = NewStore(backend, Toppings()); err != nil {
		return nil, err
	}

	ro := genericoptions.NewRecommendedOptions("", Codecs.LegacyCodec(v1beta1.SchemeGroupVersion))
	ro.Etcd = nil // our own storage
	ro.SecureServing.BindAddress = net.ParseIP("127.0.0.1")
	if o.BindAddress != "" {
		ro.SecureServing.BindAddress = net.ParseIP(o.BindAddress)
	}
	ro.SecureServing.BindPort = o.SecurePort
	ro.SecureServing.Listener = o.Listener
	ro.SecureServing.ServerCert.CertDirectory = o.CertDir
	ro.SecureServing.ServerCert.PairName = "apiserver"
	ro.Authentication.RemoteKubeConfigFile = o.Kubeconfig
	ro.Authorization.RemoteKubeConfigFile = o.Kubeconfig
	ro.CoreAPI.CoreAPIKubeconfigPath = o.Kubeconfig
	// API priority and fairness would need FlowSchemas read from
	// kube-apiserver; kube-apiserver already applies its own in front.
	ro.Features.EnablePriorityAndFairness = false
	RegisterToppingsPlugin(ro.Admission.Plugins, s.Toppings)
	ro.Admission.RecommendedPluginOrder = append(ro.Admission.RecommendedPluginOrder, ToppingsPluginName)
	if err := ro.SecureServing.MaybeDefaultWithSelfSignedCerts("localhost", o.ServingHosts, []net.IP{net.ParseIP("127.0.0.1")}); err != nil {
		return nil, fmt.Errorf("self-signed certificate: %w", err)
	}
	if errs := ro.Validate(); len(errs) > 0 {
		return nil, errors.Join(errs...)
	}

	cfg := genericapiserver.NewRecommendedConfig(Codecs)
	cfg.EffectiveVersion = basecompatibility.NewEffectiveVersionFromString("1.36", "", "")
	namer := openapinamer.NewDefinitionNamer(Scheme)
	cfg.OpenAPIConfig = genericapiserver.DefaultOpenAPIConfig(GetOpenAPIDefinitions, namer)
	cfg.OpenAPIConfig.Info.Title, cfg.OpenAPIConfig.Info.Version = "Restaurant", "v1beta1"
	cfg.OpenAPIV3Config = genericapiserver.DefaultOpenAPIV3Config(GetOpenAPIDefinitions, namer)
	cfg.OpenAPIV3Config.Info.Title, cfg.OpenAPIV3Config.Info.Version = "Restaurant", "v1beta1"
	if err := ro.ApplyTo(cfg); err != nil {
		return nil, err
	}
	s.generic, err = cfg.Complete().New("restaurant-apiserver", genericapiserver.NewEmptyDelegate())
	if err != nil {
		return nil, err
	}
	group := genericapiserver.NewDefaultAPIGroupInfo(restaurant.GroupName, Scheme, metav1.ParameterCodec, Codecs)
	storage := map[string]rest.Storage{
		"pizzas":       s.Pizzas,
		"pizzas/price": &PriceREST{Pizzas: s.Pizzas, Toppings: s.Toppings},
		"toppings":     s.Toppings,
	}
	group.VersionedResourcesStorageMap = map[string]map[string]rest.Storage{
		v1beta1.SchemeGroupVersion.Version:  storage,
		v1alpha1.SchemeGroupVersion.Version: storage,
	}
	if err := s.generic.InstallAPIGroup(&group); err != nil {
		return nil, err
	}
	return s, nil
}

// GroupVersions are the served versions, preferred first.
var GroupVersions = []schema.GroupVersion{v1beta1.SchemeGroupVersion, v1alpha1.SchemeGroupVersion}

// Run serves until ctx ends, then shuts down.
//
// When ctx ends, every watch is ended at once: the HTTP server's graceful
// shutdown waits for open requests, and the watches that kube-apiserver
// proxies for informers would otherwise hold it until its timeout (a
// minute). Their clients re-watch, from another replica or after the
// restart.
func (s *Server) Run(ctx context.Context) error {
	stop := context.AfterFunc(ctx, func() {
		s.Pizzas.Destroy()
		s.Toppings.Destroy()
	})
	defer stop()
	return s.generic.PrepareRun().RunWithContext(ctx)
}
