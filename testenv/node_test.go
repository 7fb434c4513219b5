//go:build linux

package testenv

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"io/fs"
	"net"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"sort"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"

	"github.com/loom-k8s/loom/internal/ociimage"
)

// requireRealNodes skips the test when this machine cannot run real nodes,
// saying why; with CI=true it fails instead, so that CI cannot pass
// without running them.
func requireRealNodes(t *testing.T) {
	t.Helper()
	err := checkRealNodeHost()
	if err == nil {
		_, err = binary(AssetsDir(), "kubelet")
	}
	if err != nil {
		if os.Getenv("CI") == "true" {
			t.Fatalf("real nodes unavailable with CI=true: %v", err)
		}
		t.Skipf("real nodes unavailable here: %v", err)
	}
	lockRealNodeTests(t)
}

// lockRealNodeTests keeps the tests with real nodes of every package (go
// test runs packages in parallel) from running at once, so that each can
// compare the machine before and after: it holds a lock on the kubelet
// binary until the test ends.
func lockRealNodeTests(t *testing.T) {
	t.Helper()
	f, err := os.Open(filepath.Join(AssetsDir(), "kubelet"))
	if err != nil {
		t.Fatal(err)
	}
	if err := syscall.Flock(int(f.Fd()), syscall.LOCK_EX); err != nil {
		f.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
}

// helloServer is the program of the test image (testdata/hello/main.go): an HTTP
// server on :8080 that logs a line at start and one per request.
func helloServer(t testing.TB) string {
	t.Helper()
	src, err := os.ReadFile("testdata/hello/main.go")
	if err != nil {
		t.Fatal(err)
	}
	return string(src)
}

// TestRealNodePodRuns starts a control plane with one real node, runs a
// Pod from an image built and imported here, reaches it over HTTP at its
// Pod IP, reads its logs through kube-apiserver (and kubectl), and checks
// that once the env is stopped the machine is as it was: processes,
// mounts, network links, nftables rules, cgroups, sysctls and folders.
func TestRealNodePodRuns(t *testing.T) {
	requireRealNodes(t)
	before := snapshotHost(t)
	t.Run("pod", func(t *testing.T) {
		start := time.Now()
		env := New(t, Options{RealNodes: 1})
		t.Logf("control plane and 1 real node Ready in %s", time.Since(start).Round(time.Millisecond))
		if len(env.RealNodes) != 1 || env.RealNodes[0].Name != RealNodeName(0) {
			t.Fatalf("RealNodes: %+v", env.RealNodes)
		}

		img := buildTestImage(t)
		if err := env.ImportImage(t.Context(), "loom.local/hello:test", img); err != nil {
			t.Fatal(err)
		}

		created := time.Now()
		pod := map[string]any{"apiVersion": "v1", "kind": "Pod", "metadata": map[string]any{"name": "hello"},
			"spec": map[string]any{
				"nodeName": RealNodeName(0),
				"containers": []any{map[string]any{
					"name": "hello", "image": "loom.local/hello:test", "imagePullPolicy": "Never",
					"env": []any{map[string]any{"name": "POD_NAME", "valueFrom": map[string]any{"fieldRef": map[string]any{"fieldPath": "metadata.name"}}}},
				}},
			}}
		if code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/pods", pod, nil); code != http.StatusCreated {
			t.Fatalf("create pod: %d", code)
		}
		var p corev1.Pod
		ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
		defer cancel()
		for p.Status.Phase != corev1.PodRunning || p.Status.PodIP == "" {
			select {
			case <-ctx.Done():
				desc, _ := kubectl(t, env.KubeconfigPath, "describe", "pod", "hello")
				t.Fatalf("pod not running: %s\n%s", p.Status.Phase, desc)
			case <-time.After(100 * time.Millisecond):
			}
			do(t, env, http.MethodGet, "/api/v1/namespaces/default/pods/hello", nil, &p)
		}
		t.Logf("pod Running %s after create, IP %s", time.Since(created).Round(time.Millisecond), p.Status.PodIP)
		if ip := net.ParseIP(p.Status.PodIP); ip == nil {
			t.Fatalf("pod IP %q", p.Status.PodIP)
		} else if _, subnet, _ := net.ParseCIDR(env.RealNodes[0].Subnet); !subnet.Contains(ip) {
			t.Fatalf("pod IP %s outside the node's subnet %s", ip, env.RealNodes[0].Subnet)
		}

		// The Pod serves on its IP, which this machine reaches through the
		// env's bridge. The server may still be starting: retry.
		hc := &http.Client{Timeout: 5 * time.Second}
		var body string
		for {
			resp, err := hc.Get("http://" + net.JoinHostPort(p.Status.PodIP, "8080") + "/hi")
			if err == nil {
				b, _ := io.ReadAll(resp.Body)
				resp.Body.Close()
				body = string(b)
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("GET the pod: %v", err)
			case <-time.After(200 * time.Millisecond):
			}
		}
		if body != "hello from hello\n" {
			t.Fatalf("the pod answered %q", body)
		}

		// Its logs, through kube-apiserver and the kubelet API.
		want := "hello: listening on :8080\nhello: served /hi\n"
		var logs string
		for logs != want {
			admin, err := env.HTTPClient()
			if err != nil {
				t.Fatal(err)
			}
			code, b, err := env.get(ctx, admin, "/api/v1/namespaces/default/pods/hello/log")
			admin.CloseIdleConnections()
			if err == nil && code == http.StatusOK {
				logs = b
			}
			if logs == want {
				break
			}
			select {
			case <-ctx.Done():
				t.Fatalf("pod logs: %d %v %q, want %q", code, err, logs, want)
			case <-time.After(200 * time.Millisecond):
			}
		}
		out, err := kubectl(t, env.KubeconfigPath, "logs", "hello")
		if err != nil || out != want {
			t.Fatalf("kubectl logs: %v %q, want %q", err, out, want)
		}
	})
	after := snapshotHost(t)
	if before.files[hostStateFile] != "absent" {
		// Another env with real nodes runs on this machine: the
		// machine-wide state (ip_forward, the folders kubelet and
		// containerd share) is restored when the last env stops.
		t.Logf("another env runs real nodes here: not comparing the machine-wide state")
		for _, k := range append(hostPaths, "/proc/sys/net/ipv4/ip_forward", "/run/netns", hostStateFile, hostLockFile) {
			delete(before.files, k)
			delete(after.files, k)
		}
	}
	if diff := before.diff(after); diff != "" {
		t.Fatalf("the machine changed after Stop:\n%s", diff)
	}
}

