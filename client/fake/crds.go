package fake

import (
	"encoding/json"
	"fmt"
	"sort"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"k8s.io/kube-openapi/pkg/validation/spec"
)

const schemaRefPrefix = "#/components/schemas/"

func isCRD(r *resource) bool {
	return r.gvr.Group == "apiextensions.k8s.io" && r.gvr.Resource == "customresourcedefinitions"
}

// validateCRD defaults a CustomResourceDefinition as kube-apiserver does
// and checks what the fake needs of it.
func (s *Server) validateCRD(obj, old map[string]any) error {
	name := str(metadata(obj), "name")
	gk := schema.GroupKind{Group: "apiextensions.k8s.io", Kind: "CustomResourceDefinition"}
	group, _ := getPath(obj, []string{"spec", "group"})
	plural, _ := getPath(obj, []string{"spec", "names", "plural"})
	kind, _ := getPath(obj, []string{"spec", "names", "kind"})
	if want := fmt.Sprint(plural) + "." + fmt.Sprint(group); name != want {
		return apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("metadata", "name"), name, `must be spec.names.plural+"."+spec.group`)})
	}
	if k, _ := kind.(string); k == "" {
		return apierrors.NewInvalid(gk, name, field.ErrorList{field.Required(field.NewPath("spec", "names", "kind"), "")})
	}
	if v, ok := getPath(obj, []string{"spec", "names", "singular"}); !ok || v == "" {
		setPath(obj, []string{"spec", "names", "singular"}, lower(kind.(string)))
	}
	if v, ok := getPath(obj, []string{"spec", "names", "listKind"}); !ok || v == "" {
		setPath(obj, []string{"spec", "names", "listKind"}, kind.(string)+"List")
	}
	if _, ok := getPath(obj, []string{"spec", "conversion", "strategy"}); !ok {
		setPath(obj, []string{"spec", "conversion", "strategy"}, "None")
	}
	if old != nil {
		if og, _ := getPath(old, []string{"spec", "group"}); og != group {
			return apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("spec", "group"), group, "field is immutable")})
		}
	}
	if _, err := crdResources(s.b, obj); err != nil {
		return apierrors.NewInvalid(gk, name, field.ErrorList{field.Invalid(field.NewPath("spec", "versions"), "", err.Error())})
	}
	return nil
}

// crdResources returns the resources a CRD serves.
func crdResources(b *builtins, obj map[string]any) ([]*resource, error) {
	sp, _ := obj["spec"].(map[string]any)
	group := str(sp, "group")
	names, _ := sp["names"].(map[string]any)
	kind := str(names, "kind")
	var out []*resource
	versions, _ := sp["versions"].([]any)
	// One type converter knows every version's schema, so that the
	// managedFields written in one version survive writes in another.
	schemas := map[schema.GroupVersionKind]*spec.Schema{}
	storage := ""
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if st, _ := vm["storage"].(bool); st {
			storage = str(vm, "name")
		}
		if raw, ok := getPath(vm, []string{"schema", "openAPIV3Schema"}); ok {
			var sch spec.Schema
			data, _ := json.Marshal(raw)
			if err := json.Unmarshal(data, &sch); err != nil {
				return nil, fmt.Errorf("version %s: schema: %w", str(vm, "name"), err)
			}
			schemas[schema.GroupVersionKind{Group: group, Version: str(vm, "name"), Kind: kind}] = &sch
		}
	}
	var conv managedfields.TypeConverter = managedfields.NewDeducedTypeConverter()
	if len(schemas) > 0 {
		c, err := crdConverter(b, schemas)
		if err != nil {
			return nil, fmt.Errorf("schema: %w", err)
		}
		conv = c
	}
	for _, v := range versions {
		vm, _ := v.(map[string]any)
		if served, _ := vm["served"].(bool); !served {
			continue
		}
		r := &resource{
			gvr:        schema.GroupVersionResource{Group: group, Version: str(vm, "name"), Resource: str(names, "plural")},
			kind:       kind,
			listKind:   str(names, "listKind"),
			singular:   str(names, "singular"),
			namespaced: str(sp, "scope") != "Cluster",
			verbs:      []string{"delete", "deletecollection", "get", "list", "patch", "create", "update", "watch"},
			shortNames: stringSlice(names["shortNames"]),
			categories: stringSlice(names["categories"]),
			custom:     true,
		}
		if r.singular == "" {
			r.singular = lower(kind)
		}
		if r.listKind == "" {
			r.listKind = kind + "List"
		}
		if sf, ok := vm["selectableFields"].([]any); ok {
			for _, f := range sf {
				if fm, _ := f.(map[string]any); fm != nil {
					r.fields = append(r.fields, strings.TrimPrefix(str(fm, "jsonPath"), "."))
				}
			}
		}
		if _, ok := getPath(vm, []string{"subresources", "status"}); ok {
			r.status = true
		}
		if sc, ok := getPath(vm, []string{"subresources", "scale"}); ok {
			scm, _ := sc.(map[string]any)
			r.scale = &scalePaths{spec: str(scm, "specReplicasPath"), status: str(scm, "statusReplicasPath"), selector: str(scm, "labelSelectorPath")}
		}
		r.schema = schemas[r.gvk()]
		r.converter = conv
		r.storageVersion = storage
		out = append(out, r)
	}
	return out, nil
}

