package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"runtime/debug"
	"slices"
	"strings"
	"testing"
	"time"

	admissionregistrationv1 "k8s.io/api/admissionregistration/v1"
	appsv1 "k8s.io/api/apps/v1"
	corev1 "k8s.io/api/core/v1"
	networkingv1 "k8s.io/api/networking/v1"
	rbacv1 "k8s.io/api/rbac/v1"
	metav1 "k8s.io/apimachinery/pkg/apis/meta/v1"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/testenv"
)

// TestGettingStarted is the acceptance test of Loom's release and of
// `loom init`, `loom create` and `loom assets`, and it runs
// docs/getting-started.md: every ```sh block of the page, in order, in one
// bash script (blocks headed "# terminal N" run in the background, as in a
// second terminal; "# Ctrl-C in terminal N" interrupts one).
//
// It runs the page as a user outside this repository would. The work tree
// is released (tools/release) into a file module proxy at a version of its
// own, v<the CHANGELOG's latest>-test.<time>, or $LOOM_RELEASE_VERSION;
// the script's HOME and GOPATH are empty, and GOPROXY reads that folder
// first. It shares the machine's module and build caches, and removes the
// release's version from the module cache after; with LOOM_COLD_GOCACHE
// set (make release-e2e) both are empty instead (the go command keys
// compiled packages of a module version by the version alone, so a fixed
// version such as v0.1.0 needs an empty build cache). LOOM_ASSETS is the per-user cache's
// folder of control-plane binaries, outside the repository.
//
// The page installs loom from the release, scaffolds a project, runs its
// make generate and make test (whose e2e test runs the generated
// reconciler against testenv, as its service account, and checks the
// generated role is least-privilege), starts `loom dev up` and `make run`
// with the webhooks served locally, waits for the sample to be defaulted
// by its webhook and Ready, builds the image and deploys it with make
// deploy. Then the test checks that the image is reproducible and runs as
// 65532, that the applied Deployment runs IMG, that re-running the
// scaffold skips every file and changes none, that the project needs
// neither client-go nor controller-runtime, and that the Helm chart
// renders what config/ does, webhooks included (tools/helmcheck).
//
// SLOW: a few minutes with a warm build cache; longer the first time
// (helmcheck builds Helm). -short skips it.
func TestGettingStarted(t *testing.T) {
	if testing.Short() {
		t.Skip("slow acceptance test (releases, scaffolds, builds and runs a project)")
	}
	assets := testenv.AssetsDir()
	for _, b := range []string{"kube-apiserver", "etcd", "kubectl", "controller-gen-" + controllerToolsVersion} {
		if _, err := os.Stat(filepath.Join(assets, b)); err != nil {
			t.Fatalf("%s is missing from %s: run make assets", b, assets)
		}
	}
	root, err := filepath.Abs("../..")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(t.Context(), 40*time.Minute)
	defer cancel()
	tmp := t.TempDir()

	version := os.Getenv("LOOM_RELEASE_VERSION")
	if version == "" {
		changelog, err := os.ReadFile(filepath.Join(root, "CHANGELOG.md"))
		if err != nil {
			t.Fatal(err)
		}
		m := regexp.MustCompile(`(?m)^## \[(\d+\.\d+\.\d+)\]`).FindSubmatch(changelog)
		if m == nil {
			t.Fatal("CHANGELOG.md has no released version")
		}
		version = fmt.Sprintf("v%s-test.%d", m[1], time.Now().UnixNano())
	}
	proxy := filepath.Join(tmp, "proxy")
	release := exec.CommandContext(ctx, "go", "run", "./release", "-root", root, "-rev", "worktree", "-version", version, "-out", proxy)
	release.Dir = filepath.Join(root, "tools")
	if out, err := release.CombinedOutput(); err != nil {
		t.Fatalf("releasing the work tree as %s: %v\n%s", version, err, out)
	}
	goEnv := func(name string) string {
		out, err := exec.Command("go", "env", name).Output()
		if err != nil {
			t.Fatal(err)
		}
		return strings.TrimSpace(string(out))
	}
	gocache, modcache := goEnv("GOCACHE"), ""
	if os.Getenv("LOOM_COLD_GOCACHE") != "" {
		gocache = filepath.Join(tmp, "gocache") // and GOMODCACHE empty, under GOPATH
	} else {
		// Warm: the machine's module cache, which verifies what it holds;
		// the release's own version (a new one each run) is removed after.
		modcache = goEnv("GOMODCACHE")
		t.Cleanup(func() { removeModuleVersion(modcache, "github.com/loom-k8s/loom", version) })
	}
	home, gopath := filepath.Join(tmp, "home"), filepath.Join(tmp, "gopath")
	if err := os.MkdirAll(home, 0o755); err != nil {
		t.Fatal(err)
	}
	cacheHome := filepath.Join(tmp, "cache") // loom dev's state: cache/loom/dev
	env := append(os.Environ(),
		"HOME="+home, "GOPATH="+gopath, "GOMODCACHE="+modcache, "GOCACHE="+gocache,
		"GOPROXY=file://"+proxy+","+goEnv("GOPROXY"), "GONOSUMDB=github.com/loom-k8s/loom",
		"PATH="+filepath.Join(gopath, "bin")+string(os.PathListSeparator)+os.Getenv("PATH"),
		"LOOM_ASSETS="+assets,
		"XDG_CACHE_HOME="+cacheHome,
		"KUBECONFIG=", "GOWORK=off",
	)
	loom := filepath.Join(gopath, "bin", "loom")
	t.Cleanup(func() {
		// In case the script stopped before its own loom dev down.
		_ = exec.Command(loom, "dev", "down", "--state-dir", filepath.Join(cacheHome, "loom", "dev")).Run()
		// The module cache is read-only; let t.TempDir remove it.
		_ = exec.Command("chmod", "-R", "u+w", tmp).Run()
	})

	doc, err := os.ReadFile(filepath.Join(root, "docs", "getting-started.md"))
	if err != nil {
		t.Fatal(err)
	}
	script, err := docScript(string(doc), nil, tmp)
	if err != nil {
		t.Fatal(err)
	}
	work := filepath.Join(tmp, "work")
	if err := os.MkdirAll(work, 0o755); err != nil {
		t.Fatal(err)
	}
	start := time.Now()
	cmd := exec.CommandContext(ctx, "bash", "-c", script)
	cmd.Dir, cmd.Env = work, env
	var out bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &out
	err = cmd.Run()
	t.Logf("docs/getting-started.md ran in %v", time.Since(start).Round(time.Second))
	for line := range strings.Lines(out.String()) {
		if strings.HasPrefix(line, "+ [") { // each command, with the seconds since the start
			t.Log(strings.TrimSpace(line))
		}
	}
	if err != nil {
		logs, _ := filepath.Glob(filepath.Join(tmp, "terminal-*.log"))
		for _, l := range logs {
			data, _ := os.ReadFile(l)
			out.WriteString("\n=== " + filepath.Base(l) + " ===\n" + tail(string(data), 60))
		}
		t.Fatalf("running docs/getting-started.md: %v\n%s", err, out.String())
	}
	const img = "example.com/memcached-operator:v0.0.1"
	for _, want := range []string{"loom " + version + " ", "condition met", "controller-gen webhook", "kubectl kustomize config/webhook",
		"ok  \tgithub.com/example/memcached-operator/internal/controller", "\n" + img + "\n", "serverside-applied (server dry run)"} {
		if !strings.Contains(out.String(), want) {
			t.Errorf("running docs/getting-started.md: no %q in the output:\n%s", want, out.String())
		}
	}

	project := filepath.Join(work, "memcached-operator")
	run := func(dir string, name string, args ...string) string {
		t.Helper()
		c := exec.CommandContext(ctx, name, args...)
		c.Dir, c.Env = dir, env
		out, err := c.CombinedOutput()
		if err != nil {
			t.Fatalf("%s %s: %v\n%s", name, strings.Join(args, " "), err, out)
		}
		return string(out)
	}

	// The generated unit test runs on client/fake: with no control-plane
	// binaries at all it still passes, so it starts none.
	unit := exec.CommandContext(ctx, "go", "test", "-count=1", "-run", "OnFake", "-v", "./internal/controller/")
	unit.Dir, unit.Env = project, append(slices.Clone(env), "LOOM_ASSETS="+t.TempDir())
	if out, err := unit.CombinedOutput(); err != nil || !strings.Contains(string(out), "--- PASS: TestMemcachedOnFake") {
		t.Errorf("the generated unit test without control-plane binaries: %v\n%s", err, out)
	}

	// The image: the same digest when built again, user 65532, the
	// operator as its entrypoint.
	inspect := func() string {
		t.Helper()
		return run(project, loom, "image", "inspect", "bin/image")
	}
	first := inspect()
	run(project, "make", "image", "IMG="+img)
	if again := inspect(); again != first {
		t.Errorf("make image gave another image the second time:\n%s\n%s", first, again)
	}
	if !regexp.MustCompile(`(?m)^user\s+65532:65532$`).MatchString(first) || !regexp.MustCompile(`(?m)^entrypoint\s+\[?"?/`).MatchString(first) {
		t.Errorf("the image does not run its entrypoint as 65532:\n%s", first)
	}

	// Re-running never overwrites: every file is skipped, none made.
	again := run(project, loom, "init", "--domain", "example.com", "--repo", "github.com/example/memcached-operator") +
		run(project, loom, "create", "api", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached") +
		run(project, loom, "create", "webhook", "--group", "cache", "--version", "v1alpha1", "--kind", "Memcached")
	if strings.Contains(again, "created:") || strings.Contains(again, "updated:") || !strings.Contains(again, "skipped: main.go (exists)") ||
		!strings.Contains(again, "skipped: internal/controller/memcached.go (exists)") ||
		!strings.Contains(again, "skipped: internal/controller/memcached_webhook.go (exists)") ||
		!strings.Contains(again, "skipped: config/webhook/kustomization.yaml (exists)") {
		t.Errorf("re-running init, create api and create webhook:\n%s", again)
	}

	// Loom's own stack only.
	if deps := run(project, "go", "list", "-deps", "-test", "./..."); regexp.MustCompile(`k8s\.io/client-go|sigs\.k8s\.io/controller-runtime`).MatchString(deps) {
		t.Errorf("the generated project depends on client-go or controller-runtime")
	}

	// The chart renders what config/ does.
	// (In this repository's environment: Helm's modules are not the user's.)
	helmcheck := exec.CommandContext(ctx, "go", "run", ".", "-namespace", "memcached-operator-system",
		"-set", "createNamespace=true", filepath.Join(project, "chart"), filepath.Join(project, "config"))
	helmcheck.Dir = filepath.Join(root, "tools", "helmcheck")
	hc, err := helmcheck.CombinedOutput()
	if err != nil {
		t.Fatalf("tools/helmcheck: %v\n%s", err, hc)
	}
	t.Log(strings.TrimSpace(string(hc)))
}

// removeModuleVersion removes the modules of a release (the core module
// and those under it, such as tools) at version from the module cache
// modcache: the files the go command extracted and downloaded for them.
func removeModuleVersion(modcache, module, version string) {
	var dirs []string
	for _, pattern := range []string{
		filepath.Join(modcache, module+"@"+version),
		filepath.Join(modcache, module, "*@"+version),
		filepath.Join(modcache, module, "*", "*@"+version),
	} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	for _, pattern := range []string{
		filepath.Join(modcache, "cache", "download", module, "@v", version+".*"),
		filepath.Join(modcache, "cache", "download", module, "*", "@v", version+".*"),
		filepath.Join(modcache, "cache", "download", module, "*", "*", "@v", version+".*"),
	} {
		m, _ := filepath.Glob(pattern)
		dirs = append(dirs, m...)
	}
	for _, d := range dirs {
		_ = filepath.WalkDir(d, func(p string, e os.DirEntry, err error) error {
			if err == nil && e.IsDir() {
				_ = os.Chmod(p, 0o755) // the module cache is read-only
			}
			return nil
		})
		_ = os.RemoveAll(d)
	}
}

// docScript turns a Markdown page's ```sh blocks into one bash script, with
// the replacements applied. A block whose first line is "# terminal N"
// runs in the background in its own process group, its output in
// logDir/terminal-N.log; a line "# Ctrl-C in terminal N" sends it SIGINT
// and waits for it. Background blocks still running at the end are
// interrupted too.
func docScript(doc string, replace map[string]string, logDir string) (string, error) {
	for from, to := range replace {
		doc = strings.ReplaceAll(doc, from, to)
	}
	blocks := regexp.MustCompile("(?ms)^```sh\n(.*?)^```").FindAllStringSubmatch(doc, -1)
	if len(blocks) == 0 {
		return "", fmt.Errorf("no sh blocks")
	}
	var sb strings.Builder
	sb.WriteString(`set -euo pipefail
set -m
declare -A term
stop() { local p=${term[$1]:-}; [ -n "$p" ] || return 0; kill -INT -- "-$p" 2>/dev/null || true; wait "$p" || true; unset "term[$1]"; }
trap 'for n in "${!term[@]}"; do stop "$n"; done' EXIT
`)
	terminal := regexp.MustCompile(`^# terminal (\d+)\s*$`)
	ctrlC := regexp.MustCompile(`^# Ctrl-C in terminal (\d+)`)
	for _, b := range blocks {
		body := b[1]
		first, _, _ := strings.Cut(body, "\n")
		if m := terminal.FindStringSubmatch(first); m != nil {
			fmt.Fprintf(&sb, "echo '+ (terminal %s)'\n( set -x\n%s) > %q 2>&1 &\nterm[%s]=$!\n", m[1], body, filepath.Join(logDir, "terminal-"+m[1]+".log"), m[1])
			continue
		}
		for line := range strings.Lines(body) {
			if m := ctrlC.FindStringSubmatch(line); m != nil {
				fmt.Fprintf(&sb, "echo '+ Ctrl-C in terminal %s'\nstop %s\n", m[1], m[1])
				continue
			}
			if strings.HasPrefix(strings.TrimSpace(line), "#") || strings.TrimSpace(line) == "" {
				continue
			}
			fmt.Fprintf(&sb, "echo \"+ [${SECONDS}s] \"%q\n%s", strings.TrimSpace(line), line)
		}
	}
	return sb.String(), nil
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// The generated Makefile reuses Loom's controller-gen build, named by the
// version pinned in testenv/versions.env.
func TestScaffoldControllerToolsVersion(t *testing.T) {
	data, err := os.ReadFile("../../testenv/versions.env")
	if err != nil {
		t.Fatal(err)
	}
	if want := "CONTROLLER_TOOLS_VERSION=" + controllerToolsVersion + "\n"; !strings.Contains(string(data), want) {
		t.Errorf("testenv/versions.env does not pin %q; update controllerToolsVersion in scaffold.go", strings.TrimSpace(want))
	}
}

func TestPluralize(t *testing.T) {
	for in, want := range map[string]string{"memcached": "memcacheds", "policy": "policies", "key": "keys",
		"class": "classes", "box": "boxes", "match": "matches", "at": "ats"} {
		if got := pluralize(in); got != want {
			t.Errorf("pluralize(%q) = %q, want %q", in, got, want)
		}
	}
}

// Only a version Go can download goes into a generated go.mod: builds from
// a checkout stamp pseudo-versions made up from the commit.
func TestRequirableVersion(t *testing.T) {
	vcs := []debug.BuildSetting{{Key: "vcs.revision", Value: "0123456789ab"}}
	for _, tc := range []struct {
		name     string
		path     string
		version  string
		settings []debug.BuildSetting
		want     string
	}{
		{"tagged install", "github.com/loom-k8s/loom", "v0.3.0", nil, "v0.3.0"},
		{"install at a commit", "github.com/loom-k8s/loom", "v0.0.0-20261122140000-0123456789ab", nil, "v0.0.0-20261122140000-0123456789ab"},
		{"checkout with -buildvcs", "github.com/loom-k8s/loom", "v0.0.0-20261122140000-0123456789ab", vcs, ""},
		{"checkout after a tag", "github.com/loom-k8s/loom", "v0.3.1-0.20261122140000-0123456789ab", vcs, ""},
		{"dirty checkout", "github.com/loom-k8s/loom", "v0.3.0+dirty", vcs, ""},
		{"tag in a checkout", "github.com/loom-k8s/loom", "v0.3.0", vcs, "v0.3.0"},
		{"devel", "github.com/loom-k8s/loom", "(devel)", nil, ""},
		{"another main module", "example.com/other", "v1.0.0", nil, ""},
	} {
		t.Run(tc.name, func(t *testing.T) {
			bi := &debug.BuildInfo{Main: debug.Module{Path: tc.path, Version: tc.version}, Settings: tc.settings}
			if got := requirableVersion(bi); got != tc.want {
				t.Errorf("requirableVersion(%s) = %q, want %q", tc.version, got, tc.want)
			}
		})
	}
}

func TestScaffoldFlagChecks(t *testing.T) {
	for _, tc := range []struct {
		args []string
		bad  string // in the error; "" for none
	}{
		{[]string{"--domain", "example.com", "--repo", "example.com/team/memcached-operator"}, ""},
		{[]string{"--domain", "Example.com", "--repo", "example.com/op"}, "--domain"},
		{[]string{"--domain", "example..com", "--repo", "example.com/op"}, "--domain"},
		{[]string{"--domain", "-example.com", "--repo", "example.com/op"}, "--domain"},
		{[]string{"--domain", "example.com", "--repo", "op"}, "--repo"},
		{[]string{"--domain", "example.com", "--repo", "Example.com/op"}, "--repo"},
		{[]string{"--domain", "example.com", "--repo", "example.com//op"}, "--repo"},
		{[]string{"--domain", "example.com", "--repo", "example.com/op x"}, "--repo"},
		{[]string{"--domain", "example.com", "--repo", "example.com/con"}, "--repo"},
		{[]string{"--domain", "example.com", "--repo", "example.com/op."}, "--repo"},
	} {
		t.Run(strings.Join(tc.args, " "), func(t *testing.T) {
			err := runInit(context.Background(), append(tc.args, "--dir", t.TempDir()), io.Discard, io.Discard)
			switch {
			case tc.bad == "" && err != nil:
				t.Fatalf("unexpected error: %v", err)
			case tc.bad != "" && (err == nil || !errors.Is(err, errUsage) || !strings.Contains(err.Error(), tc.bad)):
				t.Fatalf("error = %v, want a usage error naming %s", err, tc.bad)
			}
		})
	}
}

// A second version of a kind leaves the first the CRD's storage version, so
// that controller-gen can write a CRD with both.
func TestScaffoldSecondVersion(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := runInit(ctx, []string{"--domain", "example.com", "--repo", "example.com/op", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	create := func(group, version string) string {
		t.Helper()
		var out bytes.Buffer
		args := []string{"api", "--group", group, "--version", version, "--kind", "Memcached", "--dir", dir}
		if err := runCreate(ctx, args, &out, io.Discard); err != nil {
			t.Fatalf("loom create %v: %v", args, err)
		}
		return out.String()
	}
	marked := func(version string) bool {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, "api", version, "memcached_types.go"))
		if err != nil {
			t.Fatal(err)
		}
		return strings.Contains(string(b), "// +kubebuilder:storageversion\n")
	}
	create("cache", "v1alpha1")
	out := create("cache", "v1beta1")
	if !marked("v1alpha1") || marked("v1beta1") {
		t.Errorf("storage version markers: v1alpha1 %v, v1beta1 %v; want only v1alpha1", marked("v1alpha1"), marked("v1beta1"))
	}
	if !strings.Contains(out, "also in v1alpha1") {
		t.Errorf("create api of a second version does not say which version stores it:\n%s", out)
	}
	// The same kind in another group is another CRD, with its own storage version.
	create("other", "v2")
	if !marked("v2") {
		t.Error("Memcached in group other.example.com has no storage version marker")
	}
}

// controllerGenWebhooks is config/webhook/manifests.yaml as controller-gen
// (v0.21.0) writes it for a project's Memcached webhooks: its own names for
// the configurations and their Service. TestGettingStarted runs the real
// controller-gen.
const controllerGenWebhooks = `---
apiVersion: admissionregistration.k8s.io/v1
kind: MutatingWebhookConfiguration
metadata:
  name: mutating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /mutate-cache-v1alpha1-memcached}
  failurePolicy: Fail
  name: mmemcached.cache.example.com
  rules:
  - {apiGroups: [cache.example.com], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [memcacheds]}
  sideEffects: None
---
apiVersion: admissionregistration.k8s.io/v1
kind: ValidatingWebhookConfiguration
metadata:
  name: validating-webhook-configuration
webhooks:
- admissionReviewVersions: [v1]
  clientConfig:
    service: {name: webhook-service, namespace: system, path: /validate-cache-v1alpha1-memcached}
  failurePolicy: Fail
  name: vmemcached.cache.example.com
  rules:
  - {apiGroups: [cache.example.com], apiVersions: [v1alpha1], operations: [CREATE, UPDATE], resources: [memcacheds]}
  sideEffects: None
`

// kustomizeObjects builds the kustomize base dir with kubectl kustomize
// (Loom's kubectl) and returns its objects by "Kind name".
func kustomizeObjects(t *testing.T, dir string) map[string][]byte {
	t.Helper()
	out, err := exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"), "kustomize", dir).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl kustomize %s: %v\n%s", dir, err, out)
	}
	objs := map[string][]byte{}
	for _, doc := range strings.Split(string(out), "\n---\n") {
		var head struct {
			Kind     string `json:"kind"`
			Metadata struct {
				Name string `json:"name"`
			} `json:"metadata"`
		}
		if err := yaml.Unmarshal([]byte(doc), &head); err != nil {
			t.Fatalf("kubectl kustomize %s: %v in\n%s", dir, err, doc)
		}
		objs[head.Kind+" "+head.Metadata.Name] = []byte(doc)
	}
	return objs
}

