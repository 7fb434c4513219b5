package fake

import (
	"context"
	"encoding/base64"
	"encoding/json"
	"fmt"
	"net/http"
	"slices"
	"sort"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/fields"
	"k8s.io/apimachinery/pkg/labels"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/util/validation/field"
)

// selectors are a request's label and field selectors.
type selectors struct {
	label labels.Selector
	field fields.Selector
}

func parseSelectors(q *request) (selectors, error) {
	sel := selectors{label: labels.Everything(), field: fields.Everything()}
	var err error
	if ls := q.param("labelSelector"); ls != "" {
		if sel.label, err = labels.Parse(ls); err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
	}
	if fs := q.param("fieldSelector"); fs != "" {
		if sel.field, err = fields.ParseSelector(fs); err != nil {
			return sel, apierrors.NewBadRequest(err.Error())
		}
		extra := q.r.fields
		if !q.r.custom {
			extra = builtinFields[q.r.gr()]
		}
		for _, req := range sel.field.Requirements() {
			if req.Field == "metadata.name" || req.Field == "metadata.namespace" || slices.Contains(extra, req.Field) {
				continue
			}
			if !q.r.custom && len(extra) == 0 {
				return sel, apierrors.NewBadRequest(fmt.Sprintf("%q is not a known field selector: only %q, %q", req.Field, "metadata.name", "metadata.namespace"))
			}
			return sel, apierrors.NewBadRequest(fmt.Sprintf("field label not supported: %s", req.Field))
		}
	}
	return sel, nil
}

// builtinFields are the fields besides metadata.name and
// metadata.namespace that built-in kinds can be selected by.
var builtinFields = map[schema.GroupResource][]string{
	{Resource: "pods"}: {"spec.nodeName", "spec.restartPolicy", "spec.schedulerName", "spec.serviceAccountName",
		"spec.hostNetwork", "status.phase", "status.podIP", "status.podIPs", "status.nominatedNodeName"},
	{Resource: "events"}: {"involvedObject.kind", "involvedObject.namespace", "involvedObject.name", "involvedObject.uid",
		"involvedObject.apiVersion", "involvedObject.resourceVersion", "involvedObject.fieldPath", "reason",
		"reportingComponent", "source", "type"},
	{Resource: "secrets"}:                    {"type"},
	{Resource: "namespaces"}:                 {"status.phase"},
	{Resource: "nodes"}:                      {"spec.unschedulable"},
	{Resource: "replicationcontrollers"}:     {"status.replicas"},
	{Resource: "services"}:                   {"spec.clusterIP", "spec.type"},
	{Group: "apps", Resource: "replicasets"}: {"status.replicas"},
	{Group: "batch", Resource: "jobs"}:       {"status.successful"},
	{Group: "certificates.k8s.io", Resource: "certificatesigningrequests"}: {"spec.signerName"},
}

func (sel selectors) matches(obj map[string]any) bool {
	if obj == nil {
		return false
	}
	md := metadata(obj)
	if !sel.label.Empty() {
		set := labels.Set{}
		if l, ok := md["labels"].(map[string]any); ok {
			for k, v := range l {
				set[k], _ = v.(string)
			}
		}
		if !sel.label.Matches(set) {
			return false
		}
	}
	if !sel.field.Empty() {
		set := fields.Set{}
		for _, req := range sel.field.Requirements() {
			v, _ := getPath(obj, dotted(req.Field))
			set[req.Field] = fieldString(v)
		}
		if !sel.field.Matches(set) {
			return false
		}
	}
	return true
}

// listItem is an object as a list holds it: built-in kinds without their
// apiVersion and kind, as kube-apiserver encodes typed lists.
func listItem(r *resource, obj map[string]any) map[string]any {
	if r.typed {
		return without(obj, "apiVersion", "kind")
	}
	if str(obj, "apiVersion") != r.apiVersion() {
		obj = without(obj)
		obj["apiVersion"] = r.apiVersion()
	}
	return obj
}

