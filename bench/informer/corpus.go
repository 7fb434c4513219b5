package main

// The corpus: N realistic Pods, deterministic (seeded per Pod), encoded
// once with the API server's own encoders (apimachinery's CodecFactory)
// into the byte streams a real API server would send:
//
//   - list pages of 500 (PodList with continue tokens) and one
//     unpaginated list, in JSON and protobuf;
//   - a streaming list (watch with sendInitialEvents=true): one ADDED
//     event per Pod and the "k8s.io/initial-events-end" bookmark;
//   - a recorded watch stream of E MODIFIED events after the list's
//     resourceVersion;
//   - a watch ERROR event carrying a 410 Expired Status, which makes a
//     client relist.
//
// The files are written once (record) and memory-mapped by the replay
// server (load), so that the corpus is not on the Go heap of the process
// being measured and the server costs nothing but a write(2) per request.

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"time"

	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
)

const (
	pageSize  = 500
	listRVNum = 200000 // resourceVersion of the list; events follow it

	mediaJSON     = "application/json"
	mediaProtobuf = "application/vnd.kubernetes.protobuf"
)

// The forced relist lists a second snapshot, in which every Pod has
// changed (resourceVersion relistPodRV+i), at relistRVNum: a client has
// finished relisting once every cached Pod carries its new version.
const (
	relistRVNum = 300000
	relistPodRV = 250000
)

func listRV() string       { return strconv.Itoa(listRVNum) }
func finalRV(e int) string { return strconv.Itoa(listRVNum + e) }

// templates is the number of workloads (Deployments) the Pods belong to;
// replicas of one workload share their spec, as in real clusters. The
// -templates flag of -record changes it.
var templates = 50