// decode unmarshals the object key of objs into obj, failing the test if
// there is none.
func decode(t *testing.T, objs map[string][]byte, key string, obj any) {
	t.Helper()
	doc, ok := objs[key]
	if !ok {
		keys := slices.Sorted(maps.Keys(objs))
		t.Fatalf("no %s in config/; it has %v", key, keys)
	}
	if err := yaml.Unmarshal(doc, obj); err != nil {
		t.Fatalf("%s: %v", key, err)
	}
}

// config/ registers the webhooks of `loom create webhook` under the names
// that the operator injects its CA bundle into, its RBAC grants, and that
// point at a Service in front of the Deployment's webhook port, which the
// Deployment serves with --webhooks; without webhooks there are none of
// these. Re-running adds nothing twice.
func TestScaffoldWebhookConfig(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := runInit(ctx, []string{"--domain", "example.com", "--repo", "example.com/op", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	gvk := []string{"--group", "cache", "--version", "v1alpha1", "--kind", "Memcached", "--dir", dir}
	if err := runCreate(ctx, append([]string{"api"}, gvk...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config")
	read := func(path string) string {
		t.Helper()
		b, err := os.ReadFile(filepath.Join(dir, filepath.FromSlash(path)))
		if err != nil {
			t.Fatal(err)
		}
		return string(b)
	}
	manager := func(objs map[string][]byte) corev1.Container {
		t.Helper()
		var d appsv1.Deployment
		decode(t, objs, "Deployment op", &d)
		if len(d.Spec.Template.Spec.Containers) == 0 || d.Spec.Template.Spec.Containers[0].Name != "manager" {
			t.Fatalf("the Deployment's first container is not the manager: %+v", d.Spec.Template.Spec.Containers)
		}
		return d.Spec.Template.Spec.Containers[0]
	}

	// Without webhooks: none, and the Deployment does not serve them.
	objs := kustomizeObjects(t, config)
	for key := range objs {
		if strings.Contains(key, "Webhook") || strings.Contains(key, "webhook") {
			t.Errorf("config/ has %s before loom create webhook", key)
		}
	}
	if c := manager(objs); slices.Contains(c.Args, "--webhooks") {
		t.Errorf("the Deployment runs with --webhooks before loom create webhook: %v", c.Args)
	}

	var out bytes.Buffer
	if err := runCreate(ctx, append([]string{"webhook"}, gvk...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if !strings.Contains(out.String(), "updated: config/kustomization.yaml") {
		t.Errorf("loom create webhook did not add config/webhook to config/kustomization.yaml:\n%s", out.String())
	}
	// What make generate runs controller-gen for.
	if err := os.WriteFile(filepath.Join(config, "webhook", "manifests.yaml"), []byte(controllerGenWebhooks), 0o644); err != nil {
		t.Fatal(err)
	}
	objs = kustomizeObjects(t, config)

	// The names Run gives the manager, and the role grants.
	run, hooks := read("internal/controller/controller.go"), read("internal/controller/memcached_webhook.go")
	for _, want := range []string{`"op-system/op-webhook-service"`, `"op-validating-webhook-configuration"`, `"op-mutating-webhook-configuration"`} {
		if !strings.Contains(run, want) {
			t.Errorf("internal/controller/controller.go does not pass %s to mgr.Webhooks", want)
		}
	}
	if !strings.Contains(hooks, "resourceNames=op-validating-webhook-configuration;op-mutating-webhook-configuration") {
		t.Errorf("the RBAC marker of memcached_webhook.go does not name the configurations op-validating-webhook-configuration and op-mutating-webhook-configuration")
	}

	var svc corev1.Service
	decode(t, objs, "Service op-webhook-service", &svc)
	if svc.Namespace != "op-system" || svc.Spec.Selector["app.kubernetes.io/name"] != "op" || len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Port != 443 {
		t.Errorf("the webhook Service: namespace %q, selector %v, ports %+v; want op-system, app.kubernetes.io/name=op, 443",
			svc.Namespace, svc.Spec.Selector, svc.Spec.Ports)
	}
	var d appsv1.Deployment
	decode(t, objs, "Deployment op", &d)
	if !maps.Equal(d.Spec.Template.Labels, map[string]string{"app.kubernetes.io/name": "op"}) {
		t.Errorf("the Deployment's pods have labels %v; the webhook Service selects app.kubernetes.io/name=op", d.Spec.Template.Labels)
	}
	c := manager(objs)
	if !slices.Contains(c.Args, "--webhooks") || !slices.Contains(c.Args, "--leader-elect") {
		t.Errorf("the manager's args %v: want --webhooks added to the others", c.Args)
	}
	if len(svc.Spec.Ports) == 1 {
		target := svc.Spec.Ports[0].TargetPort
		if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool {
			return p.ContainerPort == 9443 && (target.IntValue() == 9443 || p.Name == target.String())
		}) {
			t.Errorf("the Service's targetPort %s is not the manager's port 9443 (the default --webhook-addr); ports %+v", target.String(), c.Ports)
		}
	}
	if !slices.ContainsFunc(c.VolumeMounts, func(m corev1.VolumeMount) bool { return m.MountPath == "/tmp" }) || c.SecurityContext == nil ||
		c.SecurityContext.ReadOnlyRootFilesystem == nil || !*c.SecurityContext.ReadOnlyRootFilesystem {
		t.Errorf("the manager has no writable /tmp (for its webhook certificates) on a read-only root: %+v", c.VolumeMounts)
	}

	var vwc admissionregistrationv1.ValidatingWebhookConfiguration
	decode(t, objs, "ValidatingWebhookConfiguration op-validating-webhook-configuration", &vwc)
	var mwc admissionregistrationv1.MutatingWebhookConfiguration
	decode(t, objs, "MutatingWebhookConfiguration op-mutating-webhook-configuration", &mwc)
	ccs := map[string]admissionregistrationv1.WebhookClientConfig{}
	for _, w := range vwc.Webhooks {
		ccs[w.Name] = w.ClientConfig
	}
	for _, w := range mwc.Webhooks {
		ccs[w.Name] = w.ClientConfig
	}
	for name, path := range map[string]string{"vmemcached.cache.example.com": "/validate-cache-v1alpha1-memcached", "mmemcached.cache.example.com": "/mutate-cache-v1alpha1-memcached"} {
		cc, ok := ccs[name]
		switch {
		case !ok:
			t.Errorf("no webhook %s in config/", name)
		case cc.Service == nil || cc.Service.Name != "op-webhook-service" || cc.Service.Namespace != "op-system" || cc.Service.Path == nil || *cc.Service.Path != path:
			t.Errorf("webhook %s calls %+v, want op-system/op-webhook-service at %s", name, cc.Service, path)
		case !strings.Contains(hooks, `"`+path+`"`):
			t.Errorf("memcached_webhook.go serves no %s", path)
		}
	}

	// Again: nothing new, nothing twice.
	before := read("config/kustomization.yaml")
	out.Reset()
	if err := runCreate(ctx, append([]string{"webhook"}, gvk...), &out, io.Discard); err != nil {
		t.Fatal(err)
	}
	if after := read("config/kustomization.yaml"); after != before || strings.Contains(out.String(), "created:") || strings.Contains(out.String(), "updated:") {
		t.Errorf("re-running loom create webhook changed something:\n%s\nconfig/kustomization.yaml:\n%s", out.String(), after)
	}
}

// A config/kustomization.yaml without its +loom:scaffold lines is left
// alone, with an error that says what to add by hand.
func TestScaffoldWebhookNoMarkers(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := runInit(ctx, []string{"--domain", "example.com", "--repo", "example.com/op", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	gvk := []string{"--group", "cache", "--version", "v1alpha1", "--kind", "Memcached", "--dir", dir}
	if err := runCreate(ctx, append([]string{"api"}, gvk...), io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	path := filepath.Join(dir, "config", "kustomization.yaml")
	b, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	mine := regexp.MustCompile(`(?m)^# \+loom:scaffold:.*\n`).ReplaceAll(b, nil)
	if bytes.Equal(mine, b) {
		t.Fatal("config/kustomization.yaml has no +loom:scaffold lines")
	}
	if err := os.WriteFile(path, mine, 0o644); err != nil {
		t.Fatal(err)
	}
	err = runCreate(ctx, append([]string{"webhook"}, gvk...), io.Discard, io.Discard)
	if err == nil || !strings.Contains(err.Error(), "# +loom:scaffold:resources") || !strings.Contains(err.Error(), `"- webhook"`) {
		t.Errorf("loom create webhook without the markers: %v; want an error naming the marker and the line to add", err)
	}
	if after, _ := os.ReadFile(path); !bytes.Equal(after, mine) {
		t.Errorf("config/kustomization.yaml changed:\n%s", after)
	}
}

// The CRD's plural is the one the RBAC markers name (controller-gen
// pluralizes on its own otherwise: Redis would be "redis" in the CRD and
// "redises" in the role), and --plural sets both.
func TestScaffoldPlural(t *testing.T) {
	dir := t.TempDir()
	ctx := context.Background()
	if err := runInit(ctx, []string{"--domain", "example.com", "--repo", "example.com/op", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	for kind, plural := range map[string]string{"Redis": "", "Goose": "geese"} {
		args := []string{"api", "--group", "cache", "--version", "v1", "--kind", kind, "--dir", dir}
		if plural != "" {
			args = append(args, "--plural", plural)
		} else {
			plural = pluralize(strings.ToLower(kind))
		}
		if err := runCreate(ctx, args, io.Discard, io.Discard); err != nil {
			t.Fatal(err)
		}
		lower := strings.ToLower(kind)
		types, err := os.ReadFile(filepath.Join(dir, "api", "v1", lower+"_types.go"))
		if err != nil {
			t.Fatal(err)
		}
		ctrl, err := os.ReadFile(filepath.Join(dir, "internal", "controller", lower+".go"))
		if err != nil {
			t.Fatal(err)
		}
		if !strings.Contains(string(types), "// +kubebuilder:resource:path="+plural+",") {
			t.Errorf("%s_types.go does not name the CRD's plural %s", lower, plural)
		}
		if !strings.Contains(string(ctrl), "resources="+plural+",") {
			t.Errorf("%s.go's RBAC markers do not name %s", lower, plural)
		}
	}
}

// config/ serves /metrics as kubebuilder's projects do: HTTPS on 8443 behind
// the metrics Service, a role that lets the operator ask the API server
// about callers, and a reader ClusterRole for scrapers. The NetworkPolicy
// and the ServiceMonitor build on their own and are not in the default
// kustomization.
func TestScaffoldMetricsConfig(t *testing.T) {
	dir := t.TempDir()
	if err := runInit(context.Background(), []string{"--domain", "example.com", "--repo", "example.com/op", "--dir", dir}, io.Discard, io.Discard); err != nil {
		t.Fatal(err)
	}
	config := filepath.Join(dir, "config")
	objs := kustomizeObjects(t, config)

	var d appsv1.Deployment
	decode(t, objs, "Deployment op", &d)
	c := d.Spec.Template.Spec.Containers[0]
	for _, want := range []string{"--metrics-bind-address=:8443", "--health-probe-bind-address=:8081"} {
		if !slices.Contains(c.Args, want) {
			t.Errorf("the manager's args %v lack %s", c.Args, want)
		}
	}
	if !slices.ContainsFunc(c.Ports, func(p corev1.ContainerPort) bool { return p.Name == "metrics" && p.ContainerPort == 8443 }) {
		t.Errorf("the manager's ports %+v: want metrics on 8443", c.Ports)
	}
	var svc corev1.Service
	decode(t, objs, "Service op-metrics", &svc)
	if len(svc.Spec.Ports) != 1 || svc.Spec.Ports[0].Name != "https" || svc.Spec.Ports[0].Port != 8443 || svc.Spec.Ports[0].TargetPort.String() != "metrics" {
		t.Errorf("the metrics Service's ports %+v: want https 8443 to the manager's metrics port", svc.Spec.Ports)
	}

	var reader rbacv1.ClusterRole
	decode(t, objs, "ClusterRole op-metrics-reader", &reader)
	if len(reader.Rules) != 1 || !slices.Equal(reader.Rules[0].NonResourceURLs, []string{"/metrics"}) || !slices.Equal(reader.Rules[0].Verbs, []string{"get"}) {
		t.Errorf("the metrics reader's rules %+v: want get on /metrics", reader.Rules)
	}
	var role rbacv1.ClusterRole
	decode(t, objs, "ClusterRole op", &role)
	for _, want := range []rbacv1.PolicyRule{
		{APIGroups: []string{"authentication.k8s.io"}, Resources: []string{"tokenreviews"}, Verbs: []string{"create"}},
		{APIGroups: []string{"authorization.k8s.io"}, Resources: []string{"subjectaccessreviews"}, Verbs: []string{"create"}},
	} {
		if !slices.ContainsFunc(role.Rules, func(r rbacv1.PolicyRule) bool {
			return slices.Equal(r.APIGroups, want.APIGroups) && slices.Equal(r.Resources, want.Resources) && slices.Equal(r.Verbs, want.Verbs)
		}) {
			t.Errorf("the operator's ClusterRole lacks create on %s: %+v", want.Resources[0], role.Rules)
		}
	}
	mainGo, err := os.ReadFile(filepath.Join(dir, "main.go"))
	if err != nil {
		t.Fatal(err)
	}
	for _, marker := range []string{
		"+kubebuilder:rbac:groups=authentication.k8s.io,resources=tokenreviews,verbs=create\n",
		"+kubebuilder:rbac:groups=authorization.k8s.io,resources=subjectaccessreviews,verbs=create\n",
	} {
		if !strings.Contains(string(mainGo), marker) {
			t.Errorf("main.go has no marker %s (make generate would drop the rule from role.yaml)", strings.TrimSpace(marker))
		}
	}

	for key := range objs {
		if strings.HasPrefix(key, "NetworkPolicy ") || strings.HasPrefix(key, "ServiceMonitor ") {
			t.Errorf("config/ applies %s by default", key)
		}
	}
	var np networkingv1.NetworkPolicy
	decode(t, kustomizeObjects(t, filepath.Join(config, "network-policy")), "NetworkPolicy op-allow-metrics-traffic", &np)
	if np.Namespace != "op-system" || np.Spec.PodSelector.MatchLabels["app.kubernetes.io/name"] != "op" ||
		len(np.Spec.Ingress) != 1 || len(np.Spec.Ingress[0].Ports) != 1 || np.Spec.Ingress[0].Ports[0].Port.IntValue() != 8443 {
		t.Errorf("the NetworkPolicy: %+v", np)
	}
	var sm struct {
		Metadata metav1.ObjectMeta `json:"metadata"`
		Spec     struct {
			Endpoints []struct {
				Port, Scheme string
			} `json:"endpoints"`
			Selector metav1.LabelSelector `json:"selector"`
		} `json:"spec"`
	}
	decode(t, kustomizeObjects(t, filepath.Join(config, "prometheus")), "ServiceMonitor op-metrics-monitor", &sm)
	if sm.Metadata.Namespace != "op-system" || len(sm.Spec.Endpoints) != 1 || sm.Spec.Endpoints[0].Port != "https" || sm.Spec.Endpoints[0].Scheme != "https" ||
		sm.Spec.Selector.MatchLabels["app.kubernetes.io/name"] != svc.Labels["app.kubernetes.io/name"] {
		t.Errorf("the ServiceMonitor: %+v; want the metrics Service's https port", sm)
	}
}