// hostSnapshot is what a real-node env may change on the machine.
type hostSnapshot struct {
	procs   map[string]int // by name: containerd, kubelet, shims, pause, the test image's server
	mounts  []string       // mount points and types
	links   []string       // network interfaces
	nft     []string       // nft list ruleset
	cgroups int            // cgroup folders in every hierarchy
	files   map[string]string
}

func snapshotHost(t *testing.T) hostSnapshot {
	t.Helper()
	s := hostSnapshot{procs: map[string]int{}, files: map[string]string{}}
	ents, _ := os.ReadDir("/proc")
	for _, e := range ents {
		pid, err := strconv.Atoi(e.Name())
		if err != nil || !alive(pid) { // a zombie is gone but for its parent's wait
			continue
		}
		b, err := os.ReadFile(filepath.Join("/proc", e.Name(), "comm"))
		if err != nil {
			continue
		}
		switch c := strings.TrimSpace(string(b)); c {
		case "containerd", "kubelet", "kube-proxy", "containerd-shim", "pause", "manager", "runc":
			s.procs[c]++
		}
	}
	mi, err := os.ReadFile("/proc/self/mountinfo")
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(mi)), "\n") {
		f := strings.Fields(l)
		s.mounts = append(s.mounts, strings.Join(f[4:], " "))
	}
	out, err := exec.Command("ip", "-o", "link").Output()
	if err != nil {
		t.Fatal(err)
	}
	for _, l := range strings.Split(strings.TrimSpace(string(out)), "\n") {
		if f := strings.Fields(l); len(f) > 1 {
			s.links = append(s.links, f[1])
		}
	}
	if out, err := exec.Command("nft", "list", "ruleset").Output(); err == nil {
		s.nft = strings.Split(strings.TrimSpace(string(out)), "\n")
	}
	for _, h := range cgroupHierarchies() {
		_ = filepath.WalkDir(h, func(_ string, d fs.DirEntry, err error) error {
			if err == nil && d.IsDir() {
				s.cgroups++
			}
			return nil
		})
	}
	files := []string{"/proc/sys/net/ipv4/ip_forward"}
	for _, sc := range sysctlsKubeletSets {
		files = append(files, "/proc/sys/"+sc)
	}
	for _, f := range files {
		b, _ := os.ReadFile(f)
		s.files[f] = strings.TrimSpace(string(b))
	}
	for _, p := range append(hostPaths, "/run/netns", hostStateFile, hostLockFile) {
		ents, err := os.ReadDir(p)
		switch {
		case errors.Is(err, fs.ErrNotExist):
			s.files[p] = "absent"
		case err != nil:
			s.files[p] = "present"
		default:
			var names []string
			for _, e := range ents {
				names = append(names, e.Name())
			}
			s.files[p] = "[" + strings.Join(names, " ") + "]"
		}
	}
	return s
}

