package main

import (
	"bufio"
	"bytes"
	"context"
	"encoding/json"
	"errors"
	"io"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	apierrors "k8s.io/apimachinery/pkg/api/errors"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"k8s.io/apimachinery/pkg/apis/meta/v1/unstructured"
	"k8s.io/apimachinery/pkg/runtime/schema"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/client"
	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/crd"
	"github.com/loom-k8s/loom/discovery"
	atv1alpha1 "github.com/loom-k8s/loom/examples/at/api/v1alpha1"
	atconfig "github.com/loom-k8s/loom/examples/at/config"
	atoperator "github.com/loom-k8s/loom/examples/at/operator"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// widgetCRD has printer columns of every type, one of them only shown
// with -o wide (priority 1).
const widgetCRD = `
apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.loom.example
spec:
  group: loom.example
  names: {plural: widgets, singular: widget, kind: Widget, listKind: WidgetList, shortNames: [wg]}
  scope: Namespaced
  versions:
  - name: v1
    served: true
    storage: true
    schema:
      openAPIV3Schema:
        type: object
        properties:
          spec:
            type: object
            properties:
              color: {type: string}
              size: {type: integer}
              ratio: {type: number}
              ready: {type: boolean}
              since: {type: string, format: date-time}
              note: {type: string}
    additionalPrinterColumns:
    - {name: Color, type: string, jsonPath: .spec.color}
    - {name: Size, type: integer, jsonPath: .spec.size}
    - {name: Ratio, type: number, jsonPath: .spec.ratio}
    - {name: Ready, type: boolean, jsonPath: .spec.ready}
    - {name: Since, type: date, jsonPath: .spec.since}
    - {name: Note, type: string, jsonPath: .spec.note, priority: 1}
    - {name: Age, type: date, jsonPath: .metadata.creationTimestamp}
`

// widgets: long and short cells, big and fractional numbers, a note cut at
// its line break, a terminal escape, and missing fields.
var widgets = []string{`
metadata: {name: w1, namespace: default, labels: {tier: front}}
spec: {color: blue, size: 3, ratio: 1.5, ready: true, since: "2020-01-01T00:00:00Z", note: "first line\nsecond line"}
`, `
metadata: {name: a-widget-with-a-rather-long-name, namespace: default}
spec: {color: "dark \u001b[31mred", size: 12345678, ratio: 2, ready: false, note: "one\ttab"}
`, `
metadata: {name: w3, namespace: get-other}
spec: {ratio: 1e21}
`}

// TestGet runs loom get against one control plane with a running
// Deployment, a Pod in another namespace and a custom resource with printer
// columns.
func TestGet(t *testing.T) {
	f := newGetFixture(t)
	t.Run("matches kubectl", f.testMatchesKubectl)
	t.Run("output decodes", f.testOutputDecodes)
	t.Run("watch", f.testWatch)
	t.Run("watch matches kubectl", f.testWatchMatchesKubectl)
	t.Run("errors and exit codes", f.testErrorsAndExitCodes)
}

// testMatchesKubectl runs `loom get` and `kubectl get` on the same server
// with the same arguments and wants the same bytes, for built-in resources
// and for a custom resource with printer columns.
func (f *getFixture) testMatchesKubectl(t *testing.T) {
	tests := [][]string{
		{"get", "pods"},
		{"get", "pods", "-A"},
		{"get", "pods", "-o", "wide"},
		{"get", "pods", "-A", "-o", "wide"},
		{"get", "po", "-l", "app=web", "--no-headers"},
		{"get", "pods", "-n", "get-other", "--show-labels"},
		{"get", "deployments"},
		{"get", "deploy", "web", "-o", "wide"},
		{"get", "deployments.apps", "-A", "--show-labels"},
		{"get", "widgets"},
		{"get", "widgets", "-o", "wide"},
		{"get", "wg", "-A", "-owide"},
		{"get", "widget/w1", "widget/a-widget-with-a-rather-long-name"},
		{"get", "widgets.loom.example", "w1", "-n", "default", "--show-labels"},
		{"get", "pods,deploy,widgets"},
		{"get", "deploy/web", "pod/solo", "-n", "get-other", "--ignore-not-found"},
		{"get", "nodes"},
		{"get", "deploy,nodes", "-A"},
		{"get", "namespaces", "--field-selector", "metadata.name=get-other"},
		{"get", "all"},
		{"get", "pods", "-n", "get-nothing-here"},
		{"get", "pods", "-A", "-l", "app=none"},
		{"get", "deploy", "web", "-o", "yaml"},
		{"get", "pods", "-o", "json"},
		{"get", "deploy,widgets", "-A", "-o", "yaml"},
		{"get", "widgets", "-o", "name"},
		{"get", "--raw", "/apis/loom.example/v1"},
		{"get", "ats"},
		{"get", "ats", "-A", "-o", "wide"},
		{"get", "at", "hello", "-o", "wide"},
		{"get", "cnat", "-A"},
		{"get", "ats.cnat.programming-kubernetes.info", "-n", "get-other", "--show-labels"},
	}
	for _, args := range tests {
		t.Run(fmtArgs(args), func(t *testing.T) { f.matchKubectl(t, args) })
	}
}

// testOutputDecodes reads -o json and -o yaml back into objects.
func (f *getFixture) testOutputDecodes(t *testing.T) {
	out, _, err := f.loom(t.Context(), "get", "deploy", "web", "-o", "json")
	if err != nil {
		t.Fatal(err)
	}
	var d appsv1.Deployment
	if err := json.Unmarshal([]byte(out), &d); err != nil {
		t.Fatal(err)
	}
	if d.Name != "web" || d.Kind != "Deployment" || *d.Spec.Replicas != 2 || d.ManagedFields != nil {
		t.Fatalf("decoded %s %s replicas %d managedFields %v", d.Kind, d.Name, *d.Spec.Replicas, d.ManagedFields)
	}

	out, _, err = f.loom(t.Context(), "get", "pods", "-A", "-o", "yaml")
	if err != nil {
		t.Fatal(err)
	}
	var list corev1.List
	if err := yaml.Unmarshal([]byte(out), &list); err != nil {
		t.Fatal(err)
	}
	if list.Kind != "List" || len(list.Items) != 3 {
		t.Fatalf("yaml: kind %q with %d items, want a List of 3 pods", list.Kind, len(list.Items))
	}
	for _, it := range list.Items {
		var p corev1.Pod
		if err := json.Unmarshal(it.Raw, &p); err != nil {
			t.Fatal(err)
		}
		if p.Kind != "Pod" || p.Name == "" || p.Status.Phase != corev1.PodRunning {
			t.Errorf("item: %s %s/%s %s", p.Kind, p.Namespace, p.Name, p.Status.Phase)
		}
	}

	out, _, err = f.loom(t.Context(), "get", "wg", "w3", "-n", "get-other", "-o", "json", "--show-managed-fields")
	if err != nil {
		t.Fatal(err)
	}
	var w unstructured.Unstructured
	if err := w.UnmarshalJSON([]byte(out)); err != nil {
		t.Fatal(err)
	}
	if w.GetName() != "w3" || w.GetKind() != "Widget" || len(w.GetManagedFields()) == 0 {
		t.Fatalf("widget %s %s, %d managed fields", w.GetKind(), w.GetName(), len(w.GetManagedFields()))
	}
}

// testWatch watches config maps and wants one line per change, with its
// event type, under the table's header; and a watch of one object by name.
func (f *getFixture) testWatch(t *testing.T) {
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](f.rc, client.Options{})
	cms = cms.Namespace("get-watch")
	labels := map[string]string{"app": "watched"}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "first", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}

	lines, stop := f.watchLoom(t, "get", "configmaps", "-n", "get-watch", "-l", "app=watched", "-w", "--output-watch-events")
	lines.want(t, "EVENT", "NAME", "DATA", "AGE")
	lines.want(t, "ADDED", "first", "0")
	// The listing is printed: the watch runs from its resourceVersion, so
	// every change from here on is seen.
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "second-with-a-longer-name", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	lines.want(t, "ADDED", "second-with-a-longer-name", "0")
	wide := lines.last
	if _, err := cms.Mutate(ctx, "first", func(c *corev1.ConfigMap) error {
		c.Data = map[string]string{"a": "1", "b": "2"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines.want(t, "MODIFIED", "first", "2")
	// Columns keep the width of the widest row so far, as kubectl's.
	if i, j := fieldStart(lines.last, 2), fieldStart(wide, 2); i != j {
		t.Errorf("DATA at column %d in %q but %d in %q", i, lines.last, j, wide)
	}
	if err := cms.Delete(ctx, "second-with-a-longer-name", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	lines.want(t, "DELETED", "second-with-a-longer-name", "0")
	if err := stop(); err != nil {
		t.Fatalf("loom get -w, cancelled: %v", err)
	}

	// One object by name, without event types: the current row, then a
	// row per change (the watch's restatement of the object is not printed).
	lines, stop = f.watchLoom(t, "get", "configmap", "first", "-n", "get-watch", "-w")
	lines.want(t, "NAME", "DATA", "AGE")
	lines.want(t, "first", "2")
	if _, err := cms.Mutate(ctx, "first", func(c *corev1.ConfigMap) error {
		c.Data["c"] = "3"
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	lines.want(t, "first", "3")
	if err := stop(); err != nil {
		t.Fatalf("loom get NAME -w, cancelled: %v", err)
	}
}

// testWatchMatchesKubectl runs `loom get -w` and `kubectl get -w` side by
// side through the same changes and wants the same lines, but for the AGE
// column (last, so its width moves no other column): each was printed when
// its process saw the change.
func (f *getFixture) testWatchMatchesKubectl(t *testing.T) {
	ctx := t.Context()
	cms, _ := client.For[corev1.ConfigMap](f.rc, client.Options{})
	cms = cms.Namespace("get-watch")
	labels := map[string]string{"app": "compared"}
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-one", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	args := []string{"get", "cm", "-n", "get-watch", "-l", "app=compared", "-w", "--output-watch-events"}

	kctx, kill := context.WithCancel(ctx)
	defer kill()
	cmd := exec.CommandContext(kctx, filepath.Join(testenv.AssetsDir(), "kubectl"), append(args, "--kubeconfig", f.env.KubeconfigPath, "--cache-dir", f.cacheDir)...)
	stdout, err := cmd.StdoutPipe()
	if err != nil {
		t.Fatal(err)
	}
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	defer cmd.Wait()
	k := &watchLines{ch: make(chan string)}
	go func() {
		defer close(k.ch)
		sc := bufio.NewScanner(stdout)
		for sc.Scan() {
			select {
			case k.ch <- sc.Text():
			case <-kctx.Done():
			}
		}
	}()
	l, stop := f.watchLoom(t, args...)
	both := func(fields ...string) {
		t.Helper()
		k.want(t, fields...)
		l.want(t, fields...)
	}

	both("EVENT", "NAME", "DATA", "AGE")
	both("ADDED", "c-one", "0")
	if _, err := cms.Create(ctx, &corev1.ConfigMap{ObjectMeta: metav1.ObjectMeta{Name: "c-two-with-a-longer-name", Labels: labels}}, metav1.CreateOptions{}); err != nil {
		t.Fatal(err)
	}
	both("ADDED", "c-two-with-a-longer-name", "0")
	if _, err := cms.Mutate(ctx, "c-one", func(c *corev1.ConfigMap) error {
		c.Data = map[string]string{"a": "1"}
		return nil
	}); err != nil {
		t.Fatal(err)
	}
	both("MODIFIED", "c-one", "1")
	if err := cms.Delete(ctx, "c-two-with-a-longer-name", metav1.DeleteOptions{}); err != nil {
		t.Fatal(err)
	}
	both("DELETED", "c-two-with-a-longer-name", "0")
	if err := stop(); err != nil {
		t.Fatal(err)
	}
	kill()

	withoutAge := func(lines []string) string {
		var b strings.Builder
		for _, line := range lines {
			b.WriteString(line[:strings.LastIndexByte(line, ' ')+1] + "\n")
		}
		return b.String()
	}
	if got, want := withoutAge(l.all), withoutAge(k.all); got != want {
		t.Fatalf("loom printed (ages cut):\n%s\nkubectl printed:\n%s", got, want)
	}
}

// testErrorsAndExitCodes runs the binary: errors are one line on stderr
// with exit code 1 (2 for a usage error), and Ctrl-C ends a watch with exit
// code 0.
func (f *getFixture) testErrorsAndExitCodes(t *testing.T) {
	bin := buildLoom(t)
	tests := []struct {
		args   []string
		code   int
		stderr string
	}{
		{[]string{"get", "foos"}, 1, `loom: the server doesn't have a resource type "foos"` + "\n"},
		{[]string{"get", "pods", "nope"}, 1, `loom: pods "nope" not found` + "\n"},
		{[]string{"get", "widget/nope"}, 1, `loom: widgets.loom.example "nope" not found` + "\n"},
		{[]string{"get", "pods", "nope", "nada", "-o", "name"}, 1, `loom: pods "nope" not found` + "\n" + `loom: pods "nada" not found` + "\n"},
		{[]string{"get", "pods", "nope", "--ignore-not-found"}, 0, ""},
		{[]string{"get", "pods", "-n", "get-nothing-here"}, 0, "No resources found in get-nothing-here namespace.\n"},
		{[]string{"get"}, 2, "loom: usage: you must specify the type of resource to get (see loom api-resources)\n"},
		{[]string{"get", "pods", "-o", "table"}, 2, "loom: usage: -o table: want wide, yaml, json or name\n"},
		{[]string{"get", "pods", "web", "-A"}, 2, "loom: usage: a resource cannot be retrieved by name across all namespaces\n"},
		{[]string{"get", "pods", "--output-watch-events"}, 2, "loom: usage: --output-watch-events option can only be used with --watch or --watch-only\n"},
		{[]string{"get", "--raw", "/apis/batch/v1", "pods"}, 2, "loom: usage: arguments may not be passed when --raw is specified\n"},
	}
	for _, tt := range tests {
		t.Run(fmtArgs(tt.args), func(t *testing.T) {
			cmd := exec.CommandContext(t.Context(), bin, append(tt.args, "--kubeconfig", f.env.KubeconfigPath)...)
			var stderr bytes.Buffer
			cmd.Stderr = &stderr
			err := cmd.Run()
			code := 0
			var ee *exec.ExitError
			if errors.As(err, &ee) {
				code = ee.ExitCode()
			} else if err != nil {
				t.Fatal(err)
			}
			if code != tt.code || stderr.String() != tt.stderr {
				t.Fatalf("exit code %d, stderr %q; want %d, %q", code, stderr.String(), tt.code, tt.stderr)
			}
		})
	}

	// NotFound stays a typed error for callers of run.
	if _, _, err := f.loom(t.Context(), "get", "pods", "nope"); !apierrors.IsNotFound(err) {
		t.Errorf("get pods nope: %v, want a NotFound error", err)
	}

	t.Run("interrupt ends a watch", func(t *testing.T) {
		cmd := exec.CommandContext(t.Context(), bin, "get", "pods", "-A", "-w", "--kubeconfig", f.env.KubeconfigPath)
		stdout, err := cmd.StdoutPipe()
		if err != nil {
			t.Fatal(err)
		}
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		sc := bufio.NewScanner(stdout)
		if !sc.Scan() || !strings.HasPrefix(sc.Text(), "NAMESPACE") {
			t.Fatalf("first line %q", sc.Text())
		}
		// The table is printed and the watch is starting or running: Ctrl-C.
		if err := cmd.Process.Signal(syscall.SIGINT); err != nil {
			t.Fatal(err)
		}
		for sc.Scan() {
		}
		if err := cmd.Wait(); err != nil {
			t.Fatalf("after SIGINT: %v, want exit code 0", err)
		}
	})
}

// getFixture is one control plane with a running Deployment and Pod, and a
// custom resource with printer columns.
type getFixture struct {
	env      *testenv.Env
	rc       *rest.Client
	cacheDir string // kubectl's discovery cache, fresh for this server
}

func newGetFixture(t *testing.T) *getFixture {
	t.Helper()
	env := testenv.New(t, testenv.Options{Controllers: true, Scheduler: true, Nodes: 1})
	cfg, err := config.Load(config.LoadOptions{Path: env.KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	f := &getFixture{env: env, rc: rc, cacheDir: t.TempDir()}
	if err := f.setup(t.Context()); err != nil {
		t.Fatal(err)
	}
	return f
}

// setup creates the objects and waits until the pods run.
func (f *getFixture) setup(ctx context.Context) error {
	ctx, cancel := context.WithTimeout(ctx, 2*time.Minute)
	defer cancel()
	nss, _ := client.For[corev1.Namespace](f.rc, client.Options{})
	for _, ns := range []string{"get-other", "get-watch"} {
		if _, err := nss.Create(ctx, &corev1.Namespace{ObjectMeta: metav1.ObjectMeta{Name: ns}}, metav1.CreateOptions{}); err != nil {
			return err
		}
	}
	deploys, _ := client.For[appsv1.Deployment](f.rc, client.Options{})
	two := int32(2)
	labels := map[string]string{"app": "web"}
	if _, err := deploys.Namespace("default").Create(ctx, &appsv1.Deployment{
		ObjectMeta: metav1.ObjectMeta{Name: "web", Labels: labels},
		Spec: appsv1.DeploymentSpec{Replicas: &two, Selector: &metav1.LabelSelector{MatchLabels: labels},
			Template: corev1.PodTemplateSpec{ObjectMeta: metav1.ObjectMeta{Labels: labels}, Spec: corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "nginx"}}}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}
	pods, _ := client.For[corev1.Pod](f.rc, client.Options{})
	if _, err := pods.Namespace("get-other").Create(ctx, &corev1.Pod{
		ObjectMeta: metav1.ObjectMeta{Name: "solo", Labels: map[string]string{"app": "solo", "tier": "back"}},
		Spec:       corev1.PodSpec{Containers: []corev1.Container{{Name: "c", Image: "busybox"}}},
	}, metav1.CreateOptions{}); err != nil {
		return err
	}

	var c unstructured.Unstructured
	if err := yaml.Unmarshal([]byte(widgetCRD), &c.Object); err != nil {
		return err
	}
	if err := crd.Install(ctx, f.rc, []*unstructured.Unstructured{&c}, crd.Options{}); err != nil {
		return err
	}
	ws, err := client.For[unstructured.Unstructured](f.rc, client.Options{Resource: client.Resource{
		Resource:   schema.GroupVersionResource{Group: "loom.example", Version: "v1", Resource: "widgets"},
		Kind:       schema.GroupVersionKind{Group: "loom.example", Version: "v1", Kind: "Widget"},
		Namespaced: true,
	}})
	if err != nil {
		return err
	}
	for _, y := range widgets {
		w := &unstructured.Unstructured{}
		if err := yaml.Unmarshal([]byte(y), &w.Object); err != nil {
			return err
		}
		w.SetAPIVersion("loom.example/v1")
		w.SetKind("Widget")
		if _, err := ws.Namespace(w.GetNamespace()).Create(ctx, w, metav1.CreateOptions{}); err != nil {
			return err
		}
	}

	// The At example's CRD, as controller-gen wrote it, with two Ats: one
	// whose status the operator would have filled, one new.
	atCRDs, err := crd.Read(atconfig.CRDs, "crd/*.yaml")
	if err != nil {
		return err
	}
	if err := crd.Install(ctx, f.rc, atCRDs, crd.Options{}); err != nil {
		return err
	}
	ats, err := client.For[atv1alpha1.At](f.rc, client.Options{Scheme: atoperator.Scheme(), Mapper: discovery.MapperFor(f.rc)})
	if err != nil {
		return err
	}
	for _, a := range []*atv1alpha1.At{
		{ObjectMeta: metav1.ObjectMeta{Name: "hello", Namespace: "default"},
			Spec: atv1alpha1.AtSpec{Schedule: "2026-11-22T15:04:05Z", Command: `echo "Kubernetes native rocks!"`}},
		{ObjectMeta: metav1.ObjectMeta{Name: "later", Namespace: "get-other"},
			Spec: atv1alpha1.AtSpec{Schedule: "2030-01-01T00:00:00+01:00", Command: "date"}},
	} {
		created, err := ats.Namespace(a.Namespace).Create(ctx, a, metav1.CreateOptions{})
		if err != nil {
			return err
		}
		if a.Name == "hello" {
			created.Status = atv1alpha1.AtStatus{Phase: atv1alpha1.PhaseDone, PodName: "hello-pod"}
			if _, err := ats.Namespace(a.Namespace).UpdateStatus(ctx, created, metav1.UpdateOptions{}); err != nil {
				return err
			}
		}
	}

	// Wait until the three pods run and the deployment says so.
	for {
		l, err := pods.List(ctx, metav1.ListOptions{})
		if err != nil {
			return err
		}
		running := 0
		for _, p := range l.Items {
			if p.Status.Phase == corev1.PodRunning {
				running++
			}
		}
		d, err := deploys.Namespace("default").Get(ctx, "web", metav1.GetOptions{})
		if err != nil {
			return err
		}
		if running == 3 && len(l.Items) == 3 && d.Status.ReadyReplicas == 2 && d.Status.UpdatedReplicas == 2 && d.Status.AvailableReplicas == 2 {
			return nil
		}
		select {
		case <-ctx.Done():
			return errors.New("pods did not all run")
		case <-time.After(100 * time.Millisecond):
		}
	}
}

// loom runs `loom args...` in this process against the fixture's server.
func (f *getFixture) loom(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	err = run(ctx, append(args, "--kubeconfig", f.env.KubeconfigPath), &out, &errOut)
	return out.String(), errOut.String(), err
}

// kubectl runs kubectl with the same arguments.
func (f *getFixture) kubectl(ctx context.Context, args ...string) (stdout, stderr string, err error) {
	var out, errOut bytes.Buffer
	cmd := exec.CommandContext(ctx, filepath.Join(testenv.AssetsDir(), "kubectl"), append(args, "--kubeconfig", f.env.KubeconfigPath, "--cache-dir", f.cacheDir)...)
	cmd.Stdout, cmd.Stderr = &out, &errOut
	err = cmd.Run()
	return out.String(), errOut.String(), err
}

// matchKubectl wants loom's output (stdout and stderr) to be kubectl's.
// Ages and statuses move on while the commands run, so kubectl runs before
// and after loom: loom must print what one of them printed. When the two
// differ, something changed in between, and the comparison is made again.
func (f *getFixture) matchKubectl(t *testing.T, args []string) {
	t.Helper()
	ctx := t.Context()
	for range 5 {
		beforeOut, beforeErr, err := f.kubectl(ctx, args...)
		if err != nil {
			t.Fatalf("kubectl: %v\n%s", err, beforeErr)
		}
		out, errOut, err := f.loom(ctx, args...)
		if err != nil {
			t.Fatalf("loom: %v", err)
		}
		afterOut, afterErr, err := f.kubectl(ctx, args...)
		if err != nil {
			t.Fatalf("kubectl: %v\n%s", err, afterErr)
		}
		if out == beforeOut && errOut == beforeErr || out == afterOut && errOut == afterErr {
			if out == "" && errOut == "" {
				t.Fatal("no output at all")
			}
			return
		}
		if beforeOut == afterOut && beforeErr == afterErr {
			t.Fatalf("loom printed:\n%s%s\nkubectl printed:\n%s%s", out, errOut, afterOut, afterErr)
		}
	}
	t.Fatal("the output kept changing between runs; no stable comparison")
}

// fieldStart returns where the n-th (from 0) space-separated field of a
// line starts.
func fieldStart(line string, n int) int {
	i := 0
	for k := 0; ; k++ {
		for i < len(line) && line[i] == ' ' {
			i++
		}
		if k == n || i == len(line) {
			return i
		}
		for i < len(line) && line[i] != ' ' {
			i++
		}
	}
}

// watchLines reads a running `loom get -w` line by line.
type watchLines struct {
	ch   chan string
	all  []string // the lines read
	last string   // the last line read
}

// want reads the next line and wants these fields first.
func (w *watchLines) want(t *testing.T, fields ...string) {
	t.Helper()
	var line string
	select {
	case l, ok := <-w.ch:
		if !ok {
			t.Fatalf("output ended; want a line starting %q", fields)
		}
		line = l
	case <-time.After(time.Minute): // a safety net against a hang, not a timing check
		t.Fatalf("no line for a minute; want one starting %q", fields)
	}
	w.last = line
	w.all = append(w.all, line)
	got := strings.Fields(line)
	if len(got) < len(fields) || strings.Join(got[:len(fields)], " ") != strings.Join(fields, " ") {
		t.Fatalf("line %q, want it to start with %q", line, fields)
	}
}

// watchLoom starts `loom args...` (a watch) in this process; stop cancels
// it and returns its error once it has returned.
func (f *getFixture) watchLoom(t *testing.T, args ...string) (*watchLines, func() error) {
	ctx, cancel := context.WithCancel(t.Context())
	pr, pw := io.Pipe()
	done := make(chan error, 1)
	go func() {
		err := run(ctx, append(args, "--kubeconfig", f.env.KubeconfigPath), pw, io.Discard)
		pw.Close()
		done <- err
	}()
	w := &watchLines{ch: make(chan string)}
	go func() {
		defer close(w.ch)
		sc := bufio.NewScanner(pr)
		for sc.Scan() {
			select {
			case w.ch <- sc.Text():
			case <-ctx.Done():
			}
		}
		io.Copy(io.Discard, pr)
	}()
	stop := func() error {
		cancel()
		return <-done
	}
	t.Cleanup(func() { cancel() })
	return w, stop
}
