package fake

import (
	"encoding/base64"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"slices"
	"strings"
	"time"

	jsonpatch "gopkg.in/evanphx/json-patch.v4"
	autoscalingv1 "k8s.io/api/autoscaling/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/validation"
	"k8s.io/apimachinery/pkg/api/validation/path"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/managedfields"
	"k8s.io/apimachinery/pkg/util/strategicpatch"
	"k8s.io/apimachinery/pkg/util/validation/field"
	"sigs.k8s.io/structured-merge-diff/v6/fieldpath"
)

const optimisticLockMsg = "the object has been modified; please apply your changes to the latest version and try again"

func (r *resource) groupKind() schema.GroupKind {
	return schema.GroupKind{Group: r.gvr.Group, Kind: r.kind}
}

// output is obj as the client asked for it: at the request's version, or
// as PartialObjectMetadata.
func (s *Server) output(q *request, obj map[string]any) map[string]any {
	if q.asMeta {
		return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}
	}
	if str(obj, "apiVersion") != q.r.apiVersion() {
		obj = without(obj)
		obj["apiVersion"] = q.r.apiVersion()
	}
	return obj
}

func (s *Server) handleGet(w http.ResponseWriter, q *request) {
	s.mu.Lock()
	st := s.objects[q.r.gr()][key(q.ns, q.name)]
	s.mu.Unlock()
	if st == nil {
		writeError(w, apierrors.NewNotFound(q.r.gr(), q.name))
		return
	}
	if q.sub == "scale" {
		writeJSON(w, http.StatusOK, scaleOf(q.r, st.obj))
		return
	}
	writeJSON(w, http.StatusOK, s.output(q, st.obj))
}

func (s *Server) handleCreate(w http.ResponseWriter, q *request, obj map[string]any) {
	if q.sub != "" {
		writeError(w, methodNotAllowed(q, "POST"))
		return
	}
	var out map[string]any
	var err error
	s.write(q.r, func() { out, err = s.create(q, obj, false) }, &err)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusCreated, s.output(q, out))
}

// write runs a write under mu, then the garbage collector's work if it is
// on. A resource no longer served (its CRD just went) fails with 404.
func (s *Server) write(r *resource, f func(), err *error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.resources[r.gvr] != r {
		*err = notFoundPath()
		return
	}
	f()
	s.collectGarbage()
}

// createInternal creates an object as the server itself would.
func (s *Server) createInternal(r *resource, ns string, obj map[string]any) (map[string]any, error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.create(&request{r: r, ns: ns, verb: "create", manager: "kube-apiserver"}, obj, false)
}

func (s *Server) newUID() string {
	var b [16]byte
	for i := range b {
		b[i] = byte(s.rnd.Uint32())
	}
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	return fmt.Sprintf("%x-%x-%x-%x-%x", b[0:4], b[4:6], b[6:8], b[8:10], b[10:])
}

func (s *Server) timestamp() string {
	return s.now().UTC().Truncate(time.Second).Format(time.RFC3339)
}

const nameChars = "bcdfghjklmnpqrstvwxz2456789"

// checkKind sets obj's apiVersion and kind to the resource's, refusing
// others as kube-apiserver's decoder does.
func checkKind(r *resource, obj map[string]any) error {
	av, k := str(obj, "apiVersion"), str(obj, "kind")
	if r.custom && (av == "" || k == "") {
		body := string(encode(obj))
		short := body
		if len(short) > 30 {
			short = short[:30]
		}
		missing := "Kind"
		if k != "" {
			missing = "Version"
		}
		return apierrors.NewBadRequest(fmt.Sprintf("the object provided is unrecognized (must be of type %s): Object '%s' is missing in '%s' (%s ...)", r.kind, missing, body, short))
	}
	if k != "" && k != r.kind || av != "" && schema.FromAPIVersionAndKind(av, k).Group != r.gvr.Group {
		gv, _ := schema.ParseGroupVersion(av)
		internal := r.gvr.Group
		if internal == "" {
			internal = "core"
		}
		if i := strings.IndexByte(internal, '.'); i >= 0 {
			internal = internal[:i]
		}
		return apierrors.NewBadRequest(fmt.Sprintf("%s in version %q cannot be handled as a %s: converting (%s.%s) to (%s.%s): unknown conversion",
			k, gv.Version, r.kind, gv.Version, k, internal, r.kind))
	}
	obj["apiVersion"], obj["kind"] = r.apiVersion(), r.kind
	return nil
}

// nameValidator is the name rule of the resource's kind.
func nameValidator(r *resource) validation.ValidateNameFunc {
	if r.custom {
		return func(name string, prefix bool) []string { return path.IsValidPathSegmentName(name) }
	}
	if r.gvr.Group == "" && (r.gvr.Resource == "namespaces" || r.gvr.Resource == "services") {
		return validation.NameIsDNSLabel
	}
	return validation.NameIsDNSSubdomain
}