// podFor returns the i-th Pod of the corpus.
func podFor(i int) *corev1.Pod {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	tmpl := i % templates
	tr := rand.New(rand.NewPCG(uint64(tmpl), 7)) // per-workload values
	app := fmt.Sprintf("svc-%02d", tmpl)
	hash := fmt.Sprintf("%010x", tr.Uint64()&0xffffffffff)
	rsName := app + "-" + hash
	name := fmt.Sprintf("%s-%05x", rsName, r.Uint32()&0xfffff)
	ns := fmt.Sprintf("team-%02d", i%37)
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	rsUID := types.UID(fmt.Sprintf("5f0b5f4e-%04x-%04x-%04x-%012x", tr.Uint32()&0xffff, tr.Uint32()&0xffff, tr.Uint32()&0xffff, tr.Uint64()&0xffffffffffff))
	env := make([]corev1.EnvVar, 8)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-%x", j, tr.Uint64())}
	}
	env = append(env, corev1.EnvVar{Name: "POD_NAME", ValueFrom: &corev1.EnvVarSource{FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.name"}}})
	image := fmt.Sprintf("registry.example/%s:1.%d.%d", app, tmpl%7, tmpl%3)
	container := func(cname, image string, port int32) corev1.Container {
		return corev1.Container{
			Name: cname, Image: image,
			Command: []string{"/bin/server"}, Args: []string{fmt.Sprintf("--port=%d", port), "--log-level=info", "--metrics-addr=:9090"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: port, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			Env:   env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/app"}, {Name: "data", MountPath: "/var/lib/app"},
				{Name: "kube-api-access-" + hash[:5], MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			LivenessProbe:            &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(port), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			TerminationMessagePath:   "/dev/termination-log",
			TerminationMessagePolicy: corev1.TerminationMessageReadFile,
			ImagePullPolicy:          corev1.PullIfNotPresent,
		}
	}
	cond := func(t corev1.PodConditionType) corev1.PodCondition {
		return corev1.PodCondition{Type: t, Status: corev1.ConditionTrue, LastTransitionTime: t0}
	}
	cstatus := func(cname, image string) corev1.ContainerStatus {
		return corev1.ContainerStatus{
			Name: cname, Image: image, ImageID: image[:strings.LastIndexByte(image, ':')] + "@sha256:" + fmt.Sprintf("%016x%016x%016x%016x", tr.Uint64(), tr.Uint64(), tr.Uint64(), tr.Uint64()),
			ContainerID: "containerd://" + fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64()), Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}},
		}
	}
	tokenExp := int64(3607)
	mode := int32(420)
	sidecar := "registry.example/proxy:2.4.0"
	podIP := fmt.Sprintf("10.244.%d.%d", i%250, (i/250)%250)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, GenerateName: rsName + "-",
			UID:               types.UID(fmt.Sprintf("0c6d7a2e-%04x-%04x-%04x-%012x", r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)),
			ResourceVersion:   strconv.Itoa(100000 + i),
			CreationTimestamp: t0,
			Labels: map[string]string{
				"app.kubernetes.io/name": app, "app.kubernetes.io/instance": app + "-prod",
				"app.kubernetes.io/version": fmt.Sprintf("1.%d.%d", tmpl%7, tmpl%3), "app.kubernetes.io/part-of": fmt.Sprintf("shop-%d", tmpl%5),
				"pod-template-hash": hash, "tier": []string{"frontend", "backend", "worker"}[tmpl%3],
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-01T11:00:00Z",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
				"checksum/config":                   fmt.Sprintf("%016x%016x%016x%016x", tr.Uint64(), tr.Uint64(), tr.Uint64(), tr.Uint64()),
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: rsName, UID: rsUID, Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t0, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: specFields(string(rsUID), env)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t0, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(statusFields)}},
				{Manager: "config-operator", Operation: metav1.ManagedFieldsOperationApply, APIVersion: "v1", Time: &t0, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:annotations":{"f:checksum/config":{},"f:prometheus.io/port":{},"f:prometheus.io/scrape":{}},"f:labels":{"f:app.kubernetes.io/part-of":{}}}}`)}},
			},
		},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{container("app", image, 8080), container("proxy", sidecar, 15001)},
			InitContainers: []corev1.Container{{Name: "init", Image: "registry.example/init:1.0", Command: []string{"/bin/init"}, TerminationMessagePath: "/dev/termination-log", TerminationMessagePolicy: corev1.TerminationMessageReadFile, ImagePullPolicy: corev1.PullIfNotPresent}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: app + "-config"}, DefaultMode: &mode}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access-" + hash[:5], VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &tokenExp, Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
					{DownwardAPI: &corev1.DownwardAPIProjection{Items: []corev1.DownwardAPIVolumeFile{{Path: "namespace", FieldRef: &corev1.ObjectFieldSelector{APIVersion: "v1", FieldPath: "metadata.namespace"}}}}},
				}}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: app, DeprecatedServiceAccount: app,
			NodeName: fmt.Sprintf("node-%03d", i%100), SchedulerName: "default-scheduler", TerminationGracePeriodSeconds: ptr(int64(30)),
			EnableServiceLinks: ptr(true), PreemptionPolicy: ptr(corev1.PreemptLowerPriority), Priority: ptr(int32(0)),
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				cond("PodReadyToStartContainers"), cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled),
			},
			HostIP: fmt.Sprintf("10.1.%d.%d", i%100, 7), HostIPs: []corev1.HostIP{{IP: fmt.Sprintf("10.1.%d.%d", i%100, 7)}},
			PodIP: podIP, PodIPs: []corev1.PodIP{{IP: podIP}},
			StartTime:         &t0,
			ContainerStatuses: []corev1.ContainerStatus{cstatus("app", image), cstatus("proxy", sidecar)},
			InitContainerStatuses: []corev1.ContainerStatus{{Name: "init", Image: "registry.example/init:1.0", ImageID: "registry.example/init@sha256:" + strings.Repeat("ab", 32), Ready: true,
				State: corev1.ContainerState{Terminated: &corev1.ContainerStateTerminated{ExitCode: 0, Reason: "Completed", StartedAt: t0, FinishedAt: t0, ContainerID: "containerd://" + fmt.Sprintf("%016x%016x%016x%016x", r.Uint64(), r.Uint64(), r.Uint64(), r.Uint64())}}}},
			QOSClass: corev1.PodQOSBurstable,
		},
	}
}

func ptr[T any](v T) *T { return &v }