// crdConverter builds the type converter of a custom resource: its schema
// with the ObjectMeta of the built-in schemas, as kube-apiserver publishes
// it.
func crdConverter(b *builtins, versions map[schema.GroupVersionKind]*spec.Schema) (managedfields.TypeConverter, error) {
	defs := map[string]*spec.Schema{}
	for gvk, s := range versions {
		root := crdRoot(gvk, s)
		addRefs(b, defs, root)
		defs[fmt.Sprintf("%s.%s.%s", gvk.Group, gvk.Version, gvk.Kind)] = root
	}
	return managedfields.NewTypeConverter(defs, false)
}

// crdRoot is the schema of one version of a custom resource as
// kube-apiserver publishes it: with apiVersion, kind, ObjectMeta and its
// group, version and kind.
func crdRoot(gvk schema.GroupVersionKind, s *spec.Schema) *spec.Schema {
	root := *s
	root.Properties = map[string]spec.Schema{}
	for k, v := range s.Properties {
		root.Properties[k] = v
	}
	root.Properties["apiVersion"] = *spec.StringProperty()
	root.Properties["kind"] = *spec.StringProperty()
	root.Properties["metadata"] = *spec.RefSchema(schemaRefPrefix + "io.k8s.apimachinery.pkg.apis.meta.v1.ObjectMeta")
	root.Extensions = spec.Extensions{}
	for k, v := range s.Extensions {
		root.Extensions[k] = v
	}
	root.Extensions["x-kubernetes-group-version-kind"] = []any{map[string]any{"group": gvk.Group, "version": gvk.Version, "kind": gvk.Kind}}
	return &root
}

// addRefs adds to defs the built-in schemas that root refers to, and
// theirs.
func addRefs(b *builtins, defs map[string]*spec.Schema, root *spec.Schema) {
	var walk func(*spec.Schema)
	walk = func(x *spec.Schema) {
		if x == nil {
			return
		}
		if ref := x.Ref.String(); ref != "" {
			name := strings.TrimPrefix(ref, schemaRefPrefix)
			if _, seen := defs[name]; !seen {
				if d := b.schemas[name]; d != nil {
					defs[name] = d
					walk(d)
				}
			}
		}
		for _, p := range x.Properties {
			walk(&p)
		}
		if x.Items != nil {
			walk(x.Items.Schema)
		}
		if x.AdditionalProperties != nil {
			walk(x.AdditionalProperties.Schema)
		}
		for i := range x.AllOf {
			walk(&x.AllOf[i])
		}
	}
	walk(root)
}