// create stores a new object; the caller holds mu. applied says that a
// server-side apply has already recorded its managedFields.
func (s *Server) create(q *request, obj map[string]any, applied bool) (map[string]any, error) {
	r := q.r
	if err := checkKind(r, obj); err != nil {
		return nil, err
	}
	md := metadata(obj)
	if ns := str(md, "namespace"); r.namespaced && ns != "" && ns != q.ns {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if r.namespaced {
		md["namespace"] = q.ns
	} else {
		delete(md, "namespace")
	}
	if str(md, "resourceVersion") != "" {
		return nil, plainError(http.StatusInternalServerError, "resourceVersion should not be set on objects to be created")
	}
	if str(md, "name") == "" {
		if gn := str(md, "generateName"); gn != "" {
			if len(gn) > 58 {
				gn = gn[:58]
			}
			b := make([]byte, 5)
			for i := range b {
				b[i] = nameChars[s.rnd.IntN(len(nameChars))]
			}
			md["name"] = gn + string(b)
		}
	}
	md["uid"] = s.newUID()
	md["creationTimestamp"] = s.timestamp()
	for _, k := range []string{"deletionTimestamp", "deletionGracePeriodSeconds", "selfLink", "generation"} {
		delete(md, k)
	}
	if r.generation() {
		md["generation"] = int64(1)
	}
	if r.status {
		delete(obj, "status")
	}
	isNS := r.gvr.Group == "" && r.gvr.Resource == "namespaces"
	if isNS {
		namespaceLabel(obj)
	}
	if errs := validation.ValidateObjectMetaAccessor(u(obj), r.namespaced, nameValidator(r), field.NewPath("metadata")); len(errs) > 0 {
		return nil, apierrors.NewInvalid(r.groupKind(), str(md, "name"), errs)
	}
	if r.namespaced {
		nsObj := s.objects[schema.GroupResource{Resource: "namespaces"}][key("", q.ns)]
		if nsObj == nil {
			return nil, apierrors.NewNotFound(schema.GroupResource{Resource: "namespaces"}, q.ns)
		}
		if _, terminating := metadata(nsObj.obj)["deletionTimestamp"]; terminating {
			return nil, apierrors.NewForbidden(r.gr(), str(md, "name"), fmt.Errorf("unable to create new content in namespace %s because it is being terminated", q.ns))
		}
	}
	if isCRD(r) {
		if err := s.validateCRD(obj, nil); err != nil {
			return nil, err
		}
	}
	obj, err := s.shape(r, obj)
	if err != nil {
		return nil, err
	}
	if !applied {
		fm, err := r.fieldManager("")
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		empty, _ := unstructuredConverter{}.New(r.gvk())
		obj = s.recordUpdate(r, fm, empty.(*unstructured.Unstructured).Object, obj, q.manager)
	}
	if isNS {
		namespaceDefaults(obj)
	}
	md = metadata(obj)
	k := key(q.ns, str(md, "name"))
	if s.objects[r.gr()][k] != nil {
		return nil, apierrors.NewAlreadyExists(r.gr(), str(md, "name"))
	}
	if q.dryRun {
		return obj, nil
	}
	rv := s.nextRV()
	md["resourceVersion"] = fmt.Sprint(rv)
	s.objects[r.gr()][k] = &stored{obj: obj, rv: rv}
	s.record(event{rv: rv, typ: "ADDED", gr: r.gr(), key: k, obj: obj})
	if isCRD(r) {
		obj = s.crdChanged(obj)
	}
	return obj, nil
}

// namespaceLabel sets the label kube-apiserver gives every namespace.
func namespaceLabel(obj map[string]any) {
	md := metadata(obj)
	l, _ := md["labels"].(map[string]any)
	if l == nil {
		l = map[string]any{}
		md["labels"] = l
	}
	l["kubernetes.io/metadata.name"] = str(md, "name")
}

// namespaceDefaults sets what a namespace's strategy defaults.
func namespaceDefaults(obj map[string]any) {
	if _, ok := getPath(obj, []string{"spec", "finalizers"}); !ok {
		setPath(obj, []string{"spec", "finalizers"}, []any{"kubernetes"})
	}
	if _, ok := getPath(obj, []string{"status", "phase"}); !ok {
		setPath(obj, []string{"status", "phase"}, "Active")
	}
}

// shape gives obj the form kube-apiserver stores: through its Go type for
// a built-in kind (unknown fields dropped), pruned by its schema for a
// custom resource.
func (s *Server) shape(r *resource, obj map[string]any) (map[string]any, error) {
	if r.gvr.Group == "" && r.gvr.Resource == "secrets" {
		secretStringData(obj)
	}
	if r.typed {
		o, err := s.b.scheme.New(r.gvk())
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		if err := json.Unmarshal(encode(obj), o); err != nil {
			return nil, apierrors.NewBadRequest(fmt.Sprintf("the body of the request could not be decoded as %s: %v", r.kind, err))
		}
		data, err := json.Marshal(o)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out, err := decodeObject(data)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		out["apiVersion"], out["kind"] = r.apiVersion(), r.kind
		return out, nil
	}
	if r.schema != nil {
		return pruneObject(obj, r.schema)
	}
	return obj, nil
}

// secretStringData moves a Secret's stringData into data, as
// kube-apiserver's conversion does, and defaults its type.
func secretStringData(obj map[string]any) {
	if t, _ := obj["type"].(string); t == "" {
		obj["type"] = "Opaque"
	}
	sd, ok := obj["stringData"].(map[string]any)
	delete(obj, "stringData")
	if !ok || len(sd) == 0 {
		return
	}
	data, _ := obj["data"].(map[string]any)
	if data == nil {
		data = map[string]any{}
		obj["data"] = data
	}
	for k, v := range sd {
		s, _ := v.(string)
		data[k] = base64.StdEncoding.EncodeToString([]byte(s))
	}
}

func (s *Server) handleUpdate(w http.ResponseWriter, q *request, obj map[string]any) {
	var out map[string]any
	var err error
	s.write(q.r, func() { out, err = s.update(q, obj) }, &err)
	if err != nil {
		writeError(w, err)
		return
	}
	if q.sub == "scale" {
		writeJSON(w, http.StatusOK, scaleOf(q.r, out))
		return
	}
	writeJSON(w, http.StatusOK, s.output(q, out))
}

// update replaces an object (PUT); the caller holds mu.
func (s *Server) update(q *request, obj map[string]any) (map[string]any, error) {
	r := q.r
	old := s.objects[r.gr()][key(q.ns, q.name)]
	if q.sub == "scale" {
		return s.updateScale(q, old, obj, false, false)
	}
	if err := checkKind(r, obj); err != nil {
		return nil, err
	}
	md := metadata(obj)
	if n := str(md, "name"); n != "" && n != q.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, q.name))
	}
	if ns := str(md, "namespace"); r.namespaced && ns != "" && ns != q.ns {
		return nil, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if old == nil {
		return nil, apierrors.NewNotFound(r.gr(), q.name)
	}
	rv := str(md, "resourceVersion")
	if rv == "" && r.custom {
		return nil, apierrors.NewInvalid(storeGroupKind(r), q.name, field.ErrorList{field.Invalid(field.NewPath("metadata", "resourceVersion"), uint64(0), "must be specified for an update")})
	}
	if rv != "" && rv != str(metadata(old.obj), "resourceVersion") {
		return nil, apierrors.NewConflict(r.gr(), q.name, errors.New(optimisticLockMsg))
	}
	if uid, oldUID := str(md, "uid"), str(metadata(old.obj), "uid"); uid != "" && uid != oldUID {
		return nil, apierrors.NewConflict(r.gr(), q.name, fmt.Errorf("StorageError: invalid object, Code: 4, Key: %s, ResourceVersion: 0, AdditionalErrorMsg: Precondition failed: UID in precondition: %v, UID in object meta: %v",
			storageKey(r, q.ns, q.name), uid, oldUID))
	}
	return s.commitUpdate(q, old, obj, false)
}