// specFields is the FieldsV1 set the ReplicaSet controller owns on a Pod it
// creates, as the API server records it (every leaf field, keyed lists).
func specFields(rsUID string, env []corev1.EnvVar) []byte {
	var b strings.Builder
	b.WriteString(`{"f:metadata":{"f:annotations":{".":{},"f:kubectl.kubernetes.io/restartedAt":{}},"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/instance":{},"f:app.kubernetes.io/name":{},"f:app.kubernetes.io/version":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"` + rsUID + `\"}":{}}},"f:spec":{"f:containers":{`)
	for ci, c := range []string{"app", "proxy"} {
		if ci > 0 {
			b.WriteByte(',')
		}
		b.WriteString(`"k:{\"name\":\"` + c + `\"}":{".":{},"f:args":{},"f:command":{},"f:env":{".":{}`)
		for _, e := range env {
			if e.ValueFrom != nil {
				b.WriteString(`,"k:{\"name\":\"` + e.Name + `\"}":{".":{},"f:name":{},"f:valueFrom":{".":{},"f:fieldRef":{}}}`)
			} else {
				b.WriteString(`,"k:{\"name\":\"` + e.Name + `\"}":{".":{},"f:name":{},"f:value":{}}`)
			}
		}
		b.WriteString(`},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:name":{},"f:ports":{".":{},"k:{\"containerPort\":8080,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}},"k:{\"containerPort\":9090,\"protocol\":\"TCP\"}":{".":{},"f:containerPort":{},"f:name":{},"f:protocol":{}}},"f:readinessProbe":{".":{},"f:failureThreshold":{},"f:httpGet":{".":{},"f:path":{},"f:port":{},"f:scheme":{}},"f:periodSeconds":{},"f:successThreshold":{},"f:timeoutSeconds":{}},"f:resources":{".":{},"f:limits":{".":{},"f:cpu":{},"f:memory":{}},"f:requests":{".":{},"f:cpu":{},"f:memory":{}}},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{},"f:volumeMounts":{".":{},"k:{\"mountPath\":\"/etc/app\"}":{".":{},"f:mountPath":{},"f:name":{}},"k:{\"mountPath\":\"/var/lib/app\"}":{".":{},"f:mountPath":{},"f:name":{}}}}`)
	}
	b.WriteString(`},"f:dnsPolicy":{},"f:enableServiceLinks":{},"f:initContainers":{".":{},"k:{\"name\":\"init\"}":{".":{},"f:command":{},"f:image":{},"f:imagePullPolicy":{},"f:name":{},"f:resources":{},"f:terminationMessagePath":{},"f:terminationMessagePolicy":{}}},"f:restartPolicy":{},"f:schedulerName":{},"f:securityContext":{".":{},"f:runAsNonRoot":{},"f:runAsUser":{}},"f:serviceAccount":{},"f:serviceAccountName":{},"f:terminationGracePeriodSeconds":{},"f:volumes":{".":{},"k:{\"name\":\"config\"}":{".":{},"f:configMap":{".":{},"f:defaultMode":{},"f:name":{}},"f:name":{}},"k:{\"name\":\"data\"}":{".":{},"f:emptyDir":{},"f:name":{}}}}}`)
	return []byte(b.String())
}

const statusFields = `{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Initialized\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"PodReadyToStartContainers\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:hostIPs":{},"f:initContainerStatuses":{},"f:phase":{},"f:podIP":{},"f:podIPs":{".":{},"k:{\"ip\":\"` + `10.244.0.0` + `\"}":{".":{},"f:ip":{}}},"f:startTime":{}}}`

// eventPod is the Pod of the k-th recorded watch event: a status update
// of Pod (k*stride)%n at resourceVersion listRV+k+1.
func eventPod(k, n, events int) *corev1.Pod {
	p := podFor(eventIndex(k, n, events))
	p.ResourceVersion = strconv.Itoa(listRVNum + k + 1)
	t := metav1.NewTime(time.Date(2026, 11, 2, 0, 0, 0, 0, time.UTC).Add(time.Duration(k) * time.Second))
	p.Status.Conditions[2].LastTransitionTime = t
	p.Status.ContainerStatuses[0].RestartCount = 1
	return p
}

func eventIndex(k, n, events int) int {
	stride := max(n/max(events, 1), 1)
	return (k * stride) % n
}

// key returns the namespace/name key of p.
func key(p *corev1.Pod) string { return p.Namespace + "/" + p.Name }

// artifact names, per media type.
func fileName(dir, media, what string) string {
	ext := "json"
	if media == mediaProtobuf {
		ext = "pb"
	}
	return filepath.Join(dir, what+"."+ext)
}

// meta records the corpus size and kind ("pods" or "widgets").
type corpusMeta struct {
	Pods, Events, Templates int
	Kind                    string
}

func codecs() serializer.CodecFactory {
	s := runtime.NewScheme()
	if err := corev1.AddToScheme(s); err != nil {
		panic(err)
	}
	metav1.AddToGroupVersion(s, schema.GroupVersion{Version: "v1"})
	return serializer.NewCodecFactory(s)
}