// crdChanged serves what a CRD now defines and records that it is
// established, as kube-apiserver's CRD controllers do. It returns obj.
// The caller holds mu.
func (s *Server) crdChanged(obj map[string]any) map[string]any {
	rs, err := crdResources(s.b, obj)
	if err != nil {
		return obj
	}
	group, _ := getPath(obj, []string{"spec", "group"})
	plural, _ := getPath(obj, []string{"spec", "names", "plural"})
	gr := schema.GroupResource{Group: fmt.Sprint(group), Resource: fmt.Sprint(plural)}
	for _, old := range append([]*resource(nil), s.byGR[gr]...) {
		s.unserve(old.gvr)
	}
	keep := s.objects[gr]
	for _, r := range rs {
		s.serve(r)
	}
	if keep != nil && len(rs) > 0 {
		s.objects[gr] = keep
	}
	// The status: names accepted, established, the stored version.
	md := metadata(obj)
	k := key("", str(md, "name"))
	cur := s.objects[schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}][k]
	if cur == nil {
		return obj
	}
	next := deepCopy(cur.obj)
	names, _ := getPath(next, []string{"spec", "names"})
	storedVersions := []any{}
	versions, _ := getPath(next, []string{"spec", "versions"})
	vl, _ := versions.([]any)
	for _, v := range vl {
		if vm, _ := v.(map[string]any); vm != nil {
			if st, _ := vm["storage"].(bool); st {
				storedVersions = append(storedVersions, vm["name"])
			}
		}
	}
	if prev, ok := getPath(cur.obj, []string{"status", "storedVersions"}); ok {
		for _, p := range prev.([]any) {
			found := false
			for _, s := range storedVersions {
				found = found || s == p
			}
			if !found {
				storedVersions = append(storedVersions, p)
			}
		}
	}
	now := s.timestamp()
	cond := func(typ, reason, msg string) map[string]any {
		if conds, ok := getPath(cur.obj, []string{"status", "conditions"}); ok {
			for _, c := range conds.([]any) {
				if cm, _ := c.(map[string]any); cm != nil && cm["type"] == typ && cm["status"] == "True" {
					return cm
				}
			}
		}
		return map[string]any{"type": typ, "status": "True", "lastTransitionTime": now, "reason": reason, "message": msg}
	}
	next["status"] = map[string]any{
		"acceptedNames": names,
		"conditions": []any{
			cond("NamesAccepted", "NoConflicts", "no conflicts found"),
			cond("Established", "InitialNamesAccepted", "the initial names have been accepted"),
		},
		"storedVersions": storedVersions,
	}
	if equalJSON(next["status"], cur.obj["status"]) {
		return obj
	}
	rv := s.nextRV()
	metadata(next)["resourceVersion"] = fmt.Sprint(rv)
	crdGR := schema.GroupResource{Group: "apiextensions.k8s.io", Resource: "customresourcedefinitions"}
	s.objects[crdGR][k] = &stored{obj: next, rv: rv}
	s.record(event{rv: rv, typ: "MODIFIED", gr: crdGR, key: k, obj: next, prev: cur.obj})
	return obj
}

// crdDeleted stops serving a deleted CRD's resources; its objects go.
// The caller holds mu.
func (s *Server) crdDeleted(obj map[string]any) {
	group, _ := getPath(obj, []string{"spec", "group"})
	plural, _ := getPath(obj, []string{"spec", "names", "plural"})
	gr := schema.GroupResource{Group: fmt.Sprint(group), Resource: fmt.Sprint(plural)}
	for _, r := range append([]*resource(nil), s.byGR[gr]...) {
		s.unserve(r.gvr)
	}
}