// commitUpdate stores obj as the new state of old, with the rules of
// kube-apiserver's update; the caller holds mu and has checked the
// preconditions. applied says that a server-side apply has recorded its
// managedFields.
func (s *Server) commitUpdate(q *request, old *stored, obj map[string]any, applied bool) (map[string]any, error) {
	r := q.r
	obj["apiVersion"], obj["kind"] = r.apiVersion(), r.kind
	md := metadata(obj)
	om := metadata(old.obj)
	md["name"] = q.name
	if r.namespaced {
		md["namespace"] = q.ns
	} else {
		delete(md, "namespace")
	}
	if str(md, "uid") == "" {
		md["uid"] = om["uid"]
	}
	for _, k := range []string{"creationTimestamp", "deletionTimestamp", "deletionGracePeriodSeconds", "generation"} {
		if v, ok := om[k]; ok {
			md[k] = v
		} else {
			delete(md, k)
		}
	}
	md["resourceVersion"] = om["resourceVersion"]
	delete(md, "selfLink")
	switch {
	case q.sub == "status" && !r.custom:
		// A built-in kind's status write keeps the request's metadata
		// (but the labels of the apps kinds) and the old everything else.
		next := deepCopy(old.obj)
		delete(next, "status")
		if st, ok := obj["status"]; ok {
			next["status"] = st
		}
		next["metadata"] = md
		if r.gvr.Group == "apps" {
			if l, ok := om["labels"]; ok {
				md["labels"] = runtime.DeepCopyJSONValue(l)
			} else {
				delete(md, "labels")
			}
		}
		obj = next
	case q.sub == "status":
		st, hasStatus := obj["status"]
		mf, hasMF := md["managedFields"]
		obj = deepCopy(old.obj)
		delete(obj, "status")
		if hasStatus {
			obj["status"] = st
		}
		md = metadata(obj)
		if hasMF {
			md["managedFields"] = mf
		} else {
			delete(md, "managedFields")
		}
	case r.status:
		if st, ok := old.obj["status"]; ok {
			obj["status"] = runtime.DeepCopyJSONValue(st)
		} else {
			delete(obj, "status")
		}
	}
	if r.gvr.Group == "" && r.gvr.Resource == "namespaces" {
		namespaceLabel(obj)
		namespaceDefaults(obj)
	}
	errs := validation.ValidateObjectMetaAccessor(u(obj), r.namespaced, nameValidator(r), field.NewPath("metadata"))
	errs = append(errs, validation.ValidateObjectMetaAccessorUpdate(u(obj), u(old.obj), field.NewPath("metadata"))...)
	if len(errs) > 0 {
		return nil, apierrors.NewInvalid(r.groupKind(), q.name, errs)
	}
	if isCRD(r) {
		if err := s.validateCRD(obj, old.obj); err != nil {
			return nil, err
		}
	}
	obj, err := s.shape(r, obj)
	if err != nil {
		return nil, err
	}
	if !applied {
		fm, err := r.fieldManager(q.sub)
		if err != nil {
			return nil, apierrors.NewInternalError(err)
		}
		obj = s.recordUpdate(r, fm, old.obj, obj, q.manager)
	}
	md = metadata(obj)
	if r.generation() && specChanged(r, old.obj, obj) {
		g, _ := om["generation"].(int64)
		md["generation"] = g + 1
	}
	if sameButVersion(old.obj, obj) {
		return old.obj, nil
	}
	if q.dryRun {
		return obj, nil
	}
	k := key(q.ns, q.name)
	rv := s.nextRV()
	md["resourceVersion"] = fmt.Sprint(rv)
	if _, deleting := md["deletionTimestamp"]; deleting && len(stringSlice(md["finalizers"])) == 0 {
		// What goes is the object as stored, at a new resourceVersion;
		// the answer is the object as the update left it, at the
		// resourceVersion it had.
		gone := deepCopy(old.obj)
		metadata(gone)["resourceVersion"] = fmt.Sprint(rv)
		delete(s.objects[r.gr()], k)
		s.record(event{rv: rv, typ: "DELETED", gr: r.gr(), key: k, obj: gone, prev: old.obj})
		s.deleted(r, gone)
		md["resourceVersion"] = om["resourceVersion"]
		return obj, nil
	}
	s.objects[r.gr()][k] = &stored{obj: obj, rv: rv}
	s.record(event{rv: rv, typ: "MODIFIED", gr: r.gr(), key: k, obj: obj, prev: old.obj})
	if isCRD(r) {
		obj = s.crdChanged(obj)
	}
	return obj, nil
}

