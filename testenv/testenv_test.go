package testenv

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"io"
	"net/http"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"testing"
	"time"

	corev1 "k8s.io/api/core/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
)

// shared is one control plane for the tests that do not need their own. It
// is started by TestMain and stopped after every test has run.
var shared *Env

func TestMain(m *testing.M) {
	if os.Getenv(helperEnv) != "" {
		os.Exit(m.Run()) // a re-executed helper starts only its own servers
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	env, err := Start(ctx, Options{})
	cancel()
	if err != nil {
		fmt.Fprintln(os.Stderr, err)
		os.Exit(1)
	}
	shared = env
	code := m.Run()
	if code != 0 {
		fmt.Fprintln(os.Stderr, env.LogTails(30))
	}
	if err := env.Stop(); err != nil {
		fmt.Fprintln(os.Stderr, err)
		code = 1
	}
	os.Exit(code)
}

// do sends a request as the admin and decodes a JSON answer into out.
func do(t *testing.T, env *Env, method, path string, in, out any) int {
	t.Helper()
	hc, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	var body io.Reader
	if in != nil {
		b, err := json.Marshal(in)
		if err != nil {
			t.Fatal(err)
		}
		body = bytes.NewReader(b)
	}
	req, err := http.NewRequestWithContext(t.Context(), method, env.URL+path, body)
	if err != nil {
		t.Fatal(err)
	}
	req.Header.Set("Content-Type", "application/json")
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	if out != nil && resp.StatusCode < 300 {
		if err := json.Unmarshal(b, out); err != nil {
			t.Fatalf("%s %s: %v: %s", method, path, err, b)
		}
	}
	return resp.StatusCode
}

func TestListNamespacesWithClientCert(t *testing.T) {
	var list corev1.NamespaceList
	if code := do(t, shared, http.MethodGet, "/api/v1/namespaces", nil, &list); code != http.StatusOK {
		t.Fatalf("list namespaces: status %d", code)
	}
	names := map[string]bool{}
	for _, ns := range list.Items {
		names[ns.Name] = true
	}
	for _, want := range []string{"default", "kube-system", "kube-public"} {
		if !names[want] {
			t.Errorf("namespace %q missing from %v", want, names)
		}
	}
}

func TestAuthentication(t *testing.T) {
	tests := []struct {
		name   string
		header string
		want   int
	}{
		{"no credentials", "", http.StatusUnauthorized},
		{"wrong token", "Bearer not-a-token", http.StatusUnauthorized},
		{"admin token", "Bearer " + shared.AdminToken, http.StatusOK},
	}
	hc := shared.httpClient(nil) // trusts the CA, presents no certificate
	defer hc.CloseIdleConnections()
	for _, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			req, err := http.NewRequestWithContext(t.Context(), http.MethodGet, shared.URL+"/api/v1/namespaces", nil)
			if err != nil {
				t.Fatal(err)
			}
			if tt.header != "" {
				req.Header.Set("Authorization", tt.header)
			}
			resp, err := hc.Do(req)
			if err != nil {
				t.Fatal(err)
			}
			resp.Body.Close()
			if resp.StatusCode != tt.want {
				t.Fatalf("status %d, want %d", resp.StatusCode, tt.want)
			}
		})
	}
}

func TestUserCertHasNoRBAC(t *testing.T) {
	kc, err := shared.UserKubeconfig("alice", "developers")
	if err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "kubeconfig")
	if err := os.WriteFile(path, kc, 0o600); err != nil {
		t.Fatal(err)
	}
	out, err := kubectl(t, path, "auth", "whoami", "-o", "jsonpath={.status.userInfo.username}")
	if err != nil || strings.TrimSpace(out) != "alice" {
		t.Fatalf("whoami: %q, %v", out, err)
	}
	out, err = kubectl(t, path, "get", "namespaces")
	if err == nil || !strings.Contains(out, "forbidden") {
		t.Fatalf("alice listed namespaces without RBAC: %q, %v", out, err)
	}
}