// continueToken is what a continue parameter holds.
type continueToken struct {
	V     string `json:"v"`
	RV    int64  `json:"rv"`
	Start string `json:"start"`
}

func tooLarge(rv, current int64) error {
	return &apierrors.StatusError{ErrStatus: metav1.Status{Status: metav1.StatusFailure, Code: http.StatusGatewayTimeout,
		Reason:  metav1.StatusReasonTimeout,
		Message: fmt.Sprintf("Timeout: Too large resource version: %d, current: %d", rv, current),
		Details: &metav1.StatusDetails{Causes: []metav1.StatusCause{{Type: metav1.CauseTypeResourceVersionTooLarge, Message: "Too large resource version"}}, RetryAfterSeconds: 1}}}
}

// stateAt returns the objects of gr as they were at rv; the caller holds
// mu.
func (s *Server) stateAt(gr schema.GroupResource, rv int64) (map[string]*stored, error) {
	if rv < s.compacted {
		return nil, apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", rv, s.compacted))
	}
	out := make(map[string]*stored, len(s.objects[gr]))
	for k, v := range s.objects[gr] {
		out[k] = v
	}
	for i := len(s.events) - 1; i >= 0 && s.events[i].rv > rv; i-- {
		ev := s.events[i]
		if ev.gr != gr {
			continue
		}
		if ev.prev == nil {
			delete(out, ev.key)
		} else {
			prv, _ := strconv.ParseInt(str(metadata(ev.prev), "resourceVersion"), 10, 64)
			out[ev.key] = &stored{obj: ev.prev, rv: prv}
		}
	}
	return out, nil
}

func (s *Server) handleList(w http.ResponseWriter, q *request) {
	sel, err := parseSelectors(q)
	if err != nil {
		writeError(w, err)
		return
	}
	limit, _ := strconv.ParseInt(q.param("limit"), 10, 64)
	rvParam, match := q.param("resourceVersion"), q.param("resourceVersionMatch")
	var errs field.ErrorList
	if match != "" && rvParam == "" {
		errs = append(errs, field.Forbidden(field.NewPath("resourceVersionMatch"), "resourceVersionMatch is forbidden unless resourceVersion is provided"))
	}
	if _, ok := q.query["sendInitialEvents"]; ok {
		errs = append(errs, field.Forbidden(field.NewPath("sendInitialEvents"), "sendInitialEvents is forbidden for list"))
	}
	if len(errs) > 0 {
		writeError(w, invalidListOptions(errs...))
		return
	}
	var rv int64
	if rvParam != "" {
		if rv, err = strconv.ParseInt(rvParam, 10, 64); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rvParam)))
			return
		}
	}
	if rvParam == "0" {
		// Served from kube-apiserver's cache, in one piece.
		limit = 0
	}
	list, err := func() (map[string]any, error) {
		s.mu.Lock()
		defer s.mu.Unlock()
		return s.list(q, sel, limit, rv, match)
	}()
	if err != nil {
		writeError(w, err)
		return
	}
	writeJSON(w, http.StatusOK, list)
}

