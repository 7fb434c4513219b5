package main

// The custom resource corpus (-kind widgets): objects of a CRD,
// bench.loom.dev/v1 Widget, with a nested spec (a template of components,
// storage, backup, config) and a status of its own per object
// (conditions, component states), served as JSON only, as the API server
// serves custom resources: from unstructured maps, so with sorted keys.
// Replicas of one "template" (widgets%templates) have the same spec.

import (
	"encoding/json"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"time"

	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/watch"
)

var (
	widgetGV  = schema.GroupVersion{Group: "bench.loom.dev", Version: "v1"}
	widgetGVR = widgetGV.WithResource("widgets")
	widgetGVK = widgetGV.WithKind("Widget")
)

const widgetPath = "/apis/bench.loom.dev/v1/widgets"

// Widget is the typed form of the custom resource, as a user's operator
// would declare it.
type Widget struct {
	metav1.TypeMeta   `json:",inline"`
	metav1.ObjectMeta `json:"metadata,omitempty"`
	Spec              WidgetSpec   `json:"spec"`
	Status            WidgetStatus `json:"status,omitempty"`
}

type WidgetSpec struct {
	Replicas int32             `json:"replicas"`
	Version  string            `json:"version"`
	Paused   bool              `json:"paused,omitempty"`
	Selector map[string]string `json:"selector"`
	Template WidgetTemplate    `json:"template"`
	Storage  WidgetStorage     `json:"storage"`
	Backup   *WidgetBackup     `json:"backup,omitempty"`
	Config   map[string]string `json:"config,omitempty"`
}

type WidgetTemplate struct {
	Labels     map[string]string `json:"labels"`
	Components []Component       `json:"components"`
}

type Component struct {
	Name      string            `json:"name"`
	Image     string            `json:"image"`
	Args      []string          `json:"args,omitempty"`
	Env       []NameValue       `json:"env,omitempty"`
	Resources map[string]string `json:"resources,omitempty"`
	Ports     []Port            `json:"ports,omitempty"`
}

type NameValue struct {
	Name  string `json:"name"`
	Value string `json:"value"`
}

type Port struct {
	Name     string `json:"name"`
	Port     int32  `json:"port"`
	Protocol string `json:"protocol"`
}

type WidgetStorage struct {
	Class    string `json:"class"`
	Size     string `json:"size"`
	Retain   bool   `json:"retain"`
	Snapshot string `json:"snapshot,omitempty"`
}

type WidgetBackup struct {
	Schedule  string   `json:"schedule"`
	Retention int32    `json:"retention"`
	Targets   []string `json:"targets"`
}

type WidgetStatus struct {
	ObservedGeneration int64              `json:"observedGeneration,omitempty"`
	Phase              string             `json:"phase,omitempty"`
	Endpoint           string             `json:"endpoint,omitempty"`
	Conditions         []metav1.Condition `json:"conditions,omitempty"`
	Components         []ComponentStatus  `json:"components,omitempty"`
}

type ComponentStatus struct {
	Name      string      `json:"name"`
	Ready     bool        `json:"ready"`
	Restarts  int32       `json:"restarts"`
	StartedAt metav1.Time `json:"startedAt"`
}

// DeepCopyObject makes Widget a runtime.Object. Neither informer copies
// objects on the measured path; a JSON round trip is enough here.
func (w *Widget) DeepCopyObject() runtime.Object { return jsonCopy(w) }

// jsonCopy returns a deep copy of v made by a JSON round trip.
func jsonCopy[T any](v *T) *T {
	b, err := json.Marshal(v)
	if err != nil {
		panic(err)
	}
	var c T
	if err := json.Unmarshal(b, &c); err != nil {
		panic(err)
	}
	return &c
}

// WidgetList is the typed list, for client-go's typed informer.
type WidgetList struct {
	metav1.TypeMeta `json:",inline"`
	metav1.ListMeta `json:"metadata,omitempty"`
	Items           []Widget `json:"items"`
}

func (l *WidgetList) DeepCopyObject() runtime.Object { return jsonCopy(l) }

