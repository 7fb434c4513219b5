package fake

import (
	"crypto/sha256"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"io"
	"mime"
	"net/http"
	"strconv"
	"strings"

	apidiscoveryv2 "k8s.io/api/apidiscovery/v2"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/version"
)

// request is a parsed resource request.
type request struct {
	r       *resource
	ns      string
	name    string
	sub     string
	verb    string // get, list, watch, create, update, patch, delete, deletecollection
	query   map[string][]string
	manager string
	dryRun  bool
	asMeta  bool // the response is PartialObjectMetadata
}

func (q *request) param(k string) string {
	if v := q.query[k]; len(v) > 0 {
		return v[0]
	}
	return ""
}

func (q *request) flag(k string) bool {
	v := q.param(k)
	return v == "true" || v == "1"
}

func (s *Server) serveHTTP(w http.ResponseWriter, req *http.Request) {
	defer func() {
		if v := recover(); v != nil {
			if v == http.ErrAbortHandler {
				panic(v)
			}
			writeError(w, apierrors.NewInternalError(fmt.Errorf("fake: panic: %v", v)))
		}
	}()
	p := strings.Trim(req.URL.Path, "/")
	switch {
	case p == "api" || p == "apis":
		s.serveDiscoveryRoot(w, req, p)
		return
	case p == "version":
		info := version.Info{GitVersion: s.b.version, Major: "1", Minor: "36", Platform: "fake"}
		writeJSON(w, http.StatusOK, info)
		return
	case p == "healthz" || p == "readyz" || p == "livez" || strings.HasPrefix(p, "healthz/") || strings.HasPrefix(p, "readyz/") || strings.HasPrefix(p, "livez/"):
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		w.WriteHeader(http.StatusOK)
		io.WriteString(w, "ok")
		return
	}
	parts := strings.Split(p, "/")
	var group, ver string
	switch {
	case parts[0] == "api" && len(parts) >= 2:
		ver, parts = parts[1], parts[2:]
	case parts[0] == "apis" && len(parts) >= 3:
		group, ver, parts = parts[1], parts[2], parts[3:]
	case parts[0] == "apis" && len(parts) == 2:
		s.serveGroup(w, parts[1])
		return
	default:
		pageNotFound(w)
		return
	}
	if len(parts) == 0 {
		s.serveResourceList(w, group, ver)
		return
	}
	q := &request{query: req.URL.Query()}
	if parts[0] == "namespaces" && len(parts) >= 3 && parts[2] != "status" && parts[2] != "finalize" {
		q.ns, parts = parts[1], parts[2:]
	}
	s.mu.Lock()
	q.r = s.lookup(group, ver, parts[0])
	served := s.servesVersion(group, ver)
	s.mu.Unlock()
	if !served {
		pageNotFound(w)
		return
	}
	if q.r == nil || len(parts) > 3 {
		writeError(w, notFoundPath())
		return
	}
	if q.ns != "" && !q.r.namespaced {
		writeError(w, notFoundPath())
		return
	}
	if len(parts) > 1 {
		q.name = parts[1]
	}
	if len(parts) > 2 {
		q.sub = parts[2]
		if !(q.sub == "status" && q.r.status || q.sub == "scale" && q.r.scale != nil) {
			writeError(w, notFoundPath())
			return
		}
	}
	q.manager = q.param("fieldManager")
	if q.manager == "" {
		q.manager, _, _ = strings.Cut(req.Header.Get("User-Agent"), "/")
	}
	q.dryRun = len(q.query["dryRun"]) > 0
	q.asMeta = strings.Contains(req.Header.Get("Accept"), "as=PartialObjectMetadata")
	switch req.Method {
	case http.MethodGet:
		switch {
		case q.name != "":
			q.verb = "get"
			s.handleGet(w, q)
		case q.flag("watch"):
			q.verb = "watch"
			s.handleWatch(w, req, q)
		default:
			q.verb = "list"
			s.handleList(w, q)
		}
	case http.MethodPost:
		if q.name != "" {
			writeError(w, methodNotAllowed(q, "POST"))
			return
		}
		q.verb = "create"
		body, err := s.decodeBody(req, q)
		if err != nil {
			writeError(w, err)
			return
		}
		s.handleCreate(w, q, body)
	case http.MethodPut:
		if q.name == "" {
			writeError(w, methodNotAllowed(q, "PUT"))
			return
		}
		q.verb = "update"
		body, err := s.decodeBody(req, q)
		if err != nil {
			writeError(w, err)
			return
		}
		s.handleUpdate(w, q, body)
	case http.MethodPatch:
		if q.name == "" {
			writeError(w, methodNotAllowed(q, "PATCH"))
			return
		}
		q.verb = "patch"
		data, err := io.ReadAll(req.Body)
		if err != nil {
			writeError(w, apierrors.NewBadRequest(err.Error()))
			return
		}
		mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
		s.handlePatch(w, q, mt, data)
	case http.MethodDelete:
		var opts metav1.DeleteOptions
		if data, _ := io.ReadAll(req.Body); len(strings.TrimSpace(string(data))) > 0 {
			if err := json.Unmarshal(data, &opts); err != nil {
				writeError(w, apierrors.NewBadRequest(err.Error()))
				return
			}
		}
		if gp := q.param("gracePeriodSeconds"); gp != "" {
			if n, err := strconv.ParseInt(gp, 10, 64); err == nil {
				opts.GracePeriodSeconds = &n
			}
		}
		if pp := q.param("propagationPolicy"); pp != "" {
			p := metav1.DeletionPropagation(pp)
			opts.PropagationPolicy = &p
		}
		if q.name == "" {
			q.verb = "deletecollection"
			s.handleDeleteCollection(w, q, &opts)
			return
		}
		q.verb = "delete"
		s.handleDelete(w, q, &opts)
	default:
		writeError(w, methodNotAllowed(q, req.Method))
	}
}