// list builds a list's answer; the caller holds mu (and writes the
// answer after letting go of it).
func (s *Server) list(q *request, sel selectors, limit, rv int64, match string) (map[string]any, error) {
	var objs map[string]*stored
	listRV := s.rv
	start := ""
	switch cont := q.param("continue"); {
	case cont != "":
		var tok continueToken
		data, derr := base64.RawURLEncoding.DecodeString(cont)
		if derr == nil {
			derr = json.Unmarshal(data, &tok)
		}
		if derr != nil || tok.V != "meta.k8s.io/v1" {
			return nil, apierrors.NewBadRequest("continue key is not valid: incorrect encoded start resourceVersion (version meta.k8s.io/v1)")
		}
		if tok.RV < s.compacted {
			return nil, apierrors.NewResourceExpired("The provided continue parameter is too old to display a consistent list result. You can start a new list without the continue parameter, or use the continue token in this response to retrieve the remainder of the results. Continuing with the provided token results in an inconsistent list - objects that were created, modified, or deleted between the time the first chunk was returned and now may show up in the list.")
		}
		objs, _ = s.stateAt(q.r.gr(), tok.RV)
		listRV, start = tok.RV, tok.Start
	case match == string(metav1.ResourceVersionMatchExact):
		if rv > s.rv {
			return nil, tooLarge(rv, s.rv)
		}
		if rv < s.compacted {
			return nil, apierrors.NewResourceExpired("The resourceVersion for the provided list is too old.")
		}
		objs, _ = s.stateAt(q.r.gr(), rv)
		listRV = rv
	default:
		if rv > s.rv {
			return nil, tooLarge(rv, s.rv)
		}
		objs = s.objects[q.r.gr()]
	}
	items := []any{}
	keys := sortedKeys(objs)
	i := sort.SearchStrings(keys, start)
	next := ""
	remaining := int64(0)
	for ; i < len(keys); i++ {
		k := keys[i]
		if k < start {
			continue
		}
		o := objs[k].obj
		if q.ns != "" && str(metadata(o), "namespace") != q.ns || !sel.matches(o) {
			continue
		}
		if limit > 0 && int64(len(items)) == limit {
			next = k
			for ; i < len(keys); i++ {
				o := objs[keys[i]].obj
				if (q.ns == "" || str(metadata(o), "namespace") == q.ns) && sel.matches(o) {
					remaining++
				}
			}
			break
		}
		if q.asMeta {
			items = append(items, map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": o["metadata"]})
		} else {
			items = append(items, listItem(q.r, o))
		}
	}
	lm := map[string]any{"resourceVersion": strconv.FormatInt(listRV, 10)}
	if next != "" {
		data, _ := json.Marshal(continueToken{V: "meta.k8s.io/v1", RV: listRV, Start: next})
		lm["continue"] = base64.RawURLEncoding.EncodeToString(data)
		if sel.label.Empty() && sel.field.Empty() {
			lm["remainingItemCount"] = remaining
		}
	}
	list := map[string]any{"apiVersion": q.r.apiVersion(), "kind": q.r.listKind, "metadata": lm, "items": items}
	if q.asMeta {
		list["apiVersion"], list["kind"] = "meta.k8s.io/v1", "PartialObjectMetadataList"
	}
	return list, nil
}

func invalidListOptions(errs ...*field.Error) error {
	return apierrors.NewInvalid(schema.GroupKind{Group: "meta.k8s.io", Kind: "ListOptions"}, "", errs)
}

// watchState is an open watch.
type watchState struct {
	bookmarks      bool
	bookmarkWanted bool
}

func (s *Server) handleWatch(w http.ResponseWriter, req *http.Request, q *request) {
	sel, err := parseSelectors(q)
	if err != nil {
		writeError(w, err)
		return
	}
	rvParam := q.param("resourceVersion")
	var from int64
	if rvParam != "" {
		if from, err = strconv.ParseInt(rvParam, 10, 64); err != nil {
			writeError(w, apierrors.NewBadRequest(fmt.Sprintf("invalid resource version %q", rvParam)))
			return
		}
	}
	initial := q.flag("sendInitialEvents")
	ws := &watchState{bookmarks: q.flag("allowWatchBookmarks")}
	if initial && q.param("resourceVersionMatch") != string(metav1.ResourceVersionMatchNotOlderThan) {
		writeError(w, invalidListOptions(field.Forbidden(field.NewPath("resourceVersionMatch"), "sendInitialEvents requires setting resourceVersionMatch to NotOlderThan")))
		return
	}
	ctx := req.Context()
	if ts := q.param("timeoutSeconds"); ts != "" {
		if n, err := strconv.Atoi(ts); err == nil && n > 0 {
			var cancel func()
			ctx, cancel = context.WithTimeout(ctx, time.Duration(n)*time.Second)
			defer cancel()
		}
	}
	flusher, _ := w.(http.Flusher)
	w.Header().Set("Content-Type", "application/json")
	enc := json.NewEncoder(w)
	send := func(typ string, obj any) bool {
		if err := enc.Encode(map[string]any{"type": typ, "object": obj}); err != nil {
			return false
		}
		if flusher != nil {
			flusher.Flush()
		}
		return true
	}
	gr := q.r.gr()
	out := func(obj map[string]any) map[string]any {
		if q.asMeta {
			return map[string]any{"apiVersion": "meta.k8s.io/v1", "kind": "PartialObjectMetadata", "metadata": obj["metadata"]}
		}
		return s.output(q, obj)
	}
	inNS := func(obj map[string]any) bool { return q.ns == "" || str(metadata(obj), "namespace") == q.ns }

	s.mu.Lock()
	var batch []map[string]any // initial events
	pos := from
	synthetic := rvParam == "" || rvParam == "0" || initial
	if synthetic {
		objs := s.objects[gr]
		for _, k := range sortedKeys(objs) {
			if o := objs[k].obj; inNS(o) && sel.matches(o) {
				batch = append(batch, o)
			}
		}
		pos = s.rv
	} else if from < s.compacted {
		s.mu.Unlock()
		w.WriteHeader(http.StatusOK)
		st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", from, s.compacted)).Status()
		st.Kind, st.APIVersion = "Status", "v1"
		send("ERROR", st)
		return
	}
	s.watches[ws] = struct{}{}
	s.mu.Unlock()
	defer func() {
		s.mu.Lock()
		delete(s.watches, ws)
		s.mu.Unlock()
	}()
	w.WriteHeader(http.StatusOK)
	if flusher != nil {
		flusher.Flush()
	}
	for _, o := range batch {
		if !send("ADDED", out(o)) {
			return
		}
	}
	bookmark := func(rv int64, end bool) bool {
		md := map[string]any{"resourceVersion": strconv.FormatInt(rv, 10)}
		if end {
			md["annotations"] = map[string]any{metav1.InitialEventsAnnotationKey: "true"}
		}
		av, kind := q.r.apiVersion(), q.r.kind
		if q.asMeta {
			av, kind = "meta.k8s.io/v1", "PartialObjectMetadata"
		}
		return send("BOOKMARK", map[string]any{"apiVersion": av, "kind": kind, "metadata": md})
	}
	if initial && ws.bookmarks && !bookmark(pos, true) {
		return
	}
	for {
		s.mu.Lock()
		if pos < s.compacted {
			s.mu.Unlock()
			st := apierrors.NewResourceExpired(fmt.Sprintf("too old resource version: %d (%d)", pos, s.compacted)).Status()
			st.Kind, st.APIVersion = "Status", "v1"
			send("ERROR", st)
			return
		}
		i := sort.Search(len(s.events), func(i int) bool { return s.events[i].rv > pos })
		evs := s.events[i:]
		wantBookmark := ws.bookmarkWanted
		ws.bookmarkWanted = false
		current := s.rv
		changed := s.changed
		s.mu.Unlock()
		for _, ev := range evs {
			pos = ev.rv
			if ev.gr != gr {
				continue
			}
			newIn := inNS(ev.obj) && sel.matches(ev.obj)
			oldIn := ev.prev != nil && inNS(ev.prev) && sel.matches(ev.prev)
			typ, obj := ev.typ, ev.obj
			switch {
			case ev.typ == "DELETED":
				if !oldIn && !newIn {
					continue
				}
			case newIn && !oldIn:
				typ = "ADDED"
			case !newIn && oldIn:
				// It left the selection: the watch sees it go as it
				// was, at the change's resourceVersion.
				typ = "DELETED"
				obj = deepCopy(ev.prev)
				metadata(obj)["resourceVersion"] = strconv.FormatInt(ev.rv, 10)
			case !newIn:
				continue
			}
			if !send(typ, out(obj)) {
				return
			}
		}
		if wantBookmark {
			pos = current
			if !bookmark(current, false) {
				return
			}
		}
		select {
		case <-changed:
		case <-ctx.Done():
			return
		}
	}
}