// recordUpdate records in obj's managedFields what manager changed from
// live. The field manager sees built-in kinds as kube-apiserver's does,
// converted from their Go types (where empty structs marked omitempty
// are absent).
func (s *Server) recordUpdate(r *resource, fm *managedfields.FieldManager, live, obj map[string]any, manager string) map[string]any {
	res := fm.UpdateNoErrors(u(s.managedForm(r, live)), u(s.managedForm(r, obj)), manager)
	mf, ok := metadata(res.(*unstructured.Unstructured).Object)["managedFields"]
	obj = deepCopy(obj)
	if ok {
		metadata(obj)["managedFields"] = mf
	} else {
		delete(metadata(obj), "managedFields")
	}
	return obj
}

// managedForm is obj as the field manager sees it.
func (s *Server) managedForm(r *resource, obj map[string]any) map[string]any {
	if !r.typed {
		return deepCopy(obj)
	}
	o, err := s.b.scheme.New(r.gvk())
	if err != nil || json.Unmarshal(encode(obj), o) != nil {
		return deepCopy(obj)
	}
	m, err := runtime.DefaultUnstructuredConverter.ToUnstructured(o)
	if err != nil {
		return deepCopy(obj)
	}
	if av, ok := obj["apiVersion"]; ok {
		m["apiVersion"] = av
	}
	if k, ok := obj["kind"]; ok {
		m["kind"] = k
	}
	return m
}

// specChanged reports a change that bumps metadata.generation: anything
// but metadata (and status, for resources with a status subresource).
func specChanged(r *resource, a, b map[string]any) bool {
	keys := []string{"metadata", "apiVersion", "kind"}
	if r.status {
		keys = append(keys, "status")
	}
	return !equalJSON(without(a, keys...), without(b, keys...))
}

func (s *Server) handlePatch(w http.ResponseWriter, q *request, mt string, data []byte) {
	var out map[string]any
	var created bool
	var err error
	s.write(q.r, func() { out, created, err = s.patch(q, mt, data) }, &err)
	if err != nil {
		writeError(w, err)
		return
	}
	code := http.StatusOK
	if created {
		code = http.StatusCreated
	}
	if q.sub == "scale" {
		writeJSON(w, code, scaleOf(q.r, out))
		return
	}
	writeJSON(w, code, s.output(q, out))
}

func unsupportedPatch(mt string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnsupportedMediaType,
		Reason: metav1.StatusReasonUnsupportedMediaType,
		Message: fmt.Sprintf("the body of the request was in an unknown format - accepted media types include: %s, %s, %s",
			"application/json-patch+json", "application/merge-patch+json", "application/apply-patch+yaml")}}
}

// patch applies a patch of media type mt; the caller holds mu.
func (s *Server) patch(q *request, mt string, data []byte) (map[string]any, bool, error) {
	r := q.r
	strategic := mt == string(types.StrategicMergePatchType)
	switch mt {
	case string(types.JSONPatchType), string(types.MergePatchType):
	case string(types.StrategicMergePatchType):
		if !r.typed {
			return nil, false, unsupportedPatch(mt)
		}
	case string(types.ApplyYAMLPatchType):
		return s.apply(q, data)
	default:
		return nil, false, unsupportedPatch(mt)
	}
	old := s.objects[r.gr()][key(q.ns, q.name)]
	if old == nil {
		return nil, false, apierrors.NewNotFound(r.gr(), q.name)
	}
	var target map[string]any = old.obj
	if q.sub == "scale" {
		target = scaleMap(r, old.obj)
	}
	orig := encode(target)
	var patched []byte
	var err error
	var probe any
	if mt == string(types.JSONPatchType) {
		var ops []map[string]any
		if err := json.Unmarshal(data, &ops); err != nil {
			return nil, false, apierrors.NewBadRequest("error decoding patch: " + strings.ReplaceAll(err.Error(), "[]map[string]interface {}", "[]handlers.jsonPatchOp"))
		}
	} else if err := json.Unmarshal(data, &probe); err != nil {
		return nil, false, apierrors.NewBadRequest("error decoding patch: " + err.Error())
	}
	switch {
	case mt == string(types.JSONPatchType):
		var p jsonpatch.Patch
		if p, err = jsonpatch.DecodePatch(data); err == nil {
			if patched, err = p.Apply(orig); err != nil {
				return nil, false, &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusUnprocessableEntity,
					Reason: metav1.StatusReasonInvalid, Details: &metav1.StatusDetails{}, Message: "the server rejected our request due to an error in our request"}}
			}
		}
	case strategic && q.sub == "scale":
		patched, err = strategicpatch.StrategicMergePatch(orig, data, &autoscalingv1.Scale{})
	case strategic:
		o, nerr := s.b.scheme.New(r.gvk())
		if nerr != nil {
			return nil, false, apierrors.NewInternalError(nerr)
		}
		patched, err = strategicpatch.StrategicMergePatch(orig, data, o)
	default:
		patched, err = jsonpatch.MergePatch(orig, data)
	}
	if err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	obj, err := decodeObject(patched)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	if q.sub == "scale" {
		out, err := s.updateScale(q, old, obj, false, false)
		return out, false, err
	}
	md := metadata(obj)
	if n := str(md, "name"); n != q.name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, q.name))
	}
	if ns := str(md, "namespace"); r.namespaced && ns != q.ns {
		return nil, false, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	if rv := str(md, "resourceVersion"); rv != "" && rv != str(metadata(old.obj), "resourceVersion") {
		return nil, false, apierrors.NewConflict(r.gr(), q.name, errors.New(optimisticLockMsg))
	}
	out, err := s.commitUpdate(q, old, obj, false)
	return out, false, err
}

