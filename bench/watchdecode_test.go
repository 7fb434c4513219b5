package bench

// Watch-event decode: Loom's rest.Watcher against client-go's watch decoder
// stack, on the same recorded stream of 10,000 Pod events, in JSON and in
// protobuf framing.
//
// The stream is produced by the encoders the API server itself uses
// (apimachinery's CodecFactory: the embedded object encoder wrapped in a
// metav1.WatchEvent, written by the stream serializer's framer), from a
// deterministic corpus of realistic Pods (managedFields, two containers,
// probes, volumes, status). It is held in memory, so only client decode
// cost is measured.
//
// The client-go side is the exact stack client-go's rest.Request.Watch
// builds for the generated clientset: ClientNegotiator.StreamDecoder over
// CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs)
// .WithoutConversion(), a framer, streaming.NewDecoder,
// restclientwatch.NewDecoder and watch.StreamWatcher, consumed from
// ResultChan(). The Loom side is rest.NewWatcher[corev1.Pod] consumed with
// Next(). Both loops touch each object's name.
//
// Run with: cd bench && go test -run '^$' -bench WatchDecode -benchmem -cpu 1,2 -count 5
// Events/s and allocs/event are reported as custom metrics.

import (
	"bytes"
	"fmt"
	"io"
	"math/rand/v2"
	"mime"
	"net/http"
	"reflect"
	goruntime "runtime"
	"slices"
	"sort"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	"k8s.io/apimachinery/pkg/api/equality"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	"k8s.io/apimachinery/pkg/api/resource"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime"
	"k8s.io/apimachinery/pkg/runtime/serializer"
	"k8s.io/apimachinery/pkg/runtime/serializer/streaming"
	"k8s.io/apimachinery/pkg/types"
	"k8s.io/apimachinery/pkg/util/intstr"
	"k8s.io/apimachinery/pkg/watch"
	"k8s.io/client-go/dynamic"
	"k8s.io/client-go/kubernetes/scheme"
	clientrest "k8s.io/client-go/rest"
	restclientwatch "k8s.io/client-go/rest/watch"

	"github.com/loom-k8s/loom/rest"
)

const (
	streamPods = 10000

	mediaJSON         = "application/json"
	mediaProtobuf     = "application/vnd.kubernetes.protobuf"
	contentTypeProto  = "application/vnd.kubernetes.protobuf;stream=watch"
	contentTypeJSON   = "application/json"
	mediaProtobufFull = mediaProtobuf
)

