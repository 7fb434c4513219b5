// Command helmcheck checks that a Helm chart renders the same objects as a
// kustomize base: it renders the chart with Helm's own Go library (as
// `helm template --include-crds` would), builds the kustomize base with
// `kubectl kustomize`, parses both, and compares the objects one by one,
// keyed by apiVersion, kind, namespace and name. It exits with 1 and prints
// the differences when they differ.
//
// Usage:
//
//	helmcheck [-namespace NS] [-release NAME] [-set k=v,...] [-kubectl PATH] CHART_DIR KUSTOMIZE_DIR
//
// kubectl defaults to the one in Loom's assets folder ($LOOM_ASSETS, or the
// per-user cache that `make assets` fills; see testenv.AssetsDir), then to
// kubectl on $PATH.
//
// It is its own module, so that Helm (and the client-go it brings) never
// enter Loom's core module.
package main

import (
	"bytes"
	"errors"
	"flag"
	"fmt"
	"io"
	"os"
	"os/exec"
	"path/filepath"
	"reflect"
	"slices"
	"strings"

	"helm.sh/helm/v3/pkg/action"
	"helm.sh/helm/v3/pkg/chart/loader"
	"helm.sh/helm/v3/pkg/chartutil"
	"helm.sh/helm/v3/pkg/strvals"
	"sigs.k8s.io/yaml"

	"github.com/loom-k8s/loom/testenv"
)

func main() {
	err := run(os.Args[1:], os.Stdout, os.Stderr)
	if errors.Is(err, flag.ErrHelp) {
		os.Exit(2)
	}
	if err != nil {
		fmt.Fprintln(os.Stderr, "helmcheck:", err)
		os.Exit(1)
	}
}

func run(args []string, out, errOut io.Writer) error {
	fs := flag.NewFlagSet("helmcheck", flag.ContinueOnError)
	fs.SetOutput(errOut)
	ns := fs.String("namespace", "default", "the release namespace")
	release := fs.String("release", "release", "the release name")
	set := fs.String("set", "", "values, as helm's --set (k1=v1,k2=v2)")
	kubectl := fs.String("kubectl", "", "kubectl binary (default: Loom's assets folder, then $PATH)")
	if err := fs.Parse(args); err != nil {
		return err
	}
	if fs.NArg() != 2 {
		fmt.Fprintln(errOut, "usage: helmcheck [flags] CHART_DIR KUSTOMIZE_DIR")
		return flag.ErrHelp
	}
	chartDir, kustDir := fs.Arg(0), fs.Arg(1)
	vals := map[string]any{}
	if *set != "" {
		if err := strvals.ParseInto(*set, vals); err != nil {
			return fmt.Errorf("-set: %w", err)
		}
	}
	rendered, err := renderChart(chartDir, *release, *ns, vals)
	if err != nil {
		return err
	}
	built, err := kustomize(*kubectl, kustDir)
	if err != nil {
		return err
	}
	helmObjs, err := parse(rendered)
	if err != nil {
		return fmt.Errorf("chart %s: %w", chartDir, err)
	}
	kustObjs, err := parse(built)
	if err != nil {
		return fmt.Errorf("kustomize %s: %w", kustDir, err)
	}
	diffs := compare(helmObjs, kustObjs)
	if len(diffs) > 0 {
		return fmt.Errorf("the chart %s and the kustomize base %s differ:\n%s", chartDir, kustDir, strings.Join(diffs, "\n"))
	}
	fmt.Fprintf(out, "helmcheck: %d objects, the same from %s and %s\n", len(helmObjs), chartDir, kustDir)
	return nil
}

// renderChart renders the chart as `helm template --include-crds` does,
// without a cluster.
func renderChart(dir, release, ns string, vals map[string]any) (string, error) {
	ch, err := loader.Load(dir)
	if err != nil {
		return "", err
	}
	install := action.NewInstall(&action.Configuration{})
	install.DryRun = true
	install.ClientOnly = true
	install.IncludeCRDs = true
	install.Replace = true
	install.ReleaseName = release
	install.Namespace = ns
	// The Kubernetes version Loom tests against (testenv/versions.env).
	kv, err := chartutil.ParseKubeVersion(testenv.PinnedVersions().Kube)
	if err != nil {
		return "", fmt.Errorf("the pinned Kubernetes version: %w", err)
	}
	install.KubeVersion = kv
	rel, err := install.Run(ch, vals)
	if err != nil {
		return "", fmt.Errorf("rendering %s: %w", dir, err)
	}
	return rel.Manifest, nil
}

func kustomize(kubectl, dir string) (string, error) {
	if kubectl == "" {
		kubectl = filepath.Join(testenv.AssetsDir(), "kubectl")
		if _, err := os.Stat(kubectl); err != nil {
			kubectl = "kubectl"
		}
	}
	var stdout, stderr bytes.Buffer
	cmd := exec.Command(kubectl, "kustomize", dir)
	cmd.Stdout, cmd.Stderr = &stdout, &stderr
	if err := cmd.Run(); err != nil {
		return "", fmt.Errorf("kubectl kustomize %s: %v\n%s", dir, err, stderr.String())
	}
	return stdout.String(), nil
}

// object is one parsed manifest, normalised: its JSON form as a map, so
// that YAML styles (flow or block, quoting, key order) do not matter.
type object struct {
	key string
	obj map[string]any
}

func parse(stream string) ([]object, error) {
	var objs []object
	for _, doc := range splitDocs(stream) {
		var m map[string]any
		if err := yaml.Unmarshal([]byte(doc), &m); err != nil {
			return nil, fmt.Errorf("%v in:\n%s", err, doc)
		}
		if len(m) == 0 {
			continue // empty document (a comment, or a template that rendered nothing)
		}
		meta, _ := m["metadata"].(map[string]any)
		name, _ := meta["name"].(string)
		ns, _ := meta["namespace"].(string)
		key := fmt.Sprintf("%v %v %s/%s", m["apiVersion"], m["kind"], ns, name)
		objs = append(objs, object{key: key, obj: m})
	}
	slices.SortFunc(objs, func(a, b object) int { return strings.Compare(a.key, b.key) })
	return objs, nil
}

func splitDocs(stream string) []string {
	var docs []string
	var cur strings.Builder
	for line := range strings.Lines(stream) {
		if strings.TrimRight(line, " \t\r\n") == "---" {
			docs = append(docs, cur.String())
			cur.Reset()
			continue
		}
		cur.WriteString(line)
	}
	return append(docs, cur.String())
}

func compare(helm, kust []object) []string {
	var diffs []string
	byKey := map[string]map[string]any{}
	for _, o := range kust {
		byKey[o.key] = o.obj
	}
	seen := map[string]bool{}
	for _, o := range helm {
		seen[o.key] = true
		k, ok := byKey[o.key]
		switch {
		case !ok:
			diffs = append(diffs, "only in the chart: "+o.key)
		case !reflect.DeepEqual(o.obj, k):
			h, _ := yaml.Marshal(o.obj)
			kk, _ := yaml.Marshal(k)
			diffs = append(diffs, fmt.Sprintf("differs: %s\n--- chart:\n%s--- kustomize:\n%s", o.key, h, kk))
		}
	}
	for _, o := range kust {
		if !seen[o.key] {
			diffs = append(diffs, "only in the kustomize base: "+o.key)
		}
	}
	return diffs
}