// apply is server-side apply; the caller holds mu.
func (s *Server) apply(q *request, data []byte) (map[string]any, bool, error) {
	r := q.r
	if q.param("fieldManager") == "" {
		return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "PatchOptions"}, "",
			field.ErrorList{field.Required(field.NewPath("fieldManager"), "is required for apply patch")})
	}
	js, err := yamlToJSON(data)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	patch, err := decodeObject(js)
	if err != nil {
		return nil, false, apierrors.NewBadRequest(err.Error())
	}
	if q.sub == "scale" {
		out, err := s.updateScale(q, s.objects[r.gr()][key(q.ns, q.name)], patch, true, q.flag("force"))
		return out, false, err
	}
	if str(patch, "apiVersion") == "" || str(patch, "kind") == "" {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("invalid object type: %s", schema.FromAPIVersionAndKind(str(patch, "apiVersion"), str(patch, "kind"))))
	}
	if err := checkKind(r, patch); err != nil {
		return nil, false, err
	}
	pm := metadata(patch)
	if n := str(pm, "name"); n != "" && n != q.name {
		return nil, false, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", n, q.name))
	}
	if ns := str(pm, "namespace"); r.namespaced && ns != "" && ns != q.ns {
		return nil, false, apierrors.NewBadRequest("the namespace of the provided object does not match the namespace sent on the request")
	}
	fm, err := r.fieldManager(q.sub)
	if err != nil {
		return nil, false, apierrors.NewInternalError(err)
	}
	force := q.flag("force")
	old := s.objects[r.gr()][key(q.ns, q.name)]
	if old == nil {
		if q.sub != "" {
			return nil, false, apierrors.NewNotFound(r.gr(), q.name)
		}
		if str(pm, "resourceVersion") != "" {
			return nil, false, apierrors.NewConflict(r.gr(), q.name, errors.New(optimisticLockMsg))
		}
		empty, _ := unstructuredConverter{}.New(r.gvk())
		eu := empty.(*unstructured.Unstructured)
		eu.SetName(q.name)
		eu.SetNamespace(q.ns)
		res, err := fm.Apply(eu, u(patch), q.manager, force)
		if err != nil {
			return nil, false, applyError(err)
		}
		obj := res.(*unstructured.Unstructured).Object
		metadata(obj)["name"] = q.name
		out, err := s.create(q, obj, true)
		return out, err == nil, err
	}
	if rv := str(pm, "resourceVersion"); rv != "" && rv != str(metadata(old.obj), "resourceVersion") {
		return nil, false, apierrors.NewConflict(r.gr(), q.name, errors.New(optimisticLockMsg))
	}
	res, err := fm.Apply(u(s.managedForm(r, old.obj)), u(patch), q.manager, force)
	if err != nil {
		return nil, false, applyError(err)
	}
	out, err := s.commitUpdate(q, old, res.(*unstructured.Unstructured).Object, true)
	return out, false, err
}

func applyError(err error) error {
	if _, ok := err.(apierrors.APIStatus); ok {
		return err
	}
	return plainError(http.StatusInternalServerError, err.Error())
}

// plainError is a Status with a code and a message only, as
// kube-apiserver answers errors that are not of its API.
func plainError(code int, msg string) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: int32(code), Message: msg}}
}

// storeGroupKind is how kube-apiserver's storage names a resource in its
// errors: its group and plural name.
func storeGroupKind(r *resource) schema.GroupKind {
	return schema.GroupKind{Group: r.gvr.Group, Kind: r.gvr.Resource}
}

// storageKey is the etcd key kube-apiserver keeps an object under.
func storageKey(r *resource, ns, name string) string {
	p := "/registry/" + r.gvr.Resource
	if r.custom {
		p = "/registry/" + r.gvr.Group + "/" + r.gvr.Resource
	}
	if ns != "" {
		p += "/" + ns
	}
	return p + "/" + name
}