func (a hostSnapshot) diff(b hostSnapshot) string {
	var d []string
	for _, name := range []string{"containerd", "kubelet", "kube-proxy", "containerd-shim", "pause", "manager", "runc"} {
		if a.procs[name] != b.procs[name] {
			d = append(d, fmt.Sprintf("processes named %s: %d before, %d after", name, a.procs[name], b.procs[name]))
		}
	}
	d = append(d, diffLines("mount", a.mounts, b.mounts)...)
	d = append(d, diffLines("link", a.links, b.links)...)
	d = append(d, diffLines("nft", a.nft, b.nft)...)
	if a.cgroups != b.cgroups {
		d = append(d, fmt.Sprintf("cgroup folders: %d before, %d after", a.cgroups, b.cgroups))
	}
	keys := make([]string, 0, len(a.files))
	for k := range a.files {
		keys = append(keys, k)
	}
	sort.Strings(keys)
	for _, k := range keys {
		if a.files[k] != b.files[k] {
			d = append(d, fmt.Sprintf("%s: %s before, %s after", k, a.files[k], b.files[k]))
		}
	}
	return strings.Join(d, "\n")
}

// diffLines reports the lines only in a or only in b.
func diffLines(what string, a, b []string) []string {
	count := map[string]int{}
	for _, l := range a {
		count[l]++
	}
	for _, l := range b {
		count[l]--
	}
	var d []string
	for l, n := range count {
		switch {
		case n > 0:
			d = append(d, fmt.Sprintf("%s gone: %s", what, l))
		case n < 0:
			d = append(d, fmt.Sprintf("%s left behind: %s", what, l))
		}
	}
	sort.Strings(d)
	return d
}

// TestRealNodesUnavailableError checks the typed error real-node options
// fail with where the machine lacks something, and that it names the
// install command.
func TestRealNodesUnavailableError(t *testing.T) {
	var err error = &RealNodesUnavailableError{Missing: []string{"containerd", "/usr/lib/cni/bridge"}, Install: nodeInstallHint}
	if !errors.Is(fmt.Errorf("wrapped: %w", err), ErrRealNodesUnavailable) {
		t.Fatal("errors.Is(err, ErrRealNodesUnavailable) is false")
	}
	for _, want := range []string{"containerd", "/usr/lib/cni/bridge", "apt-get install -y containerd runc containernetworking-plugins", "fake nodes"} {
		if !strings.Contains(err.Error(), want) {
			t.Errorf("%q lacks %q", err, want)
		}
	}
	var u *RealNodesUnavailableError
	if !errors.As(err, &u) || len(u.Missing) != 2 {
		t.Fatalf("errors.As: %+v", u)
	}
	if _, err := Start(t.Context(), Options{RealNodes: -1}); err == nil || !strings.Contains(err.Error(), "RealNodes") {
		t.Fatalf("RealNodes -1: %v", err)
	}
}

