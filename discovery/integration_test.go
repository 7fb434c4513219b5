package discovery_test

import (
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"regexp"
	"sort"
	"strings"
	"testing"
	"time"

	"k8s.io/apimachinery/pkg/api/meta"
	"k8s.io/apimachinery/pkg/runtime/schema"

	"github.com/loom-k8s/loom/config"
	"github.com/loom-k8s/loom/discovery"
	"github.com/loom-k8s/loom/rest"
	"github.com/loom-k8s/loom/testenv"
)

// shared is the package's control plane, started by the first test that
// needs it and stopped after the last.
var shared = testenv.Shared{Options: testenv.Options{}}

func TestMain(m *testing.M) { shared.Main(m) }

// exampleEnv is the shared control plane for examples, which have no t.
func exampleEnv() *testenv.Env {
	env, err := shared.Start()
	if err != nil {
		panic(err)
	}
	return env
}

func restClient(t *testing.T) *rest.Client {
	t.Helper()
	cfg, err := config.Load(config.LoadOptions{Path: shared.Env(t).KubeconfigPath})
	if err != nil {
		t.Fatal(err)
	}
	rc, err := rest.New(cfg, rest.Options{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(rc.CloseIdleConnections)
	return rc
}

func kubectl(t *testing.T, args ...string) string {
	t.Helper()
	// Not t.Context(): cleanups run kubectl after the test's context ends.
	out, err := exec.Command(filepath.Join(testenv.AssetsDir(), "kubectl"),
		append([]string{"--kubeconfig", shared.Env(t).KubeconfigPath}, args...)...).CombinedOutput()
	if err != nil {
		t.Fatalf("kubectl %v: %v\n%s", args, err, out)
	}
	return string(out)
}

// resourceSet flattens a snapshot into "group/version resource kind scope" lines.
func resourceSet(s *discovery.Snapshot) []string {
	var out []string
	for _, l := range s.ResourceLists() {
		for _, r := range l.APIResources {
			out = append(out, fmt.Sprintf("%s %s %s %v %v %v", l.GroupVersion, r.Name, r.Kind, r.Namespaced, r.ShortNames, r.Verbs))
		}
	}
	sort.Strings(out)
	return out
}

func TestAggregatedAndLegacyAgree(t *testing.T) {
	rc := restClient(t)
	agg, err := discovery.New(rc, discovery.Options{}).Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	leg, err := discovery.New(rc, discovery.Options{Legacy: true}).Discover(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if !agg.Aggregated || leg.Aggregated {
		t.Fatalf("aggregated=%v legacy=%v", agg.Aggregated, leg.Aggregated)
	}
	if len(agg.Failed)+len(leg.Failed) != 0 {
		t.Fatalf("failures: %v %v", agg.Failed, leg.Failed)
	}
	if !reflect.DeepEqual(agg.GroupVersions(), leg.GroupVersions()) {
		t.Fatalf("group versions differ:\n%v\n%v", agg.GroupVersions(), leg.GroupVersions())
	}
	a, l := resourceSet(agg), resourceSet(leg)
	if !reflect.DeepEqual(a, l) {
		t.Fatalf("resources differ:\naggregated %d: %v\nlegacy %d: %v", len(a), a, len(l), l)
	}
	if len(a) < 50 {
		t.Fatalf("only %d resources discovered", len(a))
	}
}

func TestServerVersion(t *testing.T) {
	v, err := discovery.New(restClient(t), discovery.Options{}).ServerVersion(t.Context())
	if err != nil {
		t.Fatal(err)
	}
	if v.GitVersion != testenv.PinnedVersions().Kube {
		t.Fatalf("server version %q, want %q", v.GitVersion, testenv.PinnedVersions().Kube)
	}
}

// kubectlResolves asks kubectl which resource a name means: it runs
// `kubectl get NAME -v=6` and reads the URL kubectl requested.
func kubectlResolves(t *testing.T, name string) (gvr schema.GroupVersionResource, namespaced bool) {
	t.Helper()
	out := kubectl(t, "get", name, "-v=6")
	m := kubectlURL.FindStringSubmatch(out)
	if m == nil {
		t.Fatalf("no request URL in kubectl output:\n%s", out)
	}
	if m[1] == "api" {
		gvr = schema.GroupVersionResource{Version: m[2], Resource: m[5]}
	} else {
		gv, _ := schema.ParseGroupVersion(m[2])
		gvr = gv.WithResource(m[5])
	}
	return gvr, m[4] != ""
}

var kubectlURL = regexp.MustCompile(`url="https://[^/]+/(api|apis)/((?:[^/]+/)?v[0-9a-z]+)/((namespaces/default)/)?([a-z0-9]+)\?`)

func TestMapperResolvesAsKubectl(t *testing.T) {
	m := discovery.NewMapper(discovery.NewCached(discovery.New(restClient(t), discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	names := []string{
		"pods", "pod", "po", "Pod", "PODS",
		"deploy", "deployment", "deployments", "Deployment", "deployments.apps", "deployment.apps", "deploy.apps",
		"deployment.v1.apps", "deployments.v1.apps",
		"ev", "events", "events.events.k8s.io", "event.v1.events.k8s.io",
		"hpa", "horizontalpodautoscalers", "horizontalpodautoscalers.v1.autoscaling", "horizontalpodautoscalers.autoscaling",
		"cj", "cronjobs.batch", "jobs", "cm", "svc", "ns", "no", "sa", "ep", "pv", "pvc", "rs", "ds", "sts", "ing", "netpol",
		"crd", "customresourcedefinitions.apiextensions.k8s.io", "apiservices", "clusterroles", "rolebindings.rbac.authorization.k8s.io",
		"leases", "csr", "pc", "sc", "limits", "quota", "validatingwebhookconfigurations", "endpointslices", "ingressclasses",
	}
	for _, name := range names {
		t.Run(name, func(t *testing.T) {
			want, namespaced := kubectlResolves(t, name)
			got, err := m.ResourceFor(t.Context(), name)
			if err != nil {
				t.Fatal(err)
			}
			if got.Resource != want || got.Namespaced != namespaced {
				t.Fatalf("%s: got %v (namespaced %v), kubectl says %v (namespaced %v)", name, got.Resource, got.Namespaced, want, namespaced)
			}
		})
	}
	if _, err := m.ResourceFor(t.Context(), "nosuchthing"); !meta.IsNoMatchError(err) {
		t.Fatalf("unknown name: got %v, want a no-match error", err)
	}
	all, err := m.Category(t.Context(), "all")
	if err != nil {
		t.Fatal(err)
	}
	var got []string
	for _, mp := range all {
		got = append(got, mp.Resource.GroupResource().String())
	}
	for _, want := range []string{"pods", "services", "deployments.apps", "jobs.batch"} {
		found := false
		for _, g := range got {
			found = found || g == want
		}
		if !found {
			t.Errorf("category all = %v lacks %s", got, want)
		}
	}
	mp, err := m.RESTMapping(t.Context(), schema.GroupKind{Group: "autoscaling", Kind: "HorizontalPodAutoscaler"}, "v1")
	if err != nil || mp.Resource != (schema.GroupVersionResource{Group: "autoscaling", Version: "v1", Resource: "horizontalpodautoscalers"}) || !mp.Namespaced {
		t.Fatalf("RESTMapping hpa v1: %+v, %v", mp, err)
	}
}

const crdYAML = `apiVersion: apiextensions.k8s.io/v1
kind: CustomResourceDefinition
metadata:
  name: widgets.example.loom.dev
spec:
  group: example.loom.dev
  scope: Namespaced
  names: {plural: widgets, singular: widget, kind: Widget, shortNames: [wdg], categories: [all]}
  versions:
  - name: v1
    served: true
    storage: true
    schema: {openAPIV3Schema: {type: object, x-kubernetes-preserve-unknown-fields: true}}
`

func TestMapperFindsCRDInstalledLater(t *testing.T) {
	m := discovery.NewMapper(discovery.NewCached(discovery.New(restClient(t), discovery.Options{}), discovery.CacheOptions{}), discovery.MapperOptions{})
	if _, err := m.ResourceFor(t.Context(), "pods"); err != nil { // prime the cache
		t.Fatal(err)
	}
	path := filepath.Join(t.TempDir(), "crd.yaml")
	if err := os.WriteFile(path, []byte(crdYAML), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", path)
	kubectl(t, "wait", "--for=condition=Established", "crd/widgets.example.loom.dev")
	t.Cleanup(func() { kubectl(t, "delete", "-f", path, "--wait=false") })

	// The new resource can take a moment to appear in discovery after it is
	// Established; the mapper refreshes at most once a second on misses.
	ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
	defer cancel()
	for {
		mp, err := m.ResourceFor(ctx, "wdg")
		if err == nil {
			want := schema.GroupVersionResource{Group: "example.loom.dev", Version: "v1", Resource: "widgets"}
			if mp.Resource != want || mp.Kind.Kind != "Widget" || !mp.Namespaced {
				t.Fatalf("got %+v", mp)
			}
			return
		}
		if !meta.IsNoMatchError(err) {
			t.Fatal(err)
		}
		select {
		case <-ctx.Done():
			t.Fatalf("CRD never found: %v", err)
		case <-time.After(200 * time.Millisecond):
		}
	}
}

const brokenAPIService = `apiVersion: apiregistration.k8s.io/v1
kind: APIService
metadata:
  name: v1.broken.loom.dev
spec:
  group: broken.loom.dev
  version: v1
  groupPriorityMinimum: 1000
  versionPriority: 15
  insecureSkipTLSVerify: true
  service: {namespace: default, name: nobody-home, port: 443}
`

func TestBrokenAggregatedAPIIsReportedPerGroup(t *testing.T) {
	path := filepath.Join(t.TempDir(), "apiservice.yaml")
	if err := os.WriteFile(path, []byte(brokenAPIService), 0o600); err != nil {
		t.Fatal(err)
	}
	kubectl(t, "apply", "-f", path)
	t.Cleanup(func() { kubectl(t, "delete", "-f", path) })
	broken := schema.GroupVersion{Group: "broken.loom.dev", Version: "v1"}
	rc := restClient(t)
	for _, legacy := range []bool{false, true} {
		t.Run(fmt.Sprintf("legacy=%v", legacy), func(t *testing.T) {
			d := discovery.New(rc, discovery.Options{Legacy: legacy})
			// Wait until the group shows up in discovery at all.
			ctx, cancel := context.WithTimeout(t.Context(), time.Minute)
			defer cancel()
			var lists []*discovery.Snapshot
			for {
				s, err := d.Discover(ctx)
				if err != nil {
					t.Fatal(err)
				}
				if _, ok := s.Failed[broken]; ok {
					lists = append(lists, s)
					break
				}
				select {
				case <-ctx.Done():
					t.Fatalf("broken group never reported as failed; groups %v", s.GroupVersions())
				case <-time.After(200 * time.Millisecond):
				}
			}
			pref, err := d.ServerPreferredResources(t.Context())
			var gdf *discovery.GroupDiscoveryFailedError
			if !errors.As(err, &gdf) || gdf.Groups[broken] == nil {
				t.Fatalf("want a GroupDiscoveryFailedError naming %v, got %v", broken, err)
			}
			if !strings.Contains(err.Error(), "broken.loom.dev/v1") {
				t.Fatalf("error does not name the group: %v", err)
			}
			found := false
			for _, l := range pref {
				for _, r := range l.APIResources {
					found = found || (l.GroupVersion == "apps/v1" && r.Name == "deployments")
				}
			}
			if !found {
				t.Fatal("the healthy groups were not returned with the partial failure")
			}
		})
	}
}
