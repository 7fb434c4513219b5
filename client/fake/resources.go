package fake

import (
	"fmt"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/kube-openapi/pkg/validation/spec"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

// resource is one served resource (a group, version and resource name).
type resource struct {
	gvr        schema.GroupVersionResource
	kind       string
	listKind   string
	singular   string
	namespaced bool
	verbs      []string
	shortNames []string
	categories []string
	status     bool // has a status subresource
	scale      *scalePaths
	custom     bool         // served for a CustomResourceDefinition
	schema     *spec.Schema // custom resources: the version's structural schema
	fields     []string     // custom resources: the selectableFields, as dotted paths

	storageVersion string // custom resources: the version objects are stored in
	typed          bool   // a Go type of k8s.io/api shapes its objects

	converter managedfields.TypeConverter
	managers  map[string]*managedfields.FieldManager // by subresource
}

// scalePaths are where a resource keeps what its scale subresource shows.
type scalePaths struct {
	spec, status, selector string // dotted JSON paths, such as "spec.replicas"
}

func (r *resource) gvk() schema.GroupVersionKind {
	return schema.GroupVersionKind{Group: r.gvr.Group, Version: r.gvr.Version, Kind: r.kind}
}

func (r *resource) gr() schema.GroupResource { return r.gvr.GroupResource() }

func (r *resource) apiVersion() string { return r.gvk().GroupVersion().String() }

// generation reports whether the server keeps metadata.generation for
// the resource: custom resources, and the built-in kinds whose strategy
// counts spec changes.
func (r *resource) generation() bool {
	return r.custom || generationKinds[r.gr()]
}

// generationKinds are the built-in resources with metadata.generation.
var generationKinds = map[schema.GroupResource]bool{
	{Group: "apps", Resource: "deployments"}:                                         true,
	{Group: "apps", Resource: "replicasets"}:                                         true,
	{Group: "apps", Resource: "statefulsets"}:                                        true,
	{Group: "apps", Resource: "daemonsets"}:                                          true,
	{Resource: "replicationcontrollers"}:                                             true,
	{Resource: "pods"}:                                                               true,
	{Group: "batch", Resource: "jobs"}:                                               true,
	{Group: "batch", Resource: "cronjobs"}:                                           true,
	{Group: "policy", Resource: "poddisruptionbudgets"}:                              true,
	{Group: "networking.k8s.io", Resource: "networkpolicies"}:                        true,
	{Group: "networking.k8s.io", Resource: "ingresses"}:                              true,
	{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}:           true,
	{Group: "admissionregistration.k8s.io", Resource: "validatingadmissionpolicies"}: true,
	{Group: "admissionregistration.k8s.io", Resource: "mutatingadmissionpolicies"}:   true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "flowschemas"}:                 true,
	{Group: "flowcontrol.apiserver.k8s.io", Resource: "prioritylevelconfigurations"}: true,
}

// fieldManager returns the field manager of the resource or of one of its
// subresources ("", "status" or "scale").
func (r *resource) fieldManager(sub string) (*managedfields.FieldManager, error) {
	if fm, ok := r.managers[sub]; ok {
		return fm, nil
	}
	reset := map[fieldpath.APIVersion]fieldpath.Filter{}
	av := fieldpath.APIVersion(r.apiVersion())
	switch {
	case sub == "" && r.status:
		reset[av] = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("status")))
	case sub == "status":
		reset[av] = fieldpath.NewExcludeSetFilter(fieldpath.NewSet(fieldpath.MakePathOrDie("spec")))
	}
	if len(reset) == 0 {
		reset = nil
	}
	conv := unstructuredConverter{}
	var fm *managedfields.FieldManager
	var err error
	if r.custom {
		fm, err = managedfields.NewDefaultCRDFieldManager(r.converter, conv, conv, conv, r.gvk(), r.gvk().GroupVersion(), sub, reset)
	} else {
		fm, err = managedfields.NewDefaultFieldManager(r.converter, conv, conv, conv, r.gvk(), r.gvk().GroupVersion(), sub, reset)
	}
	if err != nil {
		return nil, fmt.Errorf("fake: %s: %w", r.gvr, err)
	}
	if r.managers == nil {
		r.managers = map[string]*managedfields.FieldManager{}
	}
	r.managers[sub] = fm
	return fm, nil
}

// unstructuredConverter serves the field managers: objects are
// unstructured and each resource has one version, so conversion is a
// change of apiVersion, defaulting does nothing, and new objects are
// empty.
type unstructuredConverter struct{}

func (unstructuredConverter) Convert(in, out, _ any) error {
	u, ok := in.(*unstructured.Unstructured)
	o, ok2 := out.(*unstructured.Unstructured)
	if !ok || !ok2 {
		return fmt.Errorf("fake: cannot convert %T to %T", in, out)
	}
	o.Object = runtime.DeepCopyJSON(u.Object)
	return nil
}

func (unstructuredConverter) ConvertToVersion(in runtime.Object, gv runtime.GroupVersioner) (runtime.Object, error) {
	u, ok := in.(*unstructured.Unstructured)
	if !ok {
		return nil, fmt.Errorf("fake: cannot convert %T", in)
	}
	if gvk, ok := gv.KindForGroupVersionKinds([]schema.GroupVersionKind{u.GroupVersionKind()}); ok {
		out := u.DeepCopy()
		out.SetAPIVersion(gvk.GroupVersion().String())
		return out, nil
	}
	return u, nil
}

func (unstructuredConverter) ConvertFieldLabel(_ schema.GroupVersionKind, label, value string) (string, string, error) {
	return label, value, nil
}

func (unstructuredConverter) Default(runtime.Object) {}

func (unstructuredConverter) New(gvk schema.GroupVersionKind) (runtime.Object, error) {
	u := &unstructured.Unstructured{Object: map[string]any{}}
	u.SetGroupVersionKind(gvk)
	return u, nil
}

// builtinResources lists the resources of the captured discovery.
func builtinResources(b *builtins) []*resource {
	var out []*resource
	for _, list := range []apidiscoveryv2.APIGroupDiscoveryList{b.core, b.groups} {
		for _, g := range list.Items {
			for _, v := range g.Versions {
				for _, rd := range v.Resources {
					r := &resource{
						gvr:        schema.GroupVersionResource{Group: g.Name, Version: v.Version, Resource: rd.Resource},
						singular:   rd.SingularResource,
						namespaced: rd.Scope == apidiscoveryv2.ScopeNamespace,
						verbs:      rd.Verbs,
						shortNames: rd.ShortNames,
						categories: rd.Categories,
						converter:  b.converter,
					}
					if rd.ResponseKind != nil {
						r.kind = rd.ResponseKind.Kind
					}
					r.listKind = r.kind + "List"
					for _, sub := range rd.Subresources {
						switch sub.Subresource {
						case "status":
							r.status = true
						case "scale":
							r.scale = &scalePaths{spec: "spec.replicas", status: "status.replicas", selector: "status.selector"}
						}
					}
					r.typed = b.scheme.Recognizes(r.gvk())
					out = append(out, r)
				}
			}
		}
	}
	return out
}

// dotted splits a dotted JSON path such as ".spec.replicas".
func dotted(p string) []string {
	return strings.Split(strings.TrimPrefix(p, "."), ".")
}