// scaleOf returns the Scale of obj.
func scaleOf(r *resource, obj map[string]any) *autoscalingv1.Scale {
	md := metadata(obj)
	sc := &autoscalingv1.Scale{
		TypeMeta: metav1.TypeMeta{Kind: "Scale", APIVersion: "autoscaling/v1"},
		ObjectMeta: metav1.ObjectMeta{Name: str(md, "name"), Namespace: str(md, "namespace"), UID: types.UID(str(md, "uid")),
			ResourceVersion: str(md, "resourceVersion")},
	}
	if t, err := time.Parse(time.RFC3339, str(md, "creationTimestamp")); err == nil {
		sc.CreationTimestamp = metav1.NewTime(t)
	}
	if v, ok := getPath(obj, dotted(r.scale.spec)); ok {
		n, _ := v.(int64)
		sc.Spec.Replicas = int32(n)
	}
	if v, ok := getPath(obj, dotted(r.scale.status)); ok {
		n, _ := v.(int64)
		sc.Status.Replicas = int32(n)
	}
	if r.custom {
		if r.scale.selector != "" {
			if v, ok := getPath(obj, dotted(r.scale.selector)); ok {
				sc.Status.Selector, _ = v.(string)
			}
		}
		return sc
	}
	switch v, _ := getPath(obj, []string{"spec", "selector"}); sel := v.(type) {
	case map[string]any:
		if _, ok := sel["matchLabels"]; ok || sel["matchExpressions"] != nil {
			var ls metav1.LabelSelector
			if json.Unmarshal(encode(sel), &ls) == nil {
				if s, err := metav1.LabelSelectorAsSelector(&ls); err == nil {
					sc.Status.Selector = s.String()
				}
			}
		} else {
			set := labels.Set{}
			for k, v := range sel {
				set[k], _ = v.(string)
			}
			sc.Status.Selector = labels.SelectorFromSet(set).String()
		}
	}
	return sc
}

func scaleMap(r *resource, obj map[string]any) map[string]any {
	data, _ := json.Marshal(scaleOf(r, obj))
	m, _ := decodeObject(data)
	return m
}

// updateScale writes a Scale's replicas to its object; the caller holds
// mu. With apply, scale is an apply patch. Its managedFields are kept as
// kube-apiserver keeps them: the Scale's own field manager records the
// write, and managedfields.ScaleHandler maps the entries to the object.
func (s *Server) updateScale(q *request, old *stored, scale map[string]any, apply, force bool) (map[string]any, error) {
	r := q.r
	if old == nil {
		return nil, apierrors.NewNotFound(r.gr(), q.name)
	}
	var sc autoscalingv1.Scale
	if err := json.Unmarshal(encode(scale), &sc); err != nil {
		return nil, apierrors.NewBadRequest(err.Error())
	}
	if sc.Name != "" && sc.Name != q.name {
		return nil, apierrors.NewBadRequest(fmt.Sprintf("the name of the object (%s) does not match the name on the URL (%s)", sc.Name, q.name))
	}
	if sc.ResourceVersion != "" && sc.ResourceVersion != str(metadata(old.obj), "resourceVersion") {
		return nil, apierrors.NewConflict(r.gr(), q.name, errors.New(optimisticLockMsg))
	}
	if sc.Spec.Replicas < 0 {
		return nil, apierrors.NewInvalid(schema.GroupKind{Group: "autoscaling", Kind: "Scale"}, q.name,
			field.ErrorList{field.Invalid(field.NewPath("spec", "replicas"), sc.Spec.Replicas, "must be greater than or equal to 0")})
	}
	path := make([]any, 0, 2)
	for _, p := range dotted(r.scale.spec) {
		path = append(path, p)
	}
	h := managedfields.NewScaleHandler(u(old.obj).GetManagedFields(), r.gvk().GroupVersion(),
		managedfields.ResourcePathMappings{r.apiVersion(): fieldpath.MakePathOrDie(path...)})
	entries, err := h.ToSubresource()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	live := scaleMap(r, old.obj)
	lu := u(live)
	lu.SetManagedFields(entries)
	sfm, err := s.scaleFieldManager()
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	var res runtime.Object
	if apply {
		if res, err = sfm.Apply(lu, u(scale), q.manager, force); err != nil {
			return nil, applyError(err)
		}
	} else {
		next := scaleMap(r, old.obj)
		setPath(next, []string{"spec", "replicas"}, int64(sc.Spec.Replicas))
		res = sfm.UpdateNoErrors(lu, u(next), q.manager)
	}
	ru := res.(*unstructured.Unstructured)
	replicas, _, _ := unstructured.NestedInt64(ru.Object, "spec", "replicas")
	parentEntries, err := h.ToParent(ru.GetManagedFields())
	if err != nil {
		return nil, apierrors.NewInternalError(err)
	}
	obj := deepCopy(old.obj)
	setPath(obj, dotted(r.scale.spec), replicas)
	ou := u(obj)
	ou.SetManagedFields(parentEntries)
	sq := *q
	sq.sub = "scale"
	return s.commitUpdate(&sq, old, ou.Object, true)
}

// scaleFieldManager is the field manager of autoscaling/v1 Scale, for
// the scale subresource; the caller holds mu.
func (s *Server) scaleFieldManager() (*managedfields.FieldManager, error) {
	if s.scaleFM == nil {
		gvk := schema.GroupVersionKind{Group: "autoscaling", Version: "v1", Kind: "Scale"}
		conv := unstructuredConverter{}
		fm, err := managedfields.NewDefaultFieldManager(s.b.converter, conv, conv, conv, gvk, gvk.GroupVersion(), "scale", nil)
		if err != nil {
			return nil, err
		}
		s.scaleFM = fm
	}
	return s.scaleFM, nil
}