// kubectl runs the kubectl built beside the servers, as an independent client.
func kubectl(t *testing.T, kubeconfig string, args ...string) (string, error) {
	t.Helper()
	bin, err := binary(AssetsDir(), "kubectl")
	if err != nil {
		t.Fatal(err)
	}
	cmd := exec.CommandContext(t.Context(), bin, append([]string{"--kubeconfig", kubeconfig}, args...)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

func TestKubectlGetNamespaces(t *testing.T) {
	out, err := kubectl(t, shared.KubeconfigPath, "get", "ns")
	if err != nil {
		t.Fatalf("kubectl get ns: %v\n%s", err, out)
	}
	if !strings.Contains(out, "kube-system") || !strings.Contains(out, "Active") {
		t.Fatalf("kubectl get ns printed:\n%s", out)
	}
	out, err = kubectl(t, shared.KubeconfigPath, "version", "-o", "json")
	if err != nil {
		t.Fatalf("kubectl version: %v\n%s", err, out)
	}
	if want := `"gitVersion": "` + PinnedVersions().Kube + `"`; strings.Count(out, want) != 2 {
		t.Fatalf("client and server should both report %s:\n%s", PinnedVersions().Kube, out)
	}
}

func configMap(name string, data map[string]string) *corev1.ConfigMap {
	return &corev1.ConfigMap{
		TypeMeta:   metav1.TypeMeta{APIVersion: "v1", Kind: "ConfigMap"},
		ObjectMeta: metav1.ObjectMeta{Name: name},
		Data:       data,
	}
}

func TestRestartAPIServerKeepsWrites(t *testing.T) {
	name := "before-restart"
	var created corev1.ConfigMap
	if code := do(t, shared, http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap(name, map[string]string{"k": "v"}), &created); code != http.StatusCreated {
		t.Fatalf("create: status %d", code)
	}
	before := shared.Processes()["kube-apiserver"]
	if err := shared.RestartAPIServer(t.Context()); err != nil {
		t.Fatal(err)
	}
	if after := shared.Processes()["kube-apiserver"]; after == before || alive(before) {
		t.Fatalf("kube-apiserver pid %d -> %d; old one alive: %v", before, after, alive(before))
	}
	var got corev1.ConfigMap
	if code := do(t, shared, http.MethodGet, "/api/v1/namespaces/default/configmaps/"+name, nil, &got); code != http.StatusOK {
		t.Fatalf("get after restart: status %d", code)
	}
	if got.UID != created.UID || got.Data["k"] != "v" {
		t.Fatalf("after restart got %+v, want %+v", got.ObjectMeta, created.ObjectMeta)
	}
}

func TestCompactionMakesOldReadsGone(t *testing.T) {
	tests := []struct {
		name    string
		env     func(t *testing.T) *Env
		restart bool // restart kube-apiserver after compacting
	}{
		// Without the watch cache, watches go to etcd, which refuses a
		// compacted revision at once.
		{"watch cache off", func(t *testing.T) *Env {
			return New(t, Options{APIServerArgs: []string{"--watch-cache=false"}})
		}, false},
		// With it, the cache serves watches from its own window until a
		// restart starts a new window at the current revision.
		{"watch cache on", func(*testing.T) *Env { return shared }, true},
	}
	for i, tt := range tests {
		t.Run(tt.name, func(t *testing.T) {
			env := tt.env(t)
			prefix := fmt.Sprintf("compact-%d-", i)
			var first corev1.ConfigMap
			if code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap(prefix+"0", nil), &first); code != http.StatusCreated {
				t.Fatalf("create: status %d", code)
			}
			for j := 1; j <= 5; j++ {
				if code := do(t, env, http.MethodPost, "/api/v1/namespaces/default/configmaps", configMap(fmt.Sprint(prefix, j), nil), nil); code != http.StatusCreated {
					t.Fatalf("create: status %d", code)
				}
			}
			if err := env.CompactEtcd(t.Context(), 0); err != nil {
				t.Fatal(err)
			}
			if tt.restart {
				if err := env.RestartAPIServer(t.Context()); err != nil {
					t.Fatal(err)
				}
			}
			if code := do(t, env, http.MethodGet, "/api/v1/namespaces/default/configmaps?resourceVersionMatch=Exact&resourceVersion="+first.ResourceVersion, nil, nil); code != http.StatusGone {
				t.Errorf("exact LIST at a compacted resourceVersion: status %d, want 410", code)
			}
			if got := watchFirst(t, env, "/api/v1/namespaces/default/configmaps?watch=1&resourceVersion="+first.ResourceVersion); got != http.StatusGone {
				t.Errorf("watch from a compacted resourceVersion: got %d, want 410", got)
			}
		})
	}
}

// watchFirst starts a watch and returns the HTTP status if it is not 200,
// else the Status code of its first event if that is an ERROR, else 200.
func watchFirst(t *testing.T, env *Env, path string) int {
	t.Helper()
	hc, err := env.HTTPClient()
	if err != nil {
		t.Fatal(err)
	}
	defer hc.CloseIdleConnections()
	ctx, cancel := context.WithTimeout(t.Context(), 30*time.Second)
	defer cancel()
	req, err := http.NewRequestWithContext(ctx, http.MethodGet, env.URL+path, nil)
	if err != nil {
		t.Fatal(err)
	}
	resp, err := hc.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	if resp.StatusCode != http.StatusOK {
		return resp.StatusCode
	}
	line, err := bufio.NewReader(resp.Body).ReadBytes('\n')
	if err != nil {
		t.Fatalf("watch: read: %v", err)
	}
	var ev struct {
		Type   string        `json:"type"`
		Object metav1.Status `json:"object"`
	}
	if err := json.Unmarshal(line, &ev); err != nil {
		t.Fatalf("watch event %s: %v", line, err)
	}
	if ev.Type == "ERROR" {
		return int(ev.Object.Code)
	}
	return http.StatusOK
}

func TestStopLeavesNoProcess(t *testing.T) {
	env, err := Start(t.Context(), Options{})
	if err != nil {
		t.Fatal(err)
	}
	pids := env.Processes()
	if len(pids) != 2 {
		t.Fatalf("want etcd and kube-apiserver, got %v", pids)
	}
	for name, pid := range pids {
		if !alive(pid) {
			t.Fatalf("%s (pid %d) is not running", name, pid)
		}
	}
	dir := env.Dir
	if err := env.Stop(); err != nil {
		t.Fatal(err)
	}
	for name, pid := range pids {
		if alive(pid) {
			t.Errorf("%s (pid %d) still running after Stop", name, pid)
		}
	}
	if _, err := os.Stat(dir); !errors.Is(err, os.ErrNotExist) {
		t.Errorf("state folder %s left behind: %v", dir, err)
	}
}

func TestSweepKillsOrphans(t *testing.T) {
	// A child whose recorded parent is not running, as an earlier test
	// binary killed with SIGKILL would leave.
	cmd := exec.Command("sleep", "600")
	cmd.Env = append(os.Environ(), parentEnv+"=999999999:0")
	cmd.SysProcAttr = sysProcAttr()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- cmd.Wait() }()
	t.Cleanup(func() { _ = cmd.Process.Kill() })
	// Start returns once exec has begun; the kernel shows the new
	// environment a moment later. Wait for it, as the sweep reads it.
	environ := fmt.Sprintf("/proc/%d/environ", cmd.Process.Pid)
	for deadline := time.Now().Add(time.Minute); ; time.Sleep(10 * time.Millisecond) {
		if b, err := os.ReadFile(environ); err == nil && bytes.Contains(b, []byte(parentEnv+"=")) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("the orphan's environment never showed %s", parentEnv)
		}
	}

	killed := sweepOrphans()
	found := false
	for _, pid := range killed {
		found = found || pid == cmd.Process.Pid
	}
	if !found {
		t.Fatalf("sweep killed %v, not the orphan %d", killed, cmd.Process.Pid)
	}
	if err := <-done; err == nil {
		t.Fatal("orphan exited cleanly; want killed")
	}
	// The shared control plane's parent (this test) is alive: untouched.
	for name, pid := range shared.Processes() {
		if !alive(pid) {
			t.Errorf("sweep killed the live %s (pid %d)", name, pid)
		}
	}
}