// TestNodeConfigs checks the rendered kubelet and CNI configurations carry
// the settings real nodes depend on.
func TestNodeConfigs(t *testing.T) {
	b, err := kubeletConfig(kubeletConfigParams{Address: "10.99.0.1", Port: 12345, CgroupRoot: "/loom-x/0", Socket: "/s/containerd.sock"})
	if err != nil {
		t.Fatal(err)
	}
	var cfg map[string]any
	if err := json.Unmarshal(b, &cfg); err != nil {
		t.Fatal(err)
	}
	for k, want := range map[string]any{
		"cgroupDriver": "cgroupfs", "failCgroupV1": false, "failSwapOn": false, "makeIPTablesUtilChains": false,
		"protectKernelDefaults": false, "containerRuntimeEndpoint": "unix:///s/containerd.sock", "cgroupRoot": "/loom-x/0",
		"readOnlyPort": float64(0), "port": float64(12345),
	} {
		if cfg[k] != want {
			t.Errorf("kubelet %s = %v, want %v", k, cfg[k], want)
		}
	}
	cd := containerdConfig("/r", "/st", "/s/containerd.sock", "/runc", "/net.d", "loom.local/pause:1")
	for _, want := range []string{`restrict_oom_score_adj = true`, `SystemdCgroup = false`, `snapshotter = "overlayfs"`,
		`bin_dir = "/usr/lib/cni"`, `conf_dir = "/net.d"`, `sandbox_image = "loom.local/pause:1"`, `"io.containerd.internal.v1.opt"`} {
		if !strings.Contains(cd, want) {
			t.Errorf("containerd config lacks %s", want)
		}
	}
	c, err := cniConfig("loom-x", "loomx", "10.99.0.0/16", "10.99.0.1", "10.99.1.1", "10.99.1.254", "/ipam")
	if err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(string(c), `"ipMasq": false`) || !strings.Contains(string(c), `"bridge": "loomx"`) {
		t.Errorf("CNI config: %s", c)
	}
}

// TestCRIMessages checks the hand-made CRI encoding against the wire
// format.
func TestCRIMessages(t *testing.T) {
	// ListPodSandboxResponse{items: [{id: "a"}, {id: "bc", state: 1}]}
	msg := append([]byte{0x0a, 3}, protoString(1, "a")...)
	item2 := append(protoString(1, "bc"), 0x18, 0x01)
	msg = append(msg, 0x0a, byte(len(item2)))
	msg = append(msg, item2...)
	var ids []string
	err := protoFields(msg, func(num int, b []byte) error {
		return protoFields(b, func(num int, b []byte) error {
			if num == 1 {
				ids = append(ids, string(b))
			}
			return nil
		})
	})
	if err != nil || strings.Join(ids, ",") != "a,bc" {
		t.Fatalf("ids %q, err %v", ids, err)
	}
	if err := protoFields([]byte{0x0a, 9, 1}, func(int, []byte) error { return nil }); err == nil {
		t.Fatal("a truncated message parsed")
	}
}

// webhookServer is a validating admission webhook that refuses objects
// named "deny-me", served over TLS from the Secret mounted at /tls.
const webhookServer = `package main

import (
	"encoding/json"
	"net/http"
)

func main() {
	http.HandleFunc("/validate", func(w http.ResponseWriter, r *http.Request) {
		var review struct {
			APIVersion string ` + "`json:\"apiVersion\"`" + `
			Kind       string ` + "`json:\"kind\"`" + `
			Request    struct {
				UID  string ` + "`json:\"uid\"`" + `
				Name string ` + "`json:\"name\"`" + `
			} ` + "`json:\"request\"`" + `
		}
		if err := json.NewDecoder(r.Body).Decode(&review); err != nil {
			http.Error(w, err.Error(), http.StatusBadRequest)
			return
		}
		allowed := review.Request.Name != "deny-me"
		resp := map[string]any{"uid": review.Request.UID, "allowed": allowed}
		if !allowed {
			resp["status"] = map[string]any{"code": 403, "message": "refused by the webhook Pod"}
		}
		w.Header().Set("Content-Type", "application/json")
		json.NewEncoder(w).Encode(map[string]any{"apiVersion": review.APIVersion, "kind": review.Kind, "response": resp})
	})
	panic(http.ListenAndServeTLS(":8443", "/tls/tls.crt", "/tls/tls.key", nil))
}
`