func (s *Server) handleDelete(w http.ResponseWriter, q *request, opts *metav1.DeleteOptions) {
	var out map[string]any
	var gone bool
	var err error
	s.write(q.r, func() { out, gone, err = s.delete(q, opts) }, &err)
	if err != nil {
		writeError(w, err)
		return
	}
	if gone && !returnsDeleted(q.r) {
		md := metadata(out)
		writeJSON(w, http.StatusOK, metav1.Status{TypeMeta: metav1.TypeMeta{Kind: "Status", APIVersion: "v1"}, Status: metav1.StatusSuccess,
			Details: &metav1.StatusDetails{Name: str(md, "name"), Group: q.r.gvr.Group, Kind: q.r.gvr.Resource, UID: types.UID(str(md, "uid"))}})
		return
	}
	writeJSON(w, http.StatusOK, s.output(q, out))
}

// returnsDeleted reports whether a delete answers with the deleted object
// (else with a Status).
func returnsDeleted(r *resource) bool {
	return r.gvr.Group == "" && r.gvr.Resource == "pods"
}

// delete deletes an object, or marks it deleted while finalizers remain;
// gone says it is gone. The caller holds mu.
func (s *Server) delete(q *request, opts *metav1.DeleteOptions) (obj map[string]any, gone bool, err error) {
	r := q.r
	k := key(q.ns, q.name)
	old := s.objects[r.gr()][k]
	if old == nil {
		return nil, false, apierrors.NewNotFound(r.gr(), q.name)
	}
	om := metadata(old.obj)
	if p := opts.Preconditions; p != nil {
		kind := schema.GroupResource{Group: r.gvr.Group, Resource: r.kind}
		if p.UID != nil && string(*p.UID) != str(om, "uid") {
			return nil, false, apierrors.NewConflict(kind, q.name, fmt.Errorf("the UID in the precondition (%s) does not match the UID in record (%s). The object might have been deleted and then recreated", *p.UID, str(om, "uid")))
		}
		if p.ResourceVersion != nil && *p.ResourceVersion != str(om, "resourceVersion") {
			return nil, false, apierrors.NewConflict(kind, q.name, fmt.Errorf("the ResourceVersion in the precondition (%s) does not match the ResourceVersion in record (%s). The object might have been modified", *p.ResourceVersion, str(om, "resourceVersion")))
		}
	}
	finalizers := stringSlice(om["finalizers"])
	add := ""
	if opts.PropagationPolicy != nil {
		switch *opts.PropagationPolicy {
		case metav1.DeletePropagationOrphan:
			add = metav1.FinalizerOrphanDependents
		case metav1.DeletePropagationForeground:
			add = metav1.FinalizerDeleteDependents
		case metav1.DeletePropagationBackground:
		default:
			return nil, false, apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "DeleteOptions"}, "",
				field.ErrorList{field.NotSupported(field.NewPath("propagationPolicy"), *opts.PropagationPolicy, []string{"Foreground", "Background", "Orphan", "nil"})})
		}
	} else if opts.OrphanDependents != nil && *opts.OrphanDependents {
		add = metav1.FinalizerOrphanDependents
	}
	if add != "" && !slices.Contains(finalizers, add) {
		finalizers = append(finalizers, add)
	}
	_, deleting := om["deletionTimestamp"]
	if r.gvr.Group == "" && r.gvr.Resource == "namespaces" && !deleting && !q.dryRun {
		return s.deleteNamespace(r, k, old), false, nil
	}
	isPod := r.gvr.Group == "" && r.gvr.Resource == "pods"
	if grace := podGrace(old.obj, opts); isPod && grace > 0 {
		// A Pod on a node waits for its kubelet: it is marked, with
		// the time by which it should be gone.
		if cur, ok := om["deletionGracePeriodSeconds"].(int64); deleting && ok && cur <= grace {
			return old.obj, false, nil
		}
		obj := deepCopy(old.obj)
		md := metadata(obj)
		md["deletionTimestamp"] = s.now().Add(time.Duration(grace) * time.Second).UTC().Truncate(time.Second).Format(time.RFC3339)
		md["deletionGracePeriodSeconds"] = grace
		if g, ok := md["generation"].(int64); ok && g > 0 && !deleting {
			md["generation"] = g + 1
		}
		if len(finalizers) > len(stringSlice(om["finalizers"])) {
			fs := make([]any, len(finalizers))
			for i, f := range finalizers {
				fs[i] = f
			}
			md["finalizers"] = fs
		}
		if q.dryRun {
			return obj, false, nil
		}
		rv := s.nextRV()
		md["resourceVersion"] = fmt.Sprint(rv)
		s.objects[r.gr()][k] = &stored{obj: obj, rv: rv}
		s.record(event{rv: rv, typ: "MODIFIED", gr: r.gr(), key: k, obj: obj, prev: old.obj})
		return obj, false, nil
	}
	if len(finalizers) > 0 {
		if deleting && len(finalizers) == len(stringSlice(om["finalizers"])) {
			return old.obj, false, nil
		}
		obj := deepCopy(old.obj)
		md := metadata(obj)
		fs := make([]any, len(finalizers))
		for i, f := range finalizers {
			fs[i] = f
		}
		md["finalizers"] = fs
		if !deleting {
			md["deletionTimestamp"] = s.timestamp()
			md["deletionGracePeriodSeconds"] = int64(0)
			if g, ok := md["generation"].(int64); ok && g > 0 {
				md["generation"] = g + 1
			}
		}
		if q.dryRun {
			return obj, false, nil
		}
		rv := s.nextRV()
		md["resourceVersion"] = fmt.Sprint(rv)
		s.objects[r.gr()][k] = &stored{obj: obj, rv: rv}
		s.record(event{rv: rv, typ: "MODIFIED", gr: r.gr(), key: k, obj: obj, prev: old.obj})
		return obj, false, nil
	}
	if q.dryRun {
		return old.obj, true, nil
	}
	obj = deepCopy(old.obj)
	if isPod && !deleting {
		md := metadata(obj)
		md["deletionTimestamp"] = s.timestamp()
		md["deletionGracePeriodSeconds"] = int64(0)
		if g, ok := md["generation"].(int64); ok && g > 0 {
			md["generation"] = g + 1
		}
	}
	rv := s.nextRV()
	metadata(obj)["resourceVersion"] = fmt.Sprint(rv)
	delete(s.objects[r.gr()], k)
	s.record(event{rv: rv, typ: "DELETED", gr: r.gr(), key: k, obj: obj, prev: old.obj})
	s.deleted(r, obj)
	return obj, true, nil
}