func TestSweepRemovesStaleDirs(t *testing.T) {
	stale, err := os.MkdirTemp("", tempPrefix)
	if err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(stale, ownerFile), []byte("999999999:0"), 0o600); err != nil {
		t.Fatal(err)
	}
	removed := sweepStaleDirs()
	if _, err := os.Stat(stale); !errors.Is(err, os.ErrNotExist) {
		t.Fatalf("stale folder %s kept (removed %v)", stale, removed)
	}
	// The shared control plane's folder belongs to this live process: kept.
	if _, err := os.Stat(shared.Dir); err != nil {
		t.Fatalf("live folder removed: %v", err)
	}
}

func TestSchedulerNeedsControllers(t *testing.T) {
	_, err := Start(t.Context(), Options{Scheduler: true})
	if err == nil || !strings.Contains(err.Error(), "needs Options.Controllers") {
		t.Fatalf("want an error saying the scheduler needs controllers, got %v", err)
	}
}

func TestMissingBinaryNamesTheBuildCommand(t *testing.T) {
	_, err := Start(t.Context(), Options{AssetsDir: t.TempDir()})
	var mb *MissingBinaryError
	if !errors.As(err, &mb) || !errors.Is(err, ErrMissingBinary) {
		t.Fatalf("want *MissingBinaryError, got %v", err)
	}
	if mb.Name != "etcd" || !strings.Contains(err.Error(), "loom assets") {
		t.Fatalf("error should name etcd and `loom assets`: %v", err)
	}
}