// widgetFor returns the i-th Widget of the corpus.
func widgetFor(i int) *Widget {
	r := rand.New(rand.NewPCG(uint64(i), 43))
	tmpl := i % templates
	tr := rand.New(rand.NewPCG(uint64(tmpl), 8)) // per-template values
	app := fmt.Sprintf("db-%02d", tmpl)
	name := fmt.Sprintf("%s-%05x", app, r.Uint32()&0xfffff)
	ns := fmt.Sprintf("team-%02d", i%37)
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	version := fmt.Sprintf("15.%d.%d", tmpl%9, tmpl%4)
	labels := map[string]string{"app.kubernetes.io/name": app, "app.kubernetes.io/part-of": fmt.Sprintf("shop-%d", tmpl%5), "tier": []string{"primary", "replica", "analytics"}[tmpl%3]}
	comp := func(cname, image string, port int32) Component {
		env := make([]NameValue, 6)
		for j := range env {
			env[j] = NameValue{Name: fmt.Sprintf("%s_SETTING_%d", cname, j), Value: fmt.Sprintf("v-%d-%x", j, tr.Uint64())}
		}
		return Component{
			Name: cname, Image: image, Args: []string{fmt.Sprintf("--port=%d", port), "--log-level=info"},
			Env:       env,
			Resources: map[string]string{"cpu": "500m", "memory": "1Gi", "limits.cpu": "2", "limits.memory": "4Gi"},
			Ports:     []Port{{Name: "main", Port: port, Protocol: "TCP"}, {Name: "metrics", Port: 9187, Protocol: "TCP"}},
		}
	}
	gen := int64(1 + i%3)
	w := &Widget{
		TypeMeta: metav1.TypeMeta{APIVersion: widgetGV.String(), Kind: "Widget"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, Generation: gen,
			UID:               types.UID(fmt.Sprintf("7a1c2e3d-%04x-%04x-%04x-%012x", r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)),
			ResourceVersion:   strconv.Itoa(100000 + i),
			CreationTimestamp: t0,
			Labels:            labels,
			Annotations:       map[string]string{"bench.loom.dev/owner": fmt.Sprintf("team-%02d", i%37), "bench.loom.dev/checksum": fmt.Sprintf("%016x%016x", tr.Uint64(), tr.Uint64())},
			Finalizers:        []string{"bench.loom.dev/cleanup"},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kubectl", Operation: metav1.ManagedFieldsOperationApply, APIVersion: widgetGV.String(), Time: &t0, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:bench.loom.dev/checksum":{},"f:bench.loom.dev/owner":{}},"f:labels":{"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/part-of":{},"f:tier":{}}},"f:spec":{"f:backup":{"f:retention":{},"f:schedule":{},"f:targets":{}},"f:config":{},"f:replicas":{},"f:selector":{},"f:storage":{"f:class":{},"f:retain":{},"f:size":{}},"f:template":{"f:components":{},"f:labels":{}},"f:version":{}}}`)}},
				{Manager: "widget-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: widgetGV.String(), Time: &t0, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{".":{},"f:components":{},"f:conditions":{".":{},"k:{\"type\":\"Available\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Progressing\"}":{".":{},"f:lastTransitionTime":{},"f:message":{},"f:observedGeneration":{},"f:reason":{},"f:status":{},"f:type":{}}},"f:endpoint":{},"f:observedGeneration":{},"f:phase":{}}}`)}},
				{Manager: "widget-operator", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: widgetGV.String(), Time: &t0, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:finalizers":{".":{},"v:\"bench.loom.dev/cleanup\"":{}}}}`)}},
			},
		},
		Spec: WidgetSpec{
			Replicas: int32(1 + tmpl%3), Version: version,
			Selector: map[string]string{"app.kubernetes.io/name": app},
			Template: WidgetTemplate{Labels: labels, Components: []Component{
				comp("server", fmt.Sprintf("registry.example/%s:%s", app, version), 5432),
				comp("exporter", "registry.example/exporter:0.15.0", 9187),
			}},
			Storage: WidgetStorage{Class: []string{"fast", "standard"}[tmpl%2], Size: fmt.Sprintf("%dGi", 10*(1+tmpl%8)), Retain: tmpl%2 == 0},
			Backup:  &WidgetBackup{Schedule: fmt.Sprintf("%d 3 * * *", tmpl%60), Retention: 7, Targets: []string{"s3://backups/" + app, "gs://dr/" + app}},
			Config:  map[string]string{"max_connections": strconv.Itoa(100 + 10*(tmpl%10)), "shared_buffers": "256MB", "work_mem": "4MB", "checksum": fmt.Sprintf("%016x", tr.Uint64())},
		},
		Status: WidgetStatus{
			ObservedGeneration: gen, Phase: "Running",
			Endpoint: fmt.Sprintf("%s.%s.svc:5432", name, ns),
			Conditions: []metav1.Condition{
				{Type: "Available", Status: metav1.ConditionTrue, ObservedGeneration: gen, LastTransitionTime: t0, Reason: "MinimumReplicasAvailable", Message: "all replicas are ready"},
				{Type: "Progressing", Status: metav1.ConditionFalse, ObservedGeneration: gen, LastTransitionTime: t0, Reason: "Complete", Message: "rollout complete"},
			},
			Components: []ComponentStatus{{Name: "server", Ready: true, Restarts: int32(r.IntN(3)), StartedAt: t0}, {Name: "exporter", Ready: true, StartedAt: t0}},
		},
	}
	return w
}

// eventWidget is the Widget of the k-th recorded watch event.
func eventWidget(k, n, events int) *Widget {
	w := widgetFor(eventIndex(k, n, events))
	w.ResourceVersion = strconv.Itoa(listRVNum + k + 1)
	w.Status.Components[0].Restarts++
	w.Status.Conditions[1].LastTransitionTime = metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Second))
	return w
}

// unstructuredJSON encodes v as the API server serves a custom resource:
// through a generic map, so with keys in sorted order.
func unstructuredJSON(v any) ([]byte, error) {
	b, err := json.Marshal(v)
	if err != nil {
		return nil, err
	}
	var m map[string]any
	if err := json.Unmarshal(b, &m); err != nil {
		return nil, err
	}
	return json.Marshal(m)
}

// widgetScheme knows Widget and WidgetList, for client-go's typed client.
func widgetScheme() *runtime.Scheme {
	s := runtime.NewScheme()
	s.AddKnownTypes(widgetGV, &Widget{}, &WidgetList{})
	metav1.AddToGroupVersion(s, widgetGV)
	return s
}

// recordWidgets writes the Widget corpus of n objects and e watch events
// into dir: the same files as record, in JSON only.
func recordWidgets(dir string, n, e int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	write := func(what string, b []byte) error { return os.WriteFile(fileName(dir, mediaJSON, what), b, 0o644) }
	encode := func(w *Widget) (map[string]any, error) {
		b, err := unstructuredJSON(w)
		if err != nil {
			return nil, err
		}
		var m map[string]any
		return m, json.Unmarshal(b, &m)
	}
	event := func(typ watch.EventType, obj any) ([]byte, error) {
		raw, err := unstructuredJSON(obj)
		if err != nil {
			return nil, err
		}
		b, err := json.Marshal(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}})
		return append(b, '\n'), err
	}
	for phase := range 2 {
		suffix, rv := "", listRV()
		if phase == 1 {
			suffix, rv = "-relist", strconv.Itoa(relistRVNum)
		}
		items := make([]map[string]any, n)
		for i := range items {
			w := widgetFor(i)
			if phase == 1 {
				w.ResourceVersion = strconv.Itoa(relistPodRV + i)
			}
			m, err := encode(w)
			if err != nil {
				return err
			}
			// The items of a list carry no apiVersion and kind of their own.
			delete(m, "apiVersion")
			delete(m, "kind")
			items[i] = m
		}
		list := func(items []map[string]any, meta map[string]any) ([]byte, error) {
			return json.Marshal(map[string]any{"apiVersion": widgetGV.String(), "kind": "WidgetList", "metadata": meta, "items": items})
		}
		pages := (n + pageSize - 1) / pageSize
		for p := range pages {
			meta := map[string]any{"resourceVersion": rv}
			if p < pages-1 {
				meta["continue"] = fmt.Sprintf("page-%d", p+1)
				meta["remainingItemCount"] = n - (p+1)*pageSize
			}
			b, err := list(items[p*pageSize:min((p+1)*pageSize, n)], meta)
			if err != nil {
				return err
			}
			if err := write(fmt.Sprintf("list-page-%d%s", p, suffix), b); err != nil {
				return err
			}
		}
		b, err := list(items, map[string]any{"resourceVersion": rv})
		if err != nil {
			return err
		}
		if err := write("list-all"+suffix, b); err != nil {
			return err
		}
		var initial []byte
		for i := range n {
			w := widgetFor(i)
			if phase == 1 {
				w.ResourceVersion = strconv.Itoa(relistPodRV + i)
			}
			ev, err := event(watch.Added, w)
			if err != nil {
				return err
			}
			initial = append(initial, ev...)
		}
		bm := &Widget{TypeMeta: metav1.TypeMeta{APIVersion: widgetGV.String(), Kind: "Widget"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
		ev, err := event(watch.Bookmark, bm)
		if err != nil {
			return err
		}
		if err := write("watch-initial"+suffix, append(initial, ev...)); err != nil {
			return err
		}
	}
	var events []byte
	for k := range e {
		ev, err := event(watch.Modified, eventWidget(k, n, e))
		if err != nil {
			return err
		}
		events = append(events, ev...)
	}
	if err := write("watch-events", events); err != nil {
		return err
	}
	st := apierrors.NewResourceExpired("too old resource version: 1 (2)").Status()
	st.Kind, st.APIVersion = "Status", "v1"
	gone, err := event(watch.Error, &st)
	if err != nil {
		return err
	}
	if err := write("watch-gone", gone); err != nil {
		return err
	}
	return os.WriteFile(filepath.Join(dir, "meta"), fmt.Appendf(nil, "%d %d %d widgets\n", n, e, templates), 0o644)
}