// decodeBody reads a create or update body: JSON, YAML, or protobuf for
// built-in kinds.
func (s *Server) decodeBody(req *http.Request, q *request) (map[string]any, error) {
	data, err := io.ReadAll(req.Body)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	mt, _, _ := mime.ParseMediaType(req.Header.Get("Content-Type"))
	switch mt {
	case "application/vnd.kubernetes.protobuf":
		obj, _, err := s.proto.Decode(data, nil, nil)
		if err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded: %v", err))
		}
		if data, err = json.Marshal(obj); err != nil {
			return nil, apierrors.NewInternalError(err)
		}
	case "application/yaml":
		if data, err = yamlToJSON(data); err != nil {
			return nil, apierrors.NewBadRequest(err.Error())
		}
	}
	obj, err := decodeObject(data)
	if err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	return obj, nil
}

func notFoundPath() error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{
		Status: metav1.StatusFailure, Message: "the server could not find the requested resource",
		Reason: metav1.StatusReasonNotFound, Details: &metav1.StatusDetails{}, Code: http.StatusNotFound,
	}}
}

func methodNotAllowed(q *request, method string) error {
	gr := schema.GroupResource{}
	if q.r != nil {
		gr = q.r.gr()
	}
	return apierrors.NewMethodNotSupported(gr, method)
}

// writeError writes err as a metav1.Status.
func writeError(w http.ResponseWriter, err error) {
	var st metav1.Status
	if se, ok := err.(apierrors.APIStatus); ok {
		st = se.Status()
	} else {
		st = apierrors.NewInternalError(err).Status()
	}
	st.Kind, st.APIVersion = "Status", "v1"
	writeJSON(w, int(st.Code), st)
}

func writeJSON(w http.ResponseWriter, code int, v any) {
	data, err := json.Marshal(v)
	if err != nil {
		code = http.StatusInternalServerError
		data = []byte(`{"kind":"Status","apiVersion":"v1","metadata":{},"status":"Failure","message":"encoding failed","code":500}`)
	}
	w.Header().Set("Content-Type", "application/json")
	w.WriteHeader(code)
	w.Write(append(data, '\n'))
}

// serveDiscoveryRoot serves /api and /apis: aggregated discovery when
// asked for, else the legacy lists.
func (s *Server) serveDiscoveryRoot(w http.ResponseWriter, req *http.Request, root string) {
	s.mu.Lock()
	core, groups := s.discovery()
	s.mu.Unlock()
	if strings.Contains(req.Header.Get("Accept"), "g=apidiscovery.k8s.io") {
		list := core
		if root == "apis" {
			list = groups
		}
		list.Kind, list.APIVersion = "APIGroupDiscoveryList", "apidiscovery.k8s.io/v2"
		data, _ := json.Marshal(list)
		w.Header().Set("Content-Type", "application/json;g=apidiscovery.k8s.io;v=v2;as=APIGroupDiscoveryList")
		w.WriteHeader(http.StatusOK)
		w.Write(data)
		return
	}
	if root == "api" {
		writeJSON(w, http.StatusOK, metav1.APIVersions{TypeMeta: metav1.TypeMeta{Kind: "APIVersions"}, Versions: []string{"v1"},
			ServerAddressByClientCIDRs: []metav1.ServerAddressByClientCIDR{{ClientCIDR: "0.0.0.0/0", ServerAddress: "fake.loom.invalid:443"}}})
		return
	}
	gl := metav1.APIGroupList{TypeMeta: metav1.TypeMeta{Kind: "APIGroupList", APIVersion: "v1"}}
	for _, g := range groups.Items {
		gl.Groups = append(gl.Groups, apiGroup(g))
	}
	writeJSON(w, http.StatusOK, gl)
}