// discovery returns the aggregated discovery of /api and /apis, with the
// served CRDs. The caller holds mu.
func (s *Server) discovery() (core, groups apidiscoveryv2.APIGroupDiscoveryList) {
	core = s.b.core
	groups = s.b.groups
	groups.Items = append([]apidiscoveryv2.APIGroupDiscovery(nil), groups.Items...)
	index := map[string]int{}
	var custom []*resource
	for _, rs := range s.byGR {
		for _, r := range rs {
			if r.custom {
				custom = append(custom, r)
			}
		}
	}
	sort.Slice(custom, func(i, j int) bool {
		a, b := custom[i].gvr, custom[j].gvr
		if a.Group != b.Group {
			return a.Group < b.Group
		}
		if a.Version != b.Version {
			return a.Version < b.Version
		}
		return a.Resource < b.Resource
	})
	for _, r := range custom {
		gi, ok := index[r.gvr.Group]
		if !ok {
			gi = len(groups.Items)
			index[r.gvr.Group] = gi
			groups.Items = append(groups.Items, apidiscoveryv2.APIGroupDiscovery{ObjectMeta: metav1.ObjectMeta{Name: r.gvr.Group}})
		}
		g := &groups.Items[gi]
		vi := -1
		for i, v := range g.Versions {
			if v.Version == r.gvr.Version {
				vi = i
			}
		}
		if vi < 0 {
			vi = len(g.Versions)
			g.Versions = append(g.Versions, apidiscoveryv2.APIVersionDiscovery{Version: r.gvr.Version, Freshness: apidiscoveryv2.DiscoveryFreshnessCurrent})
		}
		rd := apidiscoveryv2.APIResourceDiscovery{
			Resource:         r.gvr.Resource,
			ResponseKind:     &metav1.GroupVersionKind{Group: r.gvr.Group, Version: r.gvr.Version, Kind: r.kind},
			Scope:            apidiscoveryv2.ScopeCluster,
			SingularResource: r.singular,
			Verbs:            r.verbs,
			ShortNames:       r.shortNames,
			Categories:       r.categories,
		}
		if r.namespaced {
			rd.Scope = apidiscoveryv2.ScopeNamespace
		}
		if r.status {
			rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "status",
				ResponseKind: rd.ResponseKind, Verbs: []string{"get", "patch", "update"}})
		}
		if r.scale != nil {
			rd.Subresources = append(rd.Subresources, apidiscoveryv2.APISubresourceDiscovery{Subresource: "scale",
				ResponseKind: &metav1.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}, Verbs: []string{"get", "patch", "update"}})
		}
		g.Versions[vi].Resources = append(g.Versions[vi].Resources, rd)
	}
	return core, groups
}

// pruneObject drops the fields a custom resource's schema does not
// declare, as kube-apiserver prunes them, and gives metadata the shape
// of ObjectMeta.
func pruneObject(obj map[string]any, s *spec.Schema) (map[string]any, error) {
	out := deepCopy(obj)
	if md, ok := out["metadata"]; ok {
		var om metav1.ObjectMeta
		raw, _ := json.Marshal(md)
		if err := json.Unmarshal(raw, &om); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("metadata: %v", err))
		}
		data, _ := json.Marshal(om)
		m, _ := decodeObject(data)
		out["metadata"] = m
	}
	for k, v := range out {
		switch k {
		case "apiVersion", "kind", "metadata":
			continue
		}
		if p, ok := s.Properties[k]; ok {
			out[k] = prune(v, &p)
		} else if !preserves(s) {
			delete(out, k)
		}
	}
	return out, nil
}

func preserves(s *spec.Schema) bool {
	v, _ := s.Extensions["x-kubernetes-preserve-unknown-fields"].(bool)
	return v
}

func prune(v any, s *spec.Schema) any {
	switch v := v.(type) {
	case map[string]any:
		embedded, _ := s.Extensions["x-kubernetes-embedded-resource"].(bool)
		for k, x := range v {
			if embedded && (k == "apiVersion" || k == "kind" || k == "metadata") {
				continue
			}
			if p, ok := s.Properties[k]; ok {
				v[k] = prune(x, &p)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Schema != nil {
				v[k] = prune(x, s.AdditionalProperties.Schema)
			} else if s.AdditionalProperties != nil && s.AdditionalProperties.Allows || preserves(s) {
				continue
			} else {
				delete(v, k)
			}
		}
	case []any:
		if s.Items != nil && s.Items.Schema != nil {
			for i := range v {
				v[i] = prune(v[i], s.Items.Schema)
			}
		}
	}
	return v
}