// podGrace is the grace period of a Pod's deletion, as its strategy
// decides: none for a Pod on no node or one that has finished, else the
// request's, else the Pod's terminationGracePeriodSeconds, else 30.
func podGrace(pod map[string]any, opts *metav1.DeleteOptions) int64 {
	if n, _ := getPath(pod, []string{"spec", "nodeName"}); n == nil || n == "" {
		return 0
	}
	if p, _ := getPath(pod, []string{"status", "phase"}); p == "Succeeded" || p == "Failed" {
		return 0
	}
	if opts.GracePeriodSeconds != nil {
		return max(*opts.GracePeriodSeconds, 0)
	}
	if g, ok := getPath(pod, []string{"spec", "terminationGracePeriodSeconds"}); ok {
		if n, ok := g.(int64); ok {
			return max(n, 0)
		}
	}
	return 30
}

// deleteNamespace marks a namespace Terminating, as kube-apiserver does,
// then does the namespace controller's work at once: deletes its objects
// (those with finalizers are only marked) and, when none is left, the
// namespace. It returns the Terminating namespace. The caller holds mu.
func (s *Server) deleteNamespace(r *resource, k string, old *stored) map[string]any {
	obj := deepCopy(old.obj)
	md := metadata(obj)
	md["deletionTimestamp"] = s.timestamp()
	md["deletionGracePeriodSeconds"] = int64(0)
	setPath(obj, []string{"status", "phase"}, "Terminating")
	rv := s.nextRV()
	md["resourceVersion"] = fmt.Sprint(rv)
	s.objects[r.gr()][k] = &stored{obj: obj, rv: rv}
	s.record(event{rv: rv, typ: "MODIFIED", gr: r.gr(), key: k, obj: obj, prev: old.obj})
	s.finishNamespace(str(md, "name"))
	return obj
}

// finishNamespace deletes what a Terminating namespace holds, and the
// namespace once it is empty. The caller holds mu.
func (s *Server) finishNamespace(ns string) {
	left := false
	for _, rs := range s.byGR {
		r := rs[0]
		if !r.namespaced {
			continue
		}
		for _, k := range sortedKeys(s.objects[r.gr()]) {
			st := s.objects[r.gr()][k]
			if str(metadata(st.obj), "namespace") != ns {
				continue
			}
			q := &request{r: r, ns: ns, name: str(metadata(st.obj), "name"), verb: "delete", manager: "kube-controller-manager"}
			if _, gone, err := s.delete(q, &metav1.DeleteOptions{}); err != nil || !gone {
				left = true
			}
		}
	}
	nsGR := schema.GroupResource{Resource: "namespaces"}
	st := s.objects[nsGR][key("", ns)]
	if left || st == nil {
		return
	}
	rv := s.nextRV()
	gone := deepCopy(st.obj)
	metadata(gone)["resourceVersion"] = fmt.Sprint(rv)
	delete(s.objects[nsGR], key("", ns))
	s.record(event{rv: rv, typ: "DELETED", gr: nsGR, key: key("", ns), obj: gone, prev: st.obj})
}

// deleted follows the deletion of an object: a CRD takes its resources
// with it, a namespace its objects. The caller holds mu.
func (s *Server) deleted(r *resource, obj map[string]any) {
	switch {
	case isCRD(r):
		s.crdDeleted(obj)
	case r.namespaced:
		ns := str(metadata(obj), "namespace")
		nsObj := s.objects[schema.GroupResource{Resource: "namespaces"}][key("", ns)]
		if nsObj != nil && metadata(nsObj.obj)["deletionTimestamp"] != nil {
			s.finishNamespace(ns)
		}
	}
}

func (s *Server) handleDeleteCollection(w http.ResponseWriter, q *request, opts *metav1.DeleteOptions) {
	sel, err := parseSelectors(q)
	if err != nil {
		writeError(w, err)
		return
	}
	items := []any{}
	var rv int64
	s.write(q.r, func() {
		objs := s.objects[q.r.gr()]
		for _, k := range sortedKeys(objs) {
			st := objs[k]
			md := metadata(st.obj)
			if q.ns != "" && str(md, "namespace") != q.ns || !sel.matches(st.obj) {
				continue
			}
			dq := *q
			dq.name = str(md, "name")
			dq.ns = str(md, "namespace")
			if _, _, err = s.delete(&dq, opts); err != nil {
				return
			}
			items = append(items, listItem(q.r, st.obj))
		}
		rv = s.rv
	}, &err)
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, map[string]any{"apiVersion": q.r.apiVersion(), "kind": q.r.listKind,
		"metadata": map[string]any{"resourceVersion": fmt.Sprint(rv)}, "items": items})
}