// record writes the corpus of n Pods and e watch events into dir.
func record(dir string, n, e int) error {
	if err := os.MkdirAll(dir, 0o755); err != nil {
		return err
	}
	cf := codecs()
	pods := make([]corev1.Pod, n)
	for i := range pods {
		pods[i] = *podFor(i)
	}
	relistPods := make([]corev1.Pod, n)
	for i := range relistPods {
		relistPods[i] = *podFor(i)
		relistPods[i].ResourceVersion = strconv.Itoa(relistPodRV + i)
	}
	write := func(name string, b []byte) error { return os.WriteFile(name, b, 0o644) }
	for _, mt := range []string{mediaJSON, mediaProtobuf} {
		info, ok := runtime.SerializerInfoForMediaType(cf.SupportedMediaTypes(), mt)
		if !ok || info.StreamSerializer == nil {
			return fmt.Errorf("no serializer for %s", mt)
		}
		enc := cf.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
		stream := func(each func(emit func(watch.EventType, runtime.Object) error) error) ([]byte, error) {
			var buf bytes.Buffer
			se := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf), info.StreamSerializer.Serializer)
			err := each(func(t watch.EventType, o runtime.Object) error {
				raw, err := runtime.Encode(enc, o)
				if err != nil {
					return err
				}
				return se.Encode(&metav1.WatchEvent{Type: string(t), Object: runtime.RawExtension{Raw: raw}})
			})
			return buf.Bytes(), err
		}
		for phase, pods := range [][]corev1.Pod{pods, relistPods} {
			suffix, rv := "", listRV()
			if phase == 1 {
				suffix, rv = "-relist", strconv.Itoa(relistRVNum)
			}
			// Pages of 500, and the unpaginated list.
			pages := (n + pageSize - 1) / pageSize
			for p := 0; p < pages; p++ {
				l := &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: pods[p*pageSize : min((p+1)*pageSize, n)]}
				if p < pages-1 {
					l.Continue = fmt.Sprintf("page-%d", p+1)
					rem := int64(n - (p+1)*pageSize)
					l.RemainingItemCount = &rem
				}
				b, err := runtime.Encode(enc, l)
				if err != nil {
					return err
				}
				if err := write(fileName(dir, mt, fmt.Sprintf("list-page-%d%s", p, suffix)), b); err != nil {
					return err
				}
			}
			b, err := runtime.Encode(enc, &corev1.PodList{ListMeta: metav1.ListMeta{ResourceVersion: rv}, Items: pods})
			if err != nil {
				return err
			}
			if err := write(fileName(dir, mt, "list-all"+suffix), b); err != nil {
				return err
			}
			// Watch streams.
			initial, err := stream(func(emit func(watch.EventType, runtime.Object) error) error {
				for i := range pods {
					if err := emit(watch.Added, &pods[i]); err != nil {
						return err
					}
				}
				bm := &corev1.Pod{TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"}, ObjectMeta: metav1.ObjectMeta{ResourceVersion: rv, Annotations: map[string]string{metav1.InitialEventsAnnotationKey: "true"}}}
				return emit(watch.Bookmark, bm)
			})
			if err != nil {
				return err
			}
			if err := write(fileName(dir, mt, "watch-initial"+suffix), initial); err != nil {
				return err
			}
		}
		events, err := stream(func(emit func(watch.EventType, runtime.Object) error) error {
			for k := 0; k < e; k++ {
				if err := emit(watch.Modified, eventPod(k, n, e)); err != nil {
					return err
				}
			}
			return nil
		})
		if err != nil {
			return err
		}
		gone, err := stream(func(emit func(watch.EventType, runtime.Object) error) error {
			st := apierrors.NewResourceExpired("too old resource version: 1 (2)").Status()
			st.Kind, st.APIVersion = "Status", "v1"
			return emit(watch.Error, &st)
		})
		if err != nil {
			return err
		}
		for name, b := range map[string][]byte{"watch-events": events, "watch-gone": gone} {
			if err := write(fileName(dir, mt, name), b); err != nil {
				return err
			}
		}
	}
	return os.WriteFile(filepath.Join(dir, "meta"), fmt.Appendf(nil, "%d %d %d\n", n, e, templates), 0o644)
}

// corpus is a recorded corpus, memory-mapped (off the Go heap).
type corpus struct {
	meta  corpusMeta
	files map[string][]byte // by file name
	dir   string
}

func load(dir string) (*corpus, error) {
	c := &corpus{files: map[string][]byte{}, dir: dir}
	m, err := os.ReadFile(filepath.Join(dir, "meta"))
	if err != nil {
		return nil, err
	}
	if _, err := fmt.Sscan(string(m), &c.meta.Pods, &c.meta.Events, &c.meta.Templates); err != nil {
		return nil, err
	}
	c.meta.Kind = "pods"
	if f := strings.Fields(string(m)); len(f) > 3 {
		c.meta.Kind = f[3]
	}
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil, err
	}
	for _, e := range ents {
		if e.Name() == "meta" {
			continue
		}
		f, err := os.Open(filepath.Join(dir, e.Name()))
		if err != nil {
			return nil, err
		}
		st, err := f.Stat()
		if err != nil {
			f.Close()
			return nil, err
		}
		b, err := syscall.Mmap(int(f.Fd()), 0, int(st.Size()), syscall.PROT_READ, syscall.MAP_SHARED|syscall.MAP_POPULATE)
		f.Close()
		if err != nil {
			return nil, err
		}
		c.files[filepath.Join(dir, e.Name())] = b
	}
	return c, nil
}

func (c *corpus) get(media, what string) []byte {
	b, ok := c.files[fileName(c.dir, media, what)]
	if !ok {
		panic("corpus: no " + fileName(c.dir, media, what))
	}
	return b
}