// TestRealNodeWebhookEndpointRouting serves a validating webhook from a Pod
// behind a Service, with --enable-aggregator-routing=true: kube-apiserver
// calls an endpoint of the Service (its Pod IP, on the env's bridge)
// instead of its ClusterIP, as an env without kube-proxy (one started
// while another env on the machine runs it) must.
func TestRealNodeWebhookEndpointRouting(t *testing.T) {
	requireRealNodes(t)
	env := New(t, Options{Controllers: true, Scheduler: true, RealNodes: 1, APIServerArgs: []string{"--enable-aggregator-routing=true"}})
	src := t.TempDir()
	for name, body := range map[string]string{"go.mod": "module loom.local/webhook\n\ngo 1.21\n", "main.go": webhookServer} {
		if err := os.WriteFile(filepath.Join(src, name), []byte(body), 0o644); err != nil {
			t.Fatal(err)
		}
	}
	img, err := ociimage.Build(t.Context(), ociimage.Options{Dir: src, Package: "."})
	if err != nil {
		t.Fatal(err)
	}
	if err := env.ImportImage(t.Context(), "loom.local/webhook:test", img); err != nil {
		t.Fatal(err)
	}
	cert, key, err := env.ServingCert("webhook.default.svc")
	if err != nil {
		t.Fatal(err)
	}
	objects := []struct {
		path string
		obj  map[string]any
	}{
		{"/api/v1/namespaces/default/secrets", map[string]any{"apiVersion": "v1", "kind": "Secret", "metadata": map[string]any{"name": "webhook-tls"},
			"type": "kubernetes.io/tls", "data": map[string]any{"tls.crt": cert, "tls.key": key}}},
		{"/api/v1/namespaces/default/pods", map[string]any{"apiVersion": "v1", "kind": "Pod",
			"metadata": map[string]any{"name": "webhook", "labels": map[string]any{"app": "webhook"}},
			"spec": map[string]any{
				"containers": []any{map[string]any{"name": "webhook", "image": "loom.local/webhook:test", "imagePullPolicy": "Never",
					"volumeMounts":   []any{map[string]any{"name": "tls", "mountPath": "/tls"}},
					"readinessProbe": map[string]any{"tcpSocket": map[string]any{"port": 8443}, "periodSeconds": 1}}},
				"volumes": []any{map[string]any{"name": "tls", "secret": map[string]any{"secretName": "webhook-tls"}}},
			}}},
		{"/api/v1/namespaces/default/services", map[string]any{"apiVersion": "v1", "kind": "Service", "metadata": map[string]any{"name": "webhook"},
			"spec": map[string]any{"selector": map[string]any{"app": "webhook"}, "ports": []any{map[string]any{"port": 443, "targetPort": 8443}}}}},
		{"/apis/admissionregistration.k8s.io/v1/validatingwebhookconfigurations", map[string]any{
			"apiVersion": "admissionregistration.k8s.io/v1", "kind": "ValidatingWebhookConfiguration", "metadata": map[string]any{"name": "deny-me"},
			"webhooks": []any{map[string]any{
				"name": "deny-me.loom.local", "sideEffects": "None", "admissionReviewVersions": []any{"v1"}, "failurePolicy": "Fail",
				"clientConfig":   map[string]any{"caBundle": env.CAPEM, "service": map[string]any{"namespace": "default", "name": "webhook", "path": "/validate"}},
				"rules":          []any{map[string]any{"apiGroups": []any{""}, "apiVersions": []any{"v1"}, "resources": []any{"configmaps"}, "operations": []any{"CREATE"}}},
				"objectSelector": map[string]any{"matchLabels": map[string]any{"webhook-test": "yes"}},
			}},
		}},
	}
	for _, o := range objects {
		if code := do(t, env, http.MethodPost, o.path, o.obj, nil); code != http.StatusCreated {
			t.Fatalf("create %s: %d", o.path, code)
		}
	}
	cm := func(name string) map[string]any {
		return map[string]any{"apiVersion": "v1", "kind": "ConfigMap", "metadata": map[string]any{"name": name, "labels": map[string]any{"webhook-test": "yes"}}}
	}
	// Until the Pod is ready and its endpoint known, calls fail (and the
	// policy Fail refuses every create): wait until the webhook answers.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for i := 0; ; i++ {
		code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/configmaps", cm(fmt.Sprintf("allow-me-%d", i)), nil)
		if code == http.StatusCreated {
			break
		}
		select {
		case <-ctx.Done():
			desc, _ := kubectl(t, env.KubeconfigPath, "describe", "pod,endpointslices")
			t.Fatalf("the webhook never allowed a create (last %d)\n%s", code, desc)
		case <-time.After(500 * time.Millisecond):
		}
	}
	var status map[string]any
	hc, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	b, _ := json.Marshal(cm("deny-me"))
	req, _ := http.NewRequestWithContext(ctx, http.MethodPost, env.URL+"/api/v1/namespaces/default/configmaps", strings.NewReader(string(b)))
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	_ = json.NewDecoder(resp.Body).Decode(&status)
	if resp.StatusCode != http.StatusForbidden || !strings.Contains(fmt.Sprint(status["message"]), "refused by the webhook Pod") {
		t.Fatalf("create deny-me: %s %v", resp.Status, status)
	}
}