func TestDeploymentOnFakeNodes(t *testing.T) {
	env := New(t, Options{Controllers: true, Scheduler: true, Nodes: 2})
	deploy := fmt.Sprintf(`{"apiVersion":"apps/v1","kind":"Deployment","metadata":{"name":"web"},
"spec":{"replicas":3,"selector":{"matchLabels":{"app":"web"}},
"template":{"metadata":{"labels":{"app":"web"}},"spec":{"containers":[{"name":"web","image":"nginx"}]}}}}`)
	var obj map[string]any
	if err := json.Unmarshal([]byte(deploy), &obj); err != nil {
		t.Fatal(err)
	}
	if code := do(t, env, http.MethodPost, "/apis/apps/v1/namespaces/default/deployments", obj, nil); code != http.StatusCreated {
		t.Fatalf("create deployment: status %d", code)
	}
	// Wait on the condition, not on a clock: poll until 3 replicas are ready.
	ctx, cancel := context.WithTimeout(t.Context(), 2*time.Minute)
	defer cancel()
	for {
		var d struct {
			Status struct {
				ReadyReplicas int `json:"readyReplicas"`
			} `json:"status"`
		}
		do(t, env, http.MethodGet, "/apis/apps/v1/namespaces/default/deployments/web", nil, &d)
		if d.Status.ReadyReplicas == 3 {
			break
		}
		select {
		case <-ctx.Done():
			out, _ := kubectl(t, env.KubeconfigPath, "get", "deploy,rs,pods,nodes", "-o", "wide")
			t.Fatalf("deployment has %d of 3 ready replicas\n%s", d.Status.ReadyReplicas, out)
		case <-time.After(200 * time.Millisecond):
		}
	}
	var pods corev1.PodList
	do(t, env, http.MethodGet, "/api/v1/namespaces/default/pods?labelSelector=app%3Dweb", nil, &pods)
	for _, p := range pods.Items {
		if !strings.HasPrefix(p.Spec.NodeName, "kwok-node-") || p.Status.Phase != corev1.PodRunning {
			t.Errorf("pod %s on %q in phase %s", p.Name, p.Spec.NodeName, p.Status.Phase)
		}
	}
}

// TestNamespace: each call makes a new namespace named after the test,
// which exists until the test's cleanup deletes it.
func TestNamespace(t *testing.T) {
	var first string
	t.Run("sub/Test Name", func(t *testing.T) {
		first = shared.Namespace(t)
		if !strings.HasPrefix(first, "testnamespace-sub-test-name-") || len(first) != len("testnamespace-sub-test-name-")+5 {
			t.Errorf("namespace %q", first)
		}
		if second := shared.Namespace(t); second == first {
			t.Errorf("two calls gave %q", first)
		}
		var ns corev1.Namespace
		if code := do(t, shared, http.MethodGet, "/api/v1/namespaces/"+first, nil, &ns); code != http.StatusOK || ns.Status.Phase != corev1.NamespaceActive {
			t.Fatalf("GET %s: %d %s", first, code, ns.Status.Phase)
		}
	})
	// The cleanup has run: with no controller manager, the namespace is
	// Terminating.
	var ns corev1.Namespace
	code := do(t, shared, http.MethodGet, "/api/v1/namespaces/"+first, nil, &ns)
	if code == http.StatusOK && ns.Status.Phase != corev1.NamespaceTerminating {
		t.Errorf("after the cleanup, %s is %s", first, ns.Status.Phase)
	}
}

func TestNamespaceName(t *testing.T) {
	for test, prefix := range map[string]string{
		"TestX":                         "testx-",
		"Test/a_b  c":                   "test-a-b-c-",
		"///":                           "test-",
		strings.Repeat("abcdefghij", 6): "abcdefghijabcdefghijabcdefghijabcdefghij-",
	} {
		if got := namespaceName(test); !strings.HasPrefix(got, prefix) || len(got) != len(prefix)+5 {
			t.Errorf("namespaceName(%q) = %q, want %q and 5 characters", test, got, prefix)
		}
	}
}