// benchPod returns the i-th Pod of the corpus.
func benchPod(i int) *corev1.Pod {
	r := rand.New(rand.NewPCG(uint64(i), 42))
	name := fmt.Sprintf("web-%05d-%08x", i, r.Uint32())
	ns := fmt.Sprintf("team-%02d", i%37)
	t0 := metav1.NewTime(time.Date(2026, 11, 1, 12, 0, 0, 0, time.UTC).Add(time.Duration(i) * time.Second))
	env := make([]corev1.EnvVar, 8)
	for j := range env {
		env[j] = corev1.EnvVar{Name: fmt.Sprintf("SETTING_%d", j), Value: fmt.Sprintf("value-%d-%x", j, r.Uint64())}
	}
	container := func(cname, image string) corev1.Container {
		return corev1.Container{
			Name: cname, Image: image,
			Command: []string{"/bin/server"}, Args: []string{"--port=8080", "--log-level=info", "--metrics-addr=:9090"},
			Ports: []corev1.ContainerPort{{Name: "http", ContainerPort: 8080, Protocol: corev1.ProtocolTCP}, {Name: "metrics", ContainerPort: 9090, Protocol: corev1.ProtocolTCP}},
			Env:   env,
			Resources: corev1.ResourceRequirements{
				Requests: corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("100m"), corev1.ResourceMemory: resource.MustParse("128Mi")},
				Limits:   corev1.ResourceList{corev1.ResourceCPU: resource.MustParse("500m"), corev1.ResourceMemory: resource.MustParse("512Mi")},
			},
			VolumeMounts: []corev1.VolumeMount{
				{Name: "config", MountPath: "/etc/app"}, {Name: "data", MountPath: "/var/lib/app"},
				{Name: "kube-api-access", MountPath: "/var/run/secrets/kubernetes.io/serviceaccount", ReadOnly: true},
			},
			LivenessProbe:            &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/healthz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 10, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
			ReadinessProbe:           &corev1.Probe{ProbeHandler: corev1.ProbeHandler{HTTPGet: &corev1.HTTPGetAction{Path: "/readyz", Port: intstr.FromInt32(8080), Scheme: corev1.URISchemeHTTP}}, PeriodSeconds: 5, TimeoutSeconds: 1, SuccessThreshold: 1, FailureThreshold: 3},
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
			Name: cname, Image: image, ImageID: "registry.example/" + cname + "@sha256:" + fmt.Sprintf("%064x", r.Uint64()),
			ContainerID: "containerd://" + fmt.Sprintf("%064x", r.Uint64()), Ready: true, Started: ptr(true),
			State: corev1.ContainerState{Running: &corev1.ContainerStateRunning{StartedAt: t0}},
		}
	}
	tokenExp := int64(3607)
	mode := int32(420)
	return &corev1.Pod{
		TypeMeta: metav1.TypeMeta{APIVersion: "v1", Kind: "Pod"},
		ObjectMeta: metav1.ObjectMeta{
			Name: name, Namespace: ns, GenerateName: fmt.Sprintf("web-%05d-", i),
			UID:               types.UID("0c6d7a2e-" + fmt.Sprintf("%04x-%04x-%04x-%012x", r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint32()&0xffff, r.Uint64()&0xffffffffffff)),
			ResourceVersion:   strconv.Itoa(100000 + i),
			CreationTimestamp: t0,
			Labels: map[string]string{
				"app.kubernetes.io/name": "web", "app.kubernetes.io/instance": fmt.Sprintf("web-%d", i%50),
				"app.kubernetes.io/version": "1.27.3", "pod-template-hash": fmt.Sprintf("%08x", r.Uint32()), "tier": "frontend",
			},
			Annotations: map[string]string{
				"kubectl.kubernetes.io/restartedAt": "2026-11-01T11:00:00Z",
				"prometheus.io/scrape":              "true",
				"prometheus.io/port":                "9090",
			},
			OwnerReferences: []metav1.OwnerReference{{APIVersion: "apps/v1", Kind: "ReplicaSet", Name: fmt.Sprintf("web-%05d", i/10), UID: "5f0b5f4e-1111-2222-3333-444455556666", Controller: ptr(true), BlockOwnerDeletion: ptr(true)}},
			ManagedFields: []metav1.ManagedFieldsEntry{
				{Manager: "kube-controller-manager", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t0, FieldsType: "FieldsV1",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:metadata":{"f:generateName":{},"f:labels":{".":{},"f:app.kubernetes.io/instance":{},"f:app.kubernetes.io/name":{},"f:pod-template-hash":{},"f:tier":{}},"f:ownerReferences":{".":{},"k:{\"uid\":\"5f0b5f4e-1111-2222-3333-444455556666\"}":{}}},"f:spec":{"f:containers":{"k:{\"name\":\"app\"}":{".":{},"f:args":{},"f:command":{},"f:env":{},"f:image":{},"f:imagePullPolicy":{},"f:livenessProbe":{},"f:name":{},"f:ports":{},"f:readinessProbe":{},"f:resources":{},"f:volumeMounts":{}}},"f:dnsPolicy":{},"f:restartPolicy":{},"f:schedulerName":{},"f:volumes":{}}}`)}},
				{Manager: "kubelet", Operation: metav1.ManagedFieldsOperationUpdate, APIVersion: "v1", Time: &t0, FieldsType: "FieldsV1", Subresource: "status",
					FieldsV1: &metav1.FieldsV1{Raw: []byte(`{"f:status":{"f:conditions":{"k:{\"type\":\"ContainersReady\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}},"k:{\"type\":\"Ready\"}":{".":{},"f:lastProbeTime":{},"f:lastTransitionTime":{},"f:status":{},"f:type":{}}},"f:containerStatuses":{},"f:hostIP":{},"f:phase":{},"f:podIP":{},"f:podIPs":{},"f:startTime":{}}}`)}},
			},
		},
		Spec: corev1.PodSpec{
			Containers:     []corev1.Container{container("app", "registry.example/web:1.27.3"), container("sidecar", "registry.example/proxy:2.4.0")},
			InitContainers: []corev1.Container{{Name: "init", Image: "registry.example/init:1.0", Command: []string{"/bin/init"}}},
			Volumes: []corev1.Volume{
				{Name: "config", VolumeSource: corev1.VolumeSource{ConfigMap: &corev1.ConfigMapVolumeSource{LocalObjectReference: corev1.LocalObjectReference{Name: "web-config"}, DefaultMode: &mode}}},
				{Name: "data", VolumeSource: corev1.VolumeSource{EmptyDir: &corev1.EmptyDirVolumeSource{}}},
				{Name: "kube-api-access", VolumeSource: corev1.VolumeSource{Projected: &corev1.ProjectedVolumeSource{DefaultMode: &mode, Sources: []corev1.VolumeProjection{
					{ServiceAccountToken: &corev1.ServiceAccountTokenProjection{ExpirationSeconds: &tokenExp, Path: "token"}},
					{ConfigMap: &corev1.ConfigMapProjection{LocalObjectReference: corev1.LocalObjectReference{Name: "kube-root-ca.crt"}, Items: []corev1.KeyToPath{{Key: "ca.crt", Path: "ca.crt"}}}},
				}}}},
			},
			RestartPolicy: corev1.RestartPolicyAlways, DNSPolicy: corev1.DNSClusterFirst, ServiceAccountName: "web",
			NodeName: fmt.Sprintf("node-%03d", i%100), SchedulerName: "default-scheduler",
			Tolerations: []corev1.Toleration{
				{Key: "node.kubernetes.io/not-ready", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
				{Key: "node.kubernetes.io/unreachable", Operator: corev1.TolerationOpExists, Effect: corev1.TaintEffectNoExecute, TolerationSeconds: ptr(int64(300))},
			},
			SecurityContext: &corev1.PodSecurityContext{RunAsNonRoot: ptr(true), RunAsUser: ptr(int64(1000))},
		},
		Status: corev1.PodStatus{
			Phase: corev1.PodRunning,
			Conditions: []corev1.PodCondition{
				cond(corev1.PodInitialized), cond(corev1.PodReady), cond(corev1.ContainersReady), cond(corev1.PodScheduled), cond("PodReadyToStartContainers"),
			},
			HostIP: fmt.Sprintf("10.1.%d.%d", i%250, (i/250)%250), PodIP: fmt.Sprintf("10.244.%d.%d", i%250, (i/250)%250),
			PodIPs:            []corev1.PodIP{{IP: fmt.Sprintf("10.244.%d.%d", i%250, (i/250)%250)}},
			StartTime:         &t0,
			ContainerStatuses: []corev1.ContainerStatus{cstatus("app", "registry.example/web:1.27.3"), cstatus("sidecar", "registry.example/proxy:2.4.0")},
			QOSClass:          corev1.PodQOSBurstable,
		},
	}
}

func ptr[T any](v T) *T { return &v }

type recorded struct {
	stream      []byte
	contentType string
	events      int
}

var (
	streamOnce sync.Once
	streams    map[string]recorded
)

// recordStreams encodes the corpus with the API server's encoders.
func recordStreams(tb testing.TB) map[string]recorded {
	streamOnce.Do(func() {
		s := runtime.NewScheme()
		if err := corev1.AddToScheme(s); err != nil {
			panic(err)
		}
		metav1.AddToGroupVersion(s, corev1.SchemeGroupVersion)
		codecs := serializer.NewCodecFactory(s)
		streams = map[string]recorded{}
		for _, mt := range []string{mediaJSON, mediaProtobuf} {
			info, ok := runtime.SerializerInfoForMediaType(codecs.SupportedMediaTypes(), mt)
			if !ok || info.StreamSerializer == nil {
				panic("no stream serializer for " + mt)
			}
			embedded := codecs.EncoderForVersion(info.Serializer, corev1.SchemeGroupVersion)
			var buf bytes.Buffer
			enc := streaming.NewEncoder(info.StreamSerializer.Framer.NewFrameWriter(&buf), info.StreamSerializer.Serializer)
			for i := 0; i < streamPods; i++ {
				raw, err := runtime.Encode(embedded, benchPod(i))
				if err != nil {
					panic(err)
				}
				typ := watch.Modified
				switch i % 10 {
				case 0:
					typ = watch.Added
				case 9:
					typ = watch.Deleted
				}
				if err := enc.Encode(&metav1.WatchEvent{Type: string(typ), Object: runtime.RawExtension{Raw: raw}}); err != nil {
					panic(err)
				}
			}
			ct := contentTypeJSON
			if mt == mediaProtobuf {
				ct = contentTypeProto
			}
			streams[mt] = recorded{stream: buf.Bytes(), contentType: ct, events: streamPods}
		}
	})
	return streams
}

// clientGoWatch builds client-go's watch decoder stack over body, as
// rest.Request.Watch does for the generated clientset.
func clientGoWatch(body io.ReadCloser, contentType string) (watch.Interface, error) {
	neg := runtime.NewClientNegotiator(clientrest.CodecFactoryForGeneratedClient(scheme.Scheme, scheme.Codecs).WithoutConversion(), corev1.SchemeGroupVersion)
	return clientGoWatchWith(neg, body, contentType)
}

// clientGoDynamicWatch is the same stack with the dynamic client's
// negotiated serializer, which decodes into *unstructured.Unstructured.
func clientGoDynamicWatch(body io.ReadCloser, contentType string) (watch.Interface, error) {
	cfg := dynamic.ConfigFor(&clientrest.Config{})
	neg := runtime.NewClientNegotiator(cfg.NegotiatedSerializer, corev1.SchemeGroupVersion)
	return clientGoWatchWith(neg, body, contentType)
}

func clientGoWatchWith(neg runtime.ClientNegotiator, body io.ReadCloser, contentType string) (watch.Interface, error) {
	mediaType, params, err := mime.ParseMediaType(contentType)
	if err != nil {
		return nil, err
	}
	objectDecoder, streamingSerializer, framer, err := neg.StreamDecoder(mediaType, params)
	if err != nil {
		return nil, err
	}
	dec := streaming.NewDecoder(framer.NewFrameReader(body), streamingSerializer)
	return watch.NewStreamWatcher(restclientwatch.NewDecoder(dec, objectDecoder),
		apierrors.NewClientErrorReporter(http.StatusInternalServerError, "GET", "ClientWatchDecoding")), nil
}

func decodeClientGo(tb testing.TB, rec recorded, each func(*corev1.Pod)) int {
	w, err := clientGoWatch(io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for ev := range w.ResultChan() {
		pod, ok := ev.Object.(*corev1.Pod)
		if !ok {
			tb.Fatalf("client-go event %s with %T", ev.Type, ev.Object)
		}
		each(pod)
		n++
	}
	return n
}

func decodeLoom(tb testing.TB, rec recorded, each func(*corev1.Pod)) int {
	w, err := rest.NewWatcher[corev1.Pod](io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		tb.Fatal(err)
	}
	defer w.Stop()
	n := 0
	for {
		ev, err := w.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			tb.Fatal(err)
		}
		each(ev.Object)
		n++
	}
}

// TestWatchDecodersAgree checks that both decoders produce the same
// objects from the recorded streams, so the benchmark compares equal work.
func TestWatchDecodersAgree(t *testing.T) {
	for mt, rec := range recordStreams(t) {
		t.Run(mt, func(t *testing.T) {
			t.Logf("%s stream: %d events, %d bytes, %.0f bytes/event", mt, rec.events, len(rec.stream), float64(len(rec.stream))/float64(rec.events))
			var theirs, ours []*corev1.Pod
			if n := decodeClientGo(t, rec, func(p *corev1.Pod) { theirs = append(theirs, p) }); n != streamPods {
				t.Fatalf("client-go decoded %d events", n)
			}
			if n := decodeLoom(t, rec, func(p *corev1.Pod) { ours = append(ours, p) }); n != streamPods {
				t.Fatalf("loom decoded %d events", n)
			}
			for i := 0; i < streamPods; i += 97 {
				a, b := theirs[i].DeepCopy(), ours[i].DeepCopy()
				a.TypeMeta, b.TypeMeta = metav1.TypeMeta{}, metav1.TypeMeta{} // client-go may or may not set it
				if !equality.Semantic.DeepEqual(a, b) {
					t.Fatalf("pod %d differs", i)
				}
				if !equality.Semantic.DeepEqual(b, func() *corev1.Pod { p := benchPod(i); p.TypeMeta = metav1.TypeMeta{}; return p }()) {
					t.Fatalf("pod %d differs from the corpus", i)
				}
			}
		})
	}
}

func BenchmarkWatchDecode(b *testing.B) {
	recs := recordStreams(b)
	for _, format := range []struct{ name, mt string }{{"protobuf", mediaProtobuf}, {"json", mediaJSON}} {
		rec := recs[format.mt]
		for _, impl := range []struct {
			name   string
			decode func(testing.TB, recorded, func(*corev1.Pod)) int
		}{{"client-go", decodeClientGo}, {"loom", decodeLoom}} {
			b.Run(format.name+"/"+impl.name, func(b *testing.B) {
				var names int
				b.SetBytes(int64(len(rec.stream)))
				b.ReportAllocs()
				b.ResetTimer()
				for i := 0; i < b.N; i++ {
					if n := impl.decode(b, rec, func(p *corev1.Pod) { names += len(p.Name) }); n != rec.events {
						b.Fatalf("decoded %d events", n)
					}
				}
				b.StopTimer()
				if names == 0 {
					b.Fatal("nothing decoded")
				}
				perEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N*rec.events)
				b.ReportMetric(1e9/perEvent, "events/s")
				b.ReportMetric(perEvent, "ns/event")
			})
		}
	}
}

// BenchmarkWatchDecodeUnstructured compares decoding the JSON stream into
// unstructured objects (the dynamic-client / custom-resource path).
func BenchmarkWatchDecodeUnstructured(b *testing.B) {
	rec := recordStreams(b)[mediaJSON]
	for _, impl := range []struct {
		name   string
		decode func(testing.TB, recorded) int
	}{{"client-go", decodeClientGoUnstructured}, {"loom", decodeLoomUnstructured}} {
		b.Run(impl.name, func(b *testing.B) {
			b.SetBytes(int64(len(rec.stream)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				if n := impl.decode(b, rec); n != rec.events {
					b.Fatalf("decoded %d", n)
				}
			}
			perEvent := float64(b.Elapsed().Nanoseconds()) / float64(b.N*rec.events)
			b.ReportMetric(1e9/perEvent, "events/s")
		})
	}
}

func decodeClientGoUnstructured(tb testing.TB, rec recorded) int {
	w, err := clientGoDynamicWatch(io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for ev := range w.ResultChan() {
		u, ok := ev.Object.(*unstructured.Unstructured)
		if !ok || u.GetName() == "" {
			tb.Fatalf("client-go event %s with %T", ev.Type, ev.Object)
		}
		n++
	}
	return n
}

func decodeLoomUnstructured(tb testing.TB, rec recorded) int {
	w, err := rest.NewWatcher[unstructured.Unstructured](io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		tb.Fatal(err)
	}
	n := 0
	for {
		ev, err := w.Next()
		if err == io.EOF {
			return n
		}
		if err != nil {
			tb.Fatal(err)
		}
		if ev.Object.GetName() == "" {
			tb.Fatal("no name")
		}
		n++
	}
}

// BenchmarkWatchDecodePaired runs client-go and Loom alternately on the
// same stream, one full stream each per round (the order flips every
// round), with a GC before each measured decode. For each decode it
// measures wall time and the process's CPU time (user+system, from
// getrusage), and reports medians of events per CPU-second, of events per
// wall-second, and of the per-round ratios. The CPU-time figures are the
// "events/s per core" of the goals and are what to quote on a shared
// machine, where wall time swings with other processes' load. Use
// -benchtime Nx for N rounds and -cpu 1.
func BenchmarkWatchDecodePaired(b *testing.B) {
	recs := recordStreams(b)
	touch := func(tb testing.TB, rec recorded, dec func(testing.TB, recorded, func(*corev1.Pod)) int) func() int {
		return func() int {
			names := 0
			n := dec(tb, rec, func(p *corev1.Pod) { names += len(p.Name) })
			if names == 0 {
				tb.Fatal("nothing decoded")
			}
			return n
		}
	}
	for _, tc := range []struct {
		name     string
		rec      recorded
		cg, loom func() int
	}{
		{"protobuf", recs[mediaProtobuf], touch(b, recs[mediaProtobuf], decodeClientGo), touch(b, recs[mediaProtobuf], decodeLoom)},
		{"json", recs[mediaJSON], touch(b, recs[mediaJSON], decodeClientGo), touch(b, recs[mediaJSON], decodeLoom)},
		{"json-unstructured", recs[mediaJSON], func() int { return decodeClientGoUnstructured(b, recs[mediaJSON]) }, func() int { return decodeLoomUnstructured(b, recs[mediaJSON]) }},
	} {
		rec := tc.rec
		b.Run(tc.name, func(b *testing.B) {
			type sample struct{ cpuRate, wallRate, allocs float64 }
			var cg, lo []sample
			var cpuSpeedup, wallSpeedup, allocRatio []float64
			measure := func(decode func() int) sample {
				goruntime.GC()
				var before, after goruntime.MemStats
				goruntime.ReadMemStats(&before)
				cpu0 := cpuTime()
				start := time.Now()
				if n := decode(); n != rec.events {
					b.Fatalf("decoded %d events", n)
				}
				el := time.Since(start)
				cpu := cpuTime() - cpu0
				goruntime.ReadMemStats(&after)
				return sample{
					cpuRate:  float64(rec.events) / cpu.Seconds(),
					wallRate: float64(rec.events) / el.Seconds(),
					allocs:   float64(after.Mallocs-before.Mallocs) / float64(rec.events),
				}
			}
			for i := 0; i < b.N; i++ {
				var c, l sample
				if i%2 == 0 {
					c = measure(tc.cg)
					l = measure(tc.loom)
				} else {
					l = measure(tc.loom)
					c = measure(tc.cg)
				}
				cg, lo = append(cg, c), append(lo, l)
				cpuSpeedup = append(cpuSpeedup, l.cpuRate/c.cpuRate)
				wallSpeedup = append(wallSpeedup, l.wallRate/c.wallRate)
				allocRatio = append(allocRatio, l.allocs/c.allocs)
			}
			field := func(ss []sample, f func(sample) float64) []float64 {
				out := make([]float64, len(ss))
				for i, s := range ss {
					out[i] = f(s)
				}
				return out
			}
			cpuR := func(s sample) float64 { return s.cpuRate }
			wallR := func(s sample) float64 { return s.wallRate }
			al := func(s sample) float64 { return s.allocs }
			b.ReportMetric(median(field(cg, cpuR)), "cg-events/cpu-s")
			b.ReportMetric(median(field(lo, cpuR)), "loom-events/cpu-s")
			b.ReportMetric(median(cpuSpeedup), "cpu-speedup")
			b.ReportMetric(minOf(cpuSpeedup), "cpu-speedup-min")
			b.ReportMetric(maxOf(cpuSpeedup), "cpu-speedup-max")
			b.ReportMetric(median(field(cg, wallR)), "cg-events/s")
			b.ReportMetric(median(field(lo, wallR)), "loom-events/s")
			b.ReportMetric(median(wallSpeedup), "wall-speedup")
			b.ReportMetric(median(field(cg, al)), "cg-allocs/event")
			b.ReportMetric(median(field(lo, al)), "loom-allocs/event")
			b.ReportMetric(median(allocRatio), "alloc-ratio")
		})
	}
}

// cpuTime returns the user+system CPU time of the process so far.
func cpuTime() time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		return 0
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func median(xs []float64) float64 {
	s := append([]float64(nil), xs...)
	sort.Float64s(s)
	if len(s) == 0 {
		return 0
	}
	if len(s)%2 == 1 {
		return s[len(s)/2]
	}
	return (s[len(s)/2-1] + s[len(s)/2]) / 2
}

func minOf(xs []float64) float64 { return slices.Min(xs) }
func maxOf(xs []float64) float64 { return slices.Max(xs) }

// TestWatchDecodersAgreeUnstructured checks the unstructured path the same
// way: client-go's dynamic decoder and Loom's give equal maps.
func TestWatchDecodersAgreeUnstructured(t *testing.T) {
	rec := recordStreams(t)[mediaJSON]
	w, err := clientGoDynamicWatch(io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		t.Fatal(err)
	}
	var theirs []map[string]interface{}
	for ev := range w.ResultChan() {
		theirs = append(theirs, ev.Object.(*unstructured.Unstructured).Object)
	}
	lw, err := rest.NewWatcher[unstructured.Unstructured](io.NopCloser(bytes.NewReader(rec.stream)), rec.contentType)
	if err != nil {
		t.Fatal(err)
	}
	for i := 0; ; i++ {
		ev, err := lw.Next()
		if err == io.EOF {
			if i != len(theirs) || i != streamPods {
				t.Fatalf("loom %d events, client-go %d", i, len(theirs))
			}
			return
		}
		if err != nil {
			t.Fatal(err)
		}
		if !reflect.DeepEqual(ev.Object.Object, theirs[i]) {
			t.Fatalf("event %d differs", i)
		}
	}
}