func apiGroup(g apidiscoveryv2.APIGroupDiscovery) metav1.APIGroup {
	ag := metav1.APIGroup{TypeMeta: metav1.TypeMeta{Kind: "APIGroup", APIVersion: "v1"}, Name: g.Name}
	for _, v := range g.Versions {
		ag.Versions = append(ag.Versions, metav1.GroupVersionForDiscovery{GroupVersion: g.Name + "/" + v.Version, Version: v.Version})
	}
	if len(ag.Versions) > 0 {
		ag.PreferredVersion = ag.Versions[0]
	}
	return ag
}

func (s *Server) serveGroup(w http.ResponseWriter, group string) {
	s.mu.Lock()
	_, groups := s.discovery()
	s.mu.Unlock()
	for _, g := range groups.Items {
		if g.Name == group {
			writeJSON(w, http.StatusOK, apiGroup(g))
			return
		}
	}
	writeError(w, notFoundPath())
}

func (s *Server) serveResourceList(w http.ResponseWriter, group, ver string) {
	s.mu.Lock()
	core, groups := s.discovery()
	storage := map[string]string{}
	for gvr, r := range s.resources {
		if gvr.Group == group && gvr.Version == ver && r.storageVersion != "" {
			storage[gvr.Resource] = r.storageVersion
		}
	}
	s.mu.Unlock()
	list := groups
	if group == "" {
		list = core
	}
	for _, g := range list.Items {
		if g.Name != group {
			continue
		}
		for _, v := range g.Versions {
			if v.Version != ver {
				continue
			}
			gv := schema.GroupVersion{Group: group, Version: ver}.String()
			rl := metav1.APIResourceList{TypeMeta: metav1.TypeMeta{Kind: "APIResourceList", APIVersion: "v1"}, GroupVersion: gv}
			for _, r := range v.Resources {
				hashVersion := ver
				if sv := storage[r.Resource]; sv != "" {
					hashVersion = sv
				}
				ar := metav1.APIResource{Name: r.Resource, SingularName: r.SingularResource, Namespaced: r.Scope == apidiscoveryv2.ScopeNamespace,
					Verbs: r.Verbs, ShortNames: r.ShortNames, Categories: r.Categories}
				if r.ResponseKind != nil {
					ar.Kind = r.ResponseKind.Kind
					ar.StorageVersionHash = storageVersionHash(group, hashVersion, ar.Kind)
				}
				rl.APIResources = append(rl.APIResources, ar)
				for _, sr := range r.Subresources {
					sar := metav1.APIResource{Name: r.Resource + "/" + sr.Subresource, Namespaced: ar.Namespaced, Verbs: sr.Verbs}
					if k := sr.ResponseKind; k != nil {
						sar.Kind = k.Kind
						if k.Group != group || k.Version != ver {
							sar.Group, sar.Version = k.Group, k.Version
						}
					}
					rl.APIResources = append(rl.APIResources, sar)
				}
			}
			writeJSON(w, http.StatusOK, rl)
			return
		}
	}
	pageNotFound(w)
}

// pageNotFound is kube-apiserver's answer for a path outside the API.
func pageNotFound(w http.ResponseWriter) {
	w.Header().Set("Content-Type", "text/plain; charset=utf-8")
	w.WriteHeader(http.StatusNotFound)
	io.WriteString(w, "404 page not found\n")
}

// storageVersionHash is the hash discovery gives of the version a
// resource is stored in (here, the one it is served in).
func storageVersionHash(group, version, kind string) string {
	sum := sha256.Sum256([]byte(group + "/" + version + "/" + kind))
	return base64.StdEncoding.EncodeToString(sum[:8])
}
